// The optimizers a training step can use, with the memory traffic of their update per parameter element.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace prenet {

struct OptimizerSpec {
    std::string name;           // as prenet and the harness name it: "sgd", "adam", ...
    std::string description;
    double element_passes;      // tensor elements read or written per parameter element by one update
    int kernels_per_tensor;     // elementwise kernels launched per parameter tensor (single-tensor path)
};

// The table, in a fixed order.
const std::vector<OptimizerSpec>& optimizers();
// Lookup by name (case-insensitive); throws std::invalid_argument listing the known optimizers.
const OptimizerSpec& find_optimizer(std::string_view name);

}  // namespace prenet
