#include "prenet/fitted_range.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace prenet {

namespace {

// How far from the balanced split to look for an exact divisor of the rows.
constexpr std::int64_t kDivisorSearch = 64;

bool within(std::int64_t value, const std::pair<std::int64_t, std::int64_t>& range) {
    return range.first <= value && value <= range.second;
}

}  // namespace

bool beyond_fitted(const LayerConfig& config, const ParameterRanges& ranges, const std::vector<std::string>& names) {
    for (const auto& name : names) {
        const auto range = ranges.find(name);
        if (range != ranges.end() && !within(config[name], range->second)) return true;
    }
    return false;
}

LayerConfig within_fitted_rows(const LayerConfig& config, const ParameterRanges& ranges) {
    const auto& rows = config.kind().row_parameters;
    if (!rows) return config;
    const auto first = ranges.find(rows->first);
    const auto second = ranges.find(rows->second);
    if (first == ranges.end() || second == ranges.end()) return config;
    const std::int64_t a = config[rows->first];
    const std::int64_t b = config[rows->second];
    if (within(a, first->second) && within(b, second->second)) return config;
    if (first->second.second < 1 || second->second.second < 1) return config;  // no rows were fitted
    const std::int64_t total = a * b;
    const std::int64_t second_low = std::max<std::int64_t>(1, second->second.first);
    // The first factor's values that leave the second within its range.
    const std::int64_t low = std::max(first->second.first, (total + second->second.second - 1) / second->second.second);
    const std::int64_t high = std::min(first->second.second, total / second_low);
    if (low > high) return config;  // no split within: the predictor extrapolates
    const auto balanced =
        std::clamp<std::int64_t>(std::llround(std::sqrt(static_cast<double>(total))), low, high);
    std::int64_t chosen = balanced;
    for (std::int64_t step = 0; step <= kDivisorSearch; ++step) {
        if (balanced - step >= low && total % (balanced - step) == 0) {
            chosen = balanced - step;
            break;
        }
        if (balanced + step <= high && total % (balanced + step) == 0) {
            chosen = balanced + step;
            break;
        }
    }
    const std::int64_t other = std::clamp<std::int64_t>(
        std::llround(static_cast<double>(total) / static_cast<double>(chosen)), second_low, second->second.second);
    std::vector<std::int64_t> values = config.values();
    values[config.kind().parameter_index(rows->first)] = chosen;
    values[config.kind().parameter_index(rows->second)] = other;
    return LayerConfig(config.kind(), std::move(values));
}

}  // namespace prenet
