// Clocks for the phases of one timed iteration: mark() at each phase boundary, then finish() returns the
// durations between consecutive marks in milliseconds. The host clock serves the CPU, whose operators run
// synchronously; CUDA events serve the GPU, timing on the device with no host synchronisation between marks.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

namespace prenet::harness {

class PhaseClock {
public:
    virtual ~PhaseClock() = default;
    virtual void mark() = 0;
    virtual std::vector<double> finish() = 0;
};

class HostClock : public PhaseClock {
public:
    void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
    std::vector<double> finish() override;

private:
    std::vector<std::chrono::steady_clock::time_point> marks_;
};

class CudaEventClock : public PhaseClock {
public:
    CudaEventClock();
    ~CudaEventClock() override;
    void mark() override;
    std::vector<double> finish() override;  // waits for the last event only

private:
    std::vector<void*> events_;  // a pool reused across iterations
    std::size_t used_ = 0;
};

std::unique_ptr<PhaseClock> make_clock(bool cuda);

}  // namespace prenet::harness
