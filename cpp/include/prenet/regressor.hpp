// Fitted models evaluated natively: regressors (linear models and MLPs with Eigen, tree ensembles of gradient-boosted
// trees and random forests from xgboost's JSON model format) and tree classifiers (the same format). Models are
// fitted in Python (python/prenet/training.py) and stored in a predictor bundle (predictor_bundle.hpp).
#pragma once

#include <Eigen/Core>

#include <memory>
#include <string>
#include <vector>

namespace prenet {

using FeatureMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class Regressor {
public:
    virtual ~Regressor() = default;
    // One prediction per row of `inputs`; throws std::invalid_argument if the column count is wrong.
    virtual Eigen::VectorXd predict(const FeatureMatrix& inputs) const = 0;
};

// Families: "linear", "mlp" (JSON weights written by prenet.training), "xgboost" and "random_forest"
// (xgboost JSON models). Throws std::runtime_error naming the file and the problem. With a `cache_folder`, tree
// models are read through binary copies kept there (made on the first read, used while the file is unchanged).
std::unique_ptr<Regressor> load_regressor(const std::string& family, const std::string& path, std::size_t inputs,
                                          const std::string& cache_folder = "");

class Classifier {
public:
    virtual ~Classifier() = default;
    // The index of the most probable class per row of `inputs`; throws std::invalid_argument if the column count
    // is wrong.
    virtual std::vector<std::size_t> predict_class(const FeatureMatrix& inputs) const = 0;
};

// A multi-class xgboost JSON model (multi:softprob or multi:softmax) over `inputs` columns and `classes` classes.
// Throws std::runtime_error naming the file and the problem. `cache_folder` as load_regressor's.
std::unique_ptr<Classifier> load_classifier(const std::string& path, std::size_t inputs, std::size_t classes,
                                            const std::string& cache_folder = "");

}  // namespace prenet
