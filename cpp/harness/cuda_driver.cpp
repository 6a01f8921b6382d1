#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <initializer_list>
#include <stdexcept>

namespace prenet::harness {

namespace {

// CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT in cuda.h.
constexpr int kAttributeMultiprocessorCount = 16;

// The first of `names` that the library exports (newer drivers add _v2 entry points beside the old ones).
template <typename Function>
void resolve(void* library, Function& target, std::initializer_list<const char*> names, std::string& error) {
    for (const char* name : names) {
        if (void* symbol = dlsym(library, name)) {
            target = reinterpret_cast<Function>(symbol);
            return;
        }
    }
    if (error.empty()) error = std::string("libcuda.so.1 lacks ") + *names.begin();
}

}  // namespace

const CudaDriver& CudaDriver::instance() {
    static const CudaDriver driver;
    return driver;
}

CudaDriver::CudaDriver() {
    library_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library_) {
        error_ = std::string("the CUDA driver (libcuda.so.1) cannot be loaded: ") + dlerror();
        return;
    }
    resolve(library_, init_, {"cuInit"}, error_);
    resolve(library_, device_get_, {"cuDeviceGet"}, error_);
    resolve(library_, device_get_name_, {"cuDeviceGetName"}, error_);
    resolve(library_, device_get_attribute_, {"cuDeviceGetAttribute"}, error_);
    resolve(library_, driver_get_version_, {"cuDriverGetVersion"}, error_);
    resolve(library_, event_create_, {"cuEventCreate"}, error_);
    resolve(library_, event_record_, {"cuEventRecord"}, error_);
    resolve(library_, event_synchronize_, {"cuEventSynchronize"}, error_);
    resolve(library_, event_elapsed_time_, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, error_);
    resolve(library_, event_destroy_, {"cuEventDestroy_v2", "cuEventDestroy"}, error_);
    if (error_.empty() && init_(0) != 0) error_ = "cuInit failed: no usable GPU";
}

void CudaDriver::check(int result, const char* what) const {
    if (result != 0) {
        throw std::runtime_error(std::string(what) + " failed with CUDA driver error " + std::to_string(result));
    }
}

std::string CudaDriver::device_name(int device) const {
    int handle = 0;
    check(device_get_(&handle, device), "cuDeviceGet");
    char name[256] = {};
    check(device_get_name_(name, sizeof(name) - 1, handle), "cuDeviceGetName");
    return name;
}

int CudaDriver::multiprocessor_count(int device) const {
    int handle = 0, count = 0;
    check(device_get_(&handle, device), "cuDeviceGet");
    check(device_get_attribute_(&count, kAttributeMultiprocessorCount, handle), "cuDeviceGetAttribute");
    return count;
}

int CudaDriver::driver_version() const {
    int version = 0;
    check(driver_get_version_(&version), "cuDriverGetVersion");
    return version;
}

void* CudaDriver::create_event() const {
    void* event = nullptr;
    check(event_create_(&event, 0), "cuEventCreate");
    return event;
}

void CudaDriver::record_event(void* event) const { check(event_record_(event, nullptr), "cuEventRecord"); }

void CudaDriver::synchronize_event(void* event) const { check(event_synchronize_(event), "cuEventSynchronize"); }

float CudaDriver::elapsed_ms(void* start, void* end) const {
    float ms = 0;
    check(event_elapsed_time_(&ms, start, end), "cuEventElapsedTime");
    return ms;
}

void CudaDriver::destroy_event(void* event) const { event_destroy_(event); }

}  // namespace prenet::harness
