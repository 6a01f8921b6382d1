// Where a bundle's predictors were fitted: each layer kind's parameter ranges in its data (the manifest's
// fitted_on.ranges), and a configuration's rows placed within them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "prenet/layer_kind.hpp"

namespace prenet {

// Per parameter name, the smallest and the largest value in the data a kind's predictors were fitted on.
using ParameterRanges = std::map<std::string, std::pair<std::int64_t, std::int64_t>>;

// Whether `config` lies beyond `ranges` in one of the parameters `names` (a parameter without a range counts as
// within).
bool beyond_fitted(const LayerConfig& config, const ParameterRanges& ranges, const std::vector<std::string>& names);

// `config` with the product of its kind's row_parameters split anew where one of the two lies outside `ranges`
// and a split within them exists: the split nearest to equal factors, exact where a divisor of the product lies
// near it. Otherwise (no row parameters, no ranges for them, already within, no split within) `config` itself.
// A predictor fitted on 509 rows at most then times 4,096 rows of one sample as 64 samples of 64 rows, work it
// has seen, instead of extrapolating in one feature.
LayerConfig within_fitted_rows(const LayerConfig& config, const ParameterRanges& ranges);

}  // namespace prenet
