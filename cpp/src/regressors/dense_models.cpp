// Linear regression and the MLP, evaluated with Eigen from the JSON weights prenet.training writes:
// {"mean": [...], "scale": [...], "layers": [{"weight": [[out x in]], "bias": [out]}, ...]}, inputs standardised
// as (x - mean) / scale, ReLU between layers, none after the last (a linear model is a one-layer MLP).
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "regressors.hpp"

namespace prenet::regressors {

namespace {

Eigen::VectorXd to_vector(const nlohmann::json& values) {
    Eigen::VectorXd v(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) v[static_cast<Eigen::Index>(i)] = values[i].get<double>();
    return v;
}

class DenseNetwork : public Regressor {
public:
    DenseNetwork(const nlohmann::json& model, std::size_t inputs, const std::string& path) {
        mean_ = to_vector(model.at("mean"));
        scale_ = to_vector(model.at("scale"));
        for (const auto& layer : model.at("layers")) {
            const auto& rows = layer.at("weight");
            Eigen::MatrixXd w(rows.size(), rows.at(0).size());
            for (std::size_t r = 0; r < rows.size(); ++r) {
                if (rows[r].size() != static_cast<std::size_t>(w.cols())) {
                    throw std::runtime_error(path + ": ragged weight matrix");
                }
                for (std::size_t c = 0; c < rows[r].size(); ++c) w(r, c) = rows[r][c].get<double>();
            }
            weights_.push_back(std::move(w));
            biases_.push_back(to_vector(layer.at("bias")));
        }
        if (weights_.empty() || mean_.size() != static_cast<Eigen::Index>(inputs) || scale_.size() != mean_.size() ||
            weights_.front().cols() != mean_.size() || weights_.back().rows() != 1) {
            throw std::runtime_error(path + ": layer sizes do not match " + std::to_string(inputs) +
                                     " inputs and one output");
        }
        for (std::size_t i = 0; i < weights_.size(); ++i) {
            if (biases_[i].size() != weights_[i].rows() || (i > 0 && weights_[i].cols() != weights_[i - 1].rows())) {
                throw std::runtime_error(path + ": layer " + std::to_string(i) + " does not fit the previous one");
            }
        }
    }

    Eigen::VectorXd predict(const FeatureMatrix& inputs) const override {
        if (inputs.cols() != mean_.size()) {
            throw std::invalid_argument("model expects " + std::to_string(mean_.size()) + " features, got " +
                                        std::to_string(inputs.cols()));
        }
        // Activations as columns, one per row of `inputs`.
        Eigen::MatrixXd h = ((inputs.rowwise() - mean_.transpose()).array().rowwise() / scale_.transpose().array())
                                .matrix()
                                .transpose();
        for (std::size_t i = 0; i < weights_.size(); ++i) {
            h = (weights_[i] * h).colwise() + biases_[i];
            if (i + 1 < weights_.size()) h = h.cwiseMax(0.0);  // ReLU
        }
        return h.row(0).transpose();
    }

private:
    Eigen::VectorXd mean_, scale_;
    std::vector<Eigen::MatrixXd> weights_;
    std::vector<Eigen::VectorXd> biases_;
};

}  // namespace

std::unique_ptr<Regressor> load_dense(const std::string& path, std::size_t inputs) {
    const std::string text = read_model_file(path);
    try {
        return std::make_unique<DenseNetwork>(nlohmann::json::parse(text), inputs, path);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + ": not a valid dense model (" + e.what() + ")");
    }
}

}  // namespace prenet::regressors
