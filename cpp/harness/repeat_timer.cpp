#include "repeat_timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace prenet::harness {

double quantile(std::vector<double> values, double q) {
    if (values.empty()) throw std::invalid_argument("quantile of no values");
    std::sort(values.begin(), values.end());
    const double position = q * static_cast<double>(values.size() - 1);
    const auto below = static_cast<std::size_t>(std::floor(position));
    const auto above = std::min(below + 1, values.size() - 1);
    return values[below] + (position - static_cast<double>(below)) * (values[above] - values[below]);
}

PhaseStats summarise(const std::vector<double>& values) {
    return {quantile(values, 0.5), quantile(values, 0.25), quantile(values, 0.75),
            *std::min_element(values.begin(), values.end()), *std::max_element(values.begin(), values.end())};
}

Measurement measure(const std::function<void(PhaseClock&)>& iteration, PhaseClock& clock, const RepeatPolicy& policy) {
    using Clock = std::chrono::steady_clock;
    auto elapsed_ms = [](Clock::time_point since) {
        return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
    };
    const auto warmup_start = Clock::now();
    for (int i = 0; i < policy.warmup_iterations || elapsed_ms(warmup_start) < policy.warmup_ms; ++i) {
        iteration(clock);
        clock.finish();
        if (i >= 1000) break;  // tiny iterations: enough warm-up by count
    }
    std::vector<std::vector<double>> phases;
    std::vector<double> totals;
    Measurement result;
    const auto start = Clock::now();
    while (true) {
        iteration(clock);
        const auto durations = clock.finish();
        if (phases.empty()) phases.resize(durations.size());
        if (durations.size() != phases.size()) throw std::logic_error("iteration marked a varying number of phases");
        for (std::size_t p = 0; p < durations.size(); ++p) phases[p].push_back(durations[p]);
        totals.push_back(std::accumulate(durations.begin(), durations.end(), 0.0));
        const int reps = static_cast<int>(totals.size());
        if (reps < policy.min_reps) continue;
        const double median = quantile(totals, 0.5);
        const double spread = median > 0 ? (quantile(totals, 0.75) - quantile(totals, 0.25)) / median : 0.0;
        if (spread <= policy.target_spread) {
            result.converged = true;
            break;
        }
        if (reps >= policy.max_reps || elapsed_ms(start) >= policy.max_ms) break;
    }
    for (const auto& values : phases) result.phases.push_back(summarise(values));
    result.total = summarise(totals);
    result.reps = static_cast<int>(totals.size());
    return result;
}

}  // namespace prenet::harness
