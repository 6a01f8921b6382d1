#include "speed_reference.hpp"

#include <chrono>
#include <functional>
#include <vector>

#include "repeat_timer.hpp"

namespace prenet::harness {

namespace {

// The product's side (the validation's reference product, bench/validate_cpu.py), the copy's elements and the
// timed repetitions of each after one untimed run: about 30 ms a row on this project's AMD EPYC (8 x 2.7 + 8 x 0.8 ms).
constexpr std::int64_t kMatmulSide = 512;
constexpr std::int64_t kCopyElements = std::int64_t{4} << 20;
constexpr int kRepetitions = 7;

double median_ms(const std::function<void()>& work) {
    work();
    std::vector<double> times;
    for (int i = 0; i < kRepetitions; ++i) {
        const auto started = std::chrono::steady_clock::now();
        work();
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    }
    return quantile(times, 0.5);
}

}  // namespace

SpeedProbe::SpeedProbe()
    : left_(torch::randn({kMatmulSide, kMatmulSide})),
      right_(torch::randn({kMatmulSide, kMatmulSide})),
      product_(torch::empty({kMatmulSide, kMatmulSide})),
      source_(torch::randn({kCopyElements})),
      destination_(torch::empty({kCopyElements})) {}

SpeedReference SpeedProbe::time() {
    torch::NoGradGuard no_grad;
    return {median_ms([&] { torch::mm_out(product_, left_, right_); }),
            median_ms([&] { destination_.copy_(source_); })};
}

}  // namespace prenet::harness
