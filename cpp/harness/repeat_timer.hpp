// Warm-up, then repeated timing of one iteration until the spread is small or a time cap is reached.
#pragma once

#include <functional>
#include <vector>

#include "phase_clock.hpp"

namespace prenet::harness {

struct RepeatPolicy {
    int warmup_iterations = 2;     // at least this many untimed iterations ...
    double warmup_ms = 20;         // ... and at least this long
    int min_reps = 5;
    int max_reps = 200;
    double max_ms = 300;           // stop timing after this much wall time (past min_reps)
    double target_spread = 0.05;   // stop once the interquartile range is this fraction of the median
};

struct PhaseStats {
    double median = 0, p25 = 0, p75 = 0, min = 0, max = 0;
};

struct Measurement {
    std::vector<PhaseStats> phases;  // one per interval between the iteration's marks
    PhaseStats total;                // of the whole iteration (sum of its phases)
    int reps = 0;
    bool converged = false;          // spread target met before a cap
};

// Quantile q of `values` by linear interpolation between order statistics.
double quantile(std::vector<double> values, double q);
PhaseStats summarise(const std::vector<double>& values);

// `iteration` calls clock.mark() at each phase boundary (first mark before its first phase).
Measurement measure(const std::function<void(PhaseClock&)>& iteration, PhaseClock& clock, const RepeatPolicy& policy);

}  // namespace prenet::harness
