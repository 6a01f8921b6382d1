// The CUDA driver API, loaded at run time from libcuda.so.1 so that the harness builds without CUDA headers
// (against Debian's CPU-only LibTorch) and still times on the device where a GPU and its driver exist.
#pragma once

#include <string>

namespace prenet::harness {

class CudaDriver {
public:
    // The process-wide driver; loads libcuda.so.1 on first use.
    static const CudaDriver& instance();

    bool available() const { return error_.empty(); }
    const std::string& why_unavailable() const { return error_; }

    std::string device_name(int device) const;
    int multiprocessor_count(int device) const;
    int driver_version() const;  // e.g. 13000 for CUDA 13.0

    // Events on the legacy default stream, where LibTorch launches its kernels unless told otherwise.
    void* create_event() const;
    void record_event(void* event) const;
    void synchronize_event(void* event) const;
    float elapsed_ms(void* start, void* end) const;
    void destroy_event(void* event) const;

private:
    CudaDriver();
    void check(int result, const char* what) const;

    std::string error_;
    void* library_ = nullptr;
    int (*init_)(unsigned) = nullptr;
    int (*device_get_)(int*, int) = nullptr;
    int (*device_get_name_)(char*, int, int) = nullptr;
    int (*device_get_attribute_)(int*, int, int) = nullptr;
    int (*driver_get_version_)(int*) = nullptr;
    int (*event_create_)(void**, unsigned) = nullptr;
    int (*event_record_)(void*, void*) = nullptr;
    int (*event_synchronize_)(void*) = nullptr;
    int (*event_elapsed_time_)(float*, void*, void*) = nullptr;
    int (*event_destroy_)(void*) = nullptr;
};

}  // namespace prenet::harness
