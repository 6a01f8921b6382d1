// Tree ensembles in xgboost's JSON model format (what Python xgboost's save_model writes): gradient-boosted trees,
// or a random forest as parallel trees, evaluated natively. Reading the format directly keeps the core free of
// libxgboost (GPU machines often lack it) and a one-layer prediction free of the C API's per-call set-up.
// Semantics follow xgboost's predictor: inputs as float32, go left when x < split_condition (a missing value,
// NaN, follows default_left), leaf values in split_conditions; output = base_score + sum of leaves
// (reg:squarederror, identity link; a forest's leaves are already divided by its tree count).
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "regressors.hpp"

namespace prenet::regressors {

namespace {

// One node in one record (a walk touches one cache line per level): children indices (left == -1 at a leaf),
// the input it splits on, the split condition or leaf value, and where a missing value goes.
struct Node {
    std::int32_t left, right, feature;
    float threshold;
    bool default_left;
};

using Tree = std::vector<Node>;

template <typename T>
std::vector<T> numbers(const nlohmann::json& values) {
    std::vector<T> out;
    out.reserve(values.size());
    for (const auto& v : values) out.push_back(v.is_boolean() ? static_cast<T>(v.get<bool>()) : v.get<T>());
    return out;
}

Tree read_tree(const nlohmann::json& j, std::size_t inputs, const std::string& where) {
    const auto left = numbers<std::int32_t>(j.at("left_children"));
    const auto right = numbers<std::int32_t>(j.at("right_children"));
    const auto feature = numbers<std::int32_t>(j.at("split_indices"));
    const auto threshold = numbers<float>(j.at("split_conditions"));
    const auto default_left = numbers<std::uint8_t>(j.at("default_left"));
    const auto nodes = static_cast<std::int32_t>(left.size());
    if (nodes == 0 || right.size() != left.size() || feature.size() != left.size() ||
        threshold.size() != left.size() || default_left.size() != left.size()) {
        throw std::runtime_error(where + ": node arrays of different lengths");
    }
    Tree tree(left.size());
    for (std::int32_t n = 0; n < nodes; ++n) {
        tree[n] = Node{left[n], right[n], feature[n], threshold[n], default_left[n] != 0};
        if (left[n] == -1) continue;
        // Children come after their parent, so every walk ends at a leaf.
        if (left[n] <= n || left[n] >= nodes || right[n] <= n || right[n] >= nodes || feature[n] < 0 ||
            feature[n] >= static_cast<std::int32_t>(inputs)) {
            throw std::runtime_error(where + ": node " + std::to_string(n) + " points outside the tree or the inputs");
        }
    }
    return tree;
}

class TreeEnsemble : public Regressor {
public:
    TreeEnsemble(const nlohmann::json& model, std::size_t inputs, const std::string& path) : inputs_(inputs) {
        const auto& learner = model.at("learner");
        const std::string objective = learner.at("objective").at("name").get<std::string>();
        if (objective != "reg:squarederror") {
            throw std::runtime_error(path + ": objective '" + objective + "' is not supported (reg:squarederror only)");
        }
        const auto& parameters = learner.at("learner_model_param");
        const auto features = std::stoul(parameters.at("num_feature").get<std::string>());
        if (features != inputs) {
            throw std::runtime_error(path + ": the model takes " + std::to_string(features) +
                                     " features, the bundle lists " + std::to_string(inputs));
        }
        base_score_ = std::stod(parameters.at("base_score").get<std::string>());
        const auto& booster = learner.at("gradient_booster");
        if (booster.at("name") != "gbtree") {
            throw std::runtime_error(path + ": booster " + booster.at("name").dump() + " is not supported (gbtree only)");
        }
        const auto& trees = booster.at("model").at("trees");
        for (std::size_t i = 0; i < trees.size(); ++i) {
            trees_.push_back(read_tree(trees[i], inputs, path + " tree " + std::to_string(i)));
        }
    }

    Eigen::VectorXd predict(const FeatureMatrix& inputs) const override {
        if (inputs.cols() != static_cast<Eigen::Index>(inputs_)) {
            throw std::invalid_argument("model expects " + std::to_string(inputs_) + " features, got " +
                                        std::to_string(inputs.cols()));
        }
        // Rows as float32 (xgboost's input type), row-major; then tree by tree over all rows, so that each tree is
        // read from memory once per call rather than once per row.
        const auto rows = static_cast<std::size_t>(inputs.rows());
        std::vector<float> values(rows * inputs_);
        for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t c = 0; c < inputs_; ++c) {
                values[r * inputs_ + c] = static_cast<float>(inputs(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)));
            }
        }
        Eigen::VectorXd out = Eigen::VectorXd::Constant(inputs.rows(), base_score_);
        for (const Tree& tree : trees_) {
            for (std::size_t r = 0; r < rows; ++r) {
                const float* row = values.data() + r * inputs_;
                const Node* node = tree.data();
                while (node->left != -1) {
                    const float x = row[node->feature];
                    node = tree.data() + ((std::isnan(x) ? node->default_left : x < node->threshold) ? node->left
                                                                                                      : node->right);
                }
                out[static_cast<Eigen::Index>(r)] += node->threshold;
            }
        }
        return out;
    }

private:
    std::size_t inputs_;
    double base_score_ = 0;
    std::vector<Tree> trees_;
};

}  // namespace

std::unique_ptr<Regressor> load_tree_ensemble(const std::string& path, std::size_t inputs) {
    const std::string text = read_model_file(path);
    nlohmann::json model;
    try {
        model = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + " is not an xgboost JSON model: " + e.what());
    }
    try {
        return std::make_unique<TreeEnsemble>(model, inputs, path);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + " lacks fields of an xgboost JSON model: " + e.what());
    } catch (const std::logic_error& e) {  // std::stoul / std::stod on a malformed number
        throw std::runtime_error(path + ": malformed model parameter: " + e.what());
    }
}

}  // namespace prenet::regressors
