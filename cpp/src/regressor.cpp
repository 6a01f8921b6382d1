#include "prenet/regressor.hpp"

#include <stdexcept>

#include "regressors/regressors.hpp"

namespace prenet {

std::unique_ptr<Regressor> load_regressor(const std::string& family, const std::string& path, std::size_t inputs) {
    if (family == "linear" || family == "mlp") return regressors::load_dense(path, inputs);
    if (family == "xgboost" || family == "random_forest" || family == "gradient_boosting") {
        return regressors::load_tree_ensemble(path, inputs);
    }
    throw std::runtime_error(path + ": unknown model family '" + family +
                             "'; known: linear mlp xgboost random_forest gradient_boosting");
}

}  // namespace prenet
