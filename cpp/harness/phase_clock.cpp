#include "phase_clock.hpp"

#include <stdexcept>

#include "cuda_driver.hpp"

namespace prenet::harness {

std::vector<double> HostClock::finish() {
    std::vector<double> durations;
    for (std::size_t i = 1; i < marks_.size(); ++i) {
        durations.push_back(std::chrono::duration<double, std::milli>(marks_[i] - marks_[i - 1]).count());
    }
    marks_.clear();
    return durations;
}

CudaEventClock::CudaEventClock() {
    if (!CudaDriver::instance().available()) throw std::runtime_error(CudaDriver::instance().why_unavailable());
}

CudaEventClock::~CudaEventClock() {
    for (void* event : events_) CudaDriver::instance().destroy_event(event);
}

void CudaEventClock::mark() {
    const auto& driver = CudaDriver::instance();
    if (used_ == events_.size()) events_.push_back(driver.create_event());
    driver.record_event(events_[used_++]);
}

std::vector<double> CudaEventClock::finish() {
    const auto& driver = CudaDriver::instance();
    std::vector<double> durations;
    if (used_ > 0) driver.synchronize_event(events_[used_ - 1]);
    for (std::size_t i = 1; i < used_; ++i) durations.push_back(driver.elapsed_ms(events_[i - 1], events_[i]));
    used_ = 0;
    return durations;
}

std::unique_ptr<PhaseClock> make_clock(bool cuda) {
    if (cuda) return std::make_unique<CudaEventClock>();
    return std::make_unique<HostClock>();
}

}  // namespace prenet::harness
