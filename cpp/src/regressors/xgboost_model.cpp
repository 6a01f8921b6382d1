// Tree ensembles through xgboost's C API: the JSON model written by Python xgboost (gradient-boosted trees, or a
// random forest as one round of parallel trees), predicted in place from a dense float32 matrix.
#include <xgboost/c_api.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "regressors.hpp"

namespace prenet::regressors {

namespace {

void check(int status, const std::string& what) {
    if (status != 0) throw std::runtime_error(what + ": " + XGBGetLastError());
}

class XgboostModel : public Regressor {
public:
    XgboostModel(const std::string& path, std::size_t inputs) : inputs_(inputs) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw std::runtime_error("cannot open model file '" + path + "'");
        std::stringstream buffer;
        buffer << in.rdbuf();
        const std::string bytes = buffer.str();
        check(XGBoosterCreate(nullptr, 0, &booster_), "XGBoosterCreate");
        try {
            check(XGBoosterLoadModelFromBuffer(booster_, bytes.data(), bytes.size()), path);
            bst_ulong features = 0;
            check(XGBoosterGetNumFeature(booster_, &features), path);
            if (features != inputs) {
                throw std::runtime_error(path + ": the model takes " + std::to_string(features) + " features, the bundle lists " +
                                         std::to_string(inputs));
            }
        } catch (...) {
            XGBoosterFree(booster_);
            throw;
        }
    }
    ~XgboostModel() override { XGBoosterFree(booster_); }
    XgboostModel(const XgboostModel&) = delete;
    XgboostModel& operator=(const XgboostModel&) = delete;

    Eigen::VectorXd predict(const FeatureMatrix& inputs) const override {
        if (inputs.cols() != static_cast<Eigen::Index>(inputs_)) {
            throw std::invalid_argument("model expects " + std::to_string(inputs_) + " features, got " +
                                        std::to_string(inputs.cols()));
        }
        const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> values = inputs.cast<float>();
        // The array interface protocol (NumPy's __array_interface__) describing `values`.
        std::ostringstream interface;
        interface << R"({"data": [)" << reinterpret_cast<std::uintptr_t>(values.data()) << R"(, true], "shape": [)"
                  << values.rows() << ", " << values.cols() << R"(], "typestr": "<f4", "version": 3})";
        const char* config = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                             R"( "strict_shape": false, "missing": NaN, "cache_id": 0})";
        const bst_ulong* shape = nullptr;
        bst_ulong dims = 0;
        const float* result = nullptr;
        check(XGBoosterPredictFromDense(booster_, interface.str().c_str(), config, nullptr, &shape, &dims, &result),
              "XGBoosterPredictFromDense");
        Eigen::VectorXd out(values.rows());
        for (Eigen::Index i = 0; i < values.rows(); ++i) out[i] = result[i];
        return out;
    }

private:
    BoosterHandle booster_ = nullptr;
    std::size_t inputs_;
};

}  // namespace

std::unique_ptr<Regressor> load_xgboost(const std::string& path, std::size_t inputs) {
    return std::make_unique<XgboostModel>(path, inputs);
}

}  // namespace prenet::regressors
