// Fitted regressors evaluated natively: linear models and MLPs with Eigen, tree ensembles (gradient-boosted
// trees and random forests) from xgboost's JSON model format. Models are fitted in Python (python/prenet/training.py)
// and stored in a predictor bundle (predictor_bundle.hpp).
#pragma once

#include <Eigen/Core>

#include <memory>
#include <string>

namespace prenet {

using FeatureMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class Regressor {
public:
    virtual ~Regressor() = default;
    // One prediction per row of `inputs`; throws std::invalid_argument if the column count is wrong.
    virtual Eigen::VectorXd predict(const FeatureMatrix& inputs) const = 0;
};

// Families: "linear", "mlp" (JSON weights written by prenet.training), "xgboost" and "random_forest"
// (xgboost JSON models). Throws std::runtime_error naming the file and the problem.
std::unique_ptr<Regressor> load_regressor(const std::string& family, const std::string& path, std::size_t inputs);

}  // namespace prenet
