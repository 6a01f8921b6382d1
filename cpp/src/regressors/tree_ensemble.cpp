// Tree ensembles in xgboost's JSON model format (what Python xgboost's save_model writes): gradient-boosted trees,
// or a random forest as parallel trees, evaluated natively; and multi-class classifiers (multi:softprob), whose
// trees each add to one class's margin (tree_info). Reading the format directly keeps the core free of libxgboost
// (GPU machines often lack it) and a one-layer prediction free of the C API's per-call set-up.
// Semantics follow xgboost's predictor: inputs as float32, go left when x < split_condition (a missing value,
// NaN, follows default_left), leaf values in split_conditions; margin = base_score + sum of the leaves of the
// margin's trees. A regressor (reg:squarederror, identity link; a forest's leaves are already divided by its tree
// count) returns its one margin; a classifier the class of the largest margin (softmax keeps the order).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "json_cursor.hpp"
#include "regressors.hpp"
#include "tree_cache.hpp"
#include "xgboost_model.hpp"

namespace prenet::regressors {

namespace {

// One tree as xgboost's JSON lists it: per node (breadth first), its children (-1 at a leaf), the input it splits
// on, its split condition (at a leaf: the leaf value) and where a missing value goes.
struct TreeArrays {
    std::vector<std::int64_t> left, right, feature, default_left;
    std::vector<double> threshold;
};

TreeArrays read_tree_arrays(JsonCursor& cursor, const std::string& where) {
    TreeArrays t;
    // the integer arrays, then the one of numbers
    std::vector<std::int64_t>* integer_arrays[] = {&t.left, &t.right, &t.feature, &t.default_left};
    const char* names[] = {"left_children", "right_children", "split_indices", "default_left", "split_conditions"};
    constexpr std::size_t kArrays = std::size(names);
    bool seen[kArrays] = {};
    cursor.object([&](const std::string& key) {
        const auto i = static_cast<std::size_t>(std::find(std::begin(names), std::end(names), key) - std::begin(names));
        if (i == kArrays) return cursor.skip();
        seen[i] = true;
        if (i < std::size(integer_arrays)) {
            *integer_arrays[i] = cursor.integers();
        } else {
            t.threshold = cursor.numbers();
        }
    });
    for (std::size_t i = 0; i < kArrays; ++i) {
        if (!seen[i]) throw std::out_of_range(where + " has no '" + names[i] + "'");
    }
    return t;
}

Tree read_tree(const TreeArrays& t, std::size_t inputs, const std::string& where) {
    const auto& [left, right, feature, default_left, threshold] = t;
    const auto nodes = static_cast<std::int32_t>(left.size());
    if (nodes == 0 || right.size() != left.size() || feature.size() != left.size() ||
        threshold.size() != left.size() || default_left.size() != left.size()) {
        throw std::runtime_error(where + ": node arrays of different lengths");
    }
    for (std::int32_t n = 0; n < nodes; ++n) {
        if (left[n] == -1) continue;  // a leaf
        // Children come after their parent, so every walk ends at a leaf.
        if (left[n] <= n || left[n] >= nodes || right[n] <= n || right[n] >= nodes || feature[n] < 0 ||
            feature[n] >= static_cast<std::int32_t>(inputs)) {
            throw std::runtime_error(where + ": node " + std::to_string(n) + " points outside the tree or the inputs");
        }
    }
    // Depth-first from the root, left child first; every node reached exactly once (a tree, not a graph).
    std::vector<std::int32_t> order, position(left.size(), -1), depth(left.size(), 0);
    for (std::vector<std::int32_t> pending{0}; !pending.empty();) {
        const std::int32_t n = pending.back();
        pending.pop_back();
        if (position[n] != -1) throw std::runtime_error(where + ": node " + std::to_string(n) + " has two parents");
        position[n] = static_cast<std::int32_t>(order.size());
        order.push_back(n);
        if (left[n] != -1) {
            depth[left[n]] = depth[right[n]] = depth[n] + 1;
            pending.push_back(right[n]);
            pending.push_back(left[n]);
        }
    }
    if (order.size() > std::size_t{Node::kRightMask} + 1) {
        throw std::runtime_error(where + ": " + std::to_string(order.size()) + " nodes; a tree here has at most " +
                                 std::to_string(Node::kRightMask + 1));
    }
    Tree tree{std::vector<Node>(order.size())};
    for (std::size_t i = 0; i < order.size(); ++i) {
        const std::int32_t n = order[i];
        Node& node = tree.nodes[i];
        node = {static_cast<float>(threshold[n]), 0, 0};
        if (left[n] == -1) continue;  // a leaf
        node.feature = static_cast<std::uint16_t>(feature[n]);
        node.right = static_cast<std::uint16_t>(position[right[n]] - static_cast<std::int32_t>(i)) |
                     (default_left[n] != 0 ? Node::kDefaultLeft : 0);
        tree.depth = std::max(tree.depth, depth[n] + 1);
    }
    return tree;
}

// Trees walked side by side for one row.
constexpr std::size_t kLanes = 8;

// learner.objective.name, learner.learner_model_param.num_feature, .num_class and .base_score,
// learner.gradient_booster.name and .model.trees and .model.tree_info.
XgboostModel read_xgboost_model(JsonCursor& cursor, std::size_t inputs, const std::string& path) {
    XgboostModel m;
    const auto model = [&](const std::string& key) {
        if (key == "tree_info") {
            m.tree_info = cursor.integers();
            return;
        }
        if (key != "trees") return cursor.skip();
        m.has_trees = true;
        cursor.array([&] {
            const std::string where = path + " tree " + std::to_string(m.trees.size());
            m.trees.push_back(read_tree(read_tree_arrays(cursor, where), inputs, where));
        });
    };
    const auto booster = [&](const std::string& key) {
        if (key == "name") m.booster = cursor.string();
        else if (key == "model") cursor.object(model);
        else cursor.skip();
    };
    const auto parameters = [&](const std::string& key) {
        if (key == "num_feature") m.num_feature = cursor.string();
        else if (key == "num_class") m.num_class = cursor.string();
        else if (key == "base_score") m.base_score = cursor.string();
        else cursor.skip();
    };
    const auto objective = [&](const std::string& key) {
        if (key == "name") m.objective = cursor.string();
        else cursor.skip();
    };
    const auto learner = [&](const std::string& key) {
        if (key == "objective") cursor.object(objective);
        else if (key == "learner_model_param") cursor.object(parameters);
        else if (key == "gradient_booster") cursor.object(booster);
        else cursor.skip();
    };
    cursor.object([&](const std::string& key) {
        if (key == "learner") cursor.object(learner);
        else cursor.skip();
    });
    cursor.finish();
    return m;
}

// The trees of a model and the margin each adds to: `margins` sums them per row. `objectives` are those the owner
// serves; `margins` the number of margins it expects (1 for a regressor, the class count for a classifier).
class TreeEnsemble {
public:
    TreeEnsemble(XgboostModel model, std::size_t inputs, const std::string& path,
                 std::initializer_list<const char*> objectives, std::size_t margins)
        : inputs_(inputs), margins_(margins) {
        if (inputs > std::numeric_limits<std::uint16_t>::max()) {
            throw std::runtime_error(path + ": " + std::to_string(inputs) + " inputs; a tree model takes at most " +
                                     std::to_string(std::numeric_limits<std::uint16_t>::max()));
        }
        using Field = std::pair<const char*, const std::string*>;
        for (const auto& [field, value] : {Field{"objective.name", &model.objective},
                                           Field{"learner_model_param.num_feature", &model.num_feature},
                                           Field{"learner_model_param.base_score", &model.base_score},
                                           Field{"gradient_booster.name", &model.booster}}) {
            if (value->empty()) throw std::out_of_range(std::string("no learner.") + field);
        }
        if (!model.has_trees) throw std::out_of_range("no learner.gradient_booster.model.trees");
        if (std::find_if(objectives.begin(), objectives.end(),
                         [&](const char* o) { return model.objective == o; }) == objectives.end()) {
            std::string known;
            for (const char* o : objectives) known += std::string(known.empty() ? "" : ", ") + o;
            throw std::runtime_error(path + ": objective '" + model.objective + "' is not supported here (" + known +
                                     ")");
        }
        const auto classes = model.num_class.empty() ? 0ul : std::stoul(model.num_class);
        if (std::max(classes, 1ul) != margins) {
            throw std::runtime_error(path + ": the model has " + std::to_string(std::max(classes, 1ul)) +
                                     " classes, the bundle lists " + std::to_string(margins));
        }
        const auto features = std::stoul(model.num_feature);
        if (features != inputs) {
            throw std::runtime_error(path + ": the model takes " + std::to_string(features) +
                                     " features, the bundle lists " + std::to_string(inputs));
        }
        base_score_ = std::stod(model.base_score);
        if (model.booster != "gbtree") {
            throw std::runtime_error(path + ": booster \"" + model.booster + "\" is not supported (gbtree only)");
        }
        trees_ = std::move(model.trees);
        if (model.tree_info.empty() && margins == 1) model.tree_info.assign(trees_.size(), 0);
        if (model.tree_info.size() != trees_.size()) {
            throw std::runtime_error(path + ": tree_info lists " + std::to_string(model.tree_info.size()) +
                                     " margins for " + std::to_string(trees_.size()) + " trees");
        }
        for (const auto margin : model.tree_info) {
            if (margin < 0 || static_cast<std::size_t>(margin) >= margins) {
                throw std::runtime_error(path + ": tree_info names margin " + std::to_string(margin) + " of " +
                                         std::to_string(margins));
            }
            tree_margin_.push_back(static_cast<Eigen::Index>(margin));
        }
    }

    // One row per row of `inputs`, one column per margin.
    Eigen::MatrixXd margins(const FeatureMatrix& inputs) const {
        if (inputs.cols() != static_cast<Eigen::Index>(inputs_)) {
            throw std::invalid_argument("model expects " + std::to_string(inputs_) + " features, got " +
                                        std::to_string(inputs.cols()));
        }
        // Rows as float32 (xgboost's input type), row-major; then kLanes trees at a time over all rows: those trees
        // are read from memory once per call, and their walks, independent of each other and free of branches on
        // the data (a mispredicted split costs more than the split), overlap; each walks its tree's depth, a leaf
        // pointing to itself.
        const auto rows = static_cast<std::size_t>(inputs.rows());
        std::vector<float> values(rows * inputs_);
        for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t c = 0; c < inputs_; ++c) {
                values[r * inputs_ + c] =
                    static_cast<float>(inputs(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)));
            }
        }
        // A row without a missing value (NaN) is walked by its splits alone, the rest also by where missing values go.
        std::vector<bool> missing(rows);
        for (std::size_t r = 0; r < rows; ++r) {
            const float* row = values.data() + r * inputs_;
            missing[r] = std::any_of(row, row + inputs_, [](float x) { return std::isnan(x); });
        }
        Eigen::MatrixXd out =
            Eigen::MatrixXd::Constant(inputs.rows(), static_cast<Eigen::Index>(margins_), base_score_);
        for (std::size_t first = 0; first < trees_.size(); first += kLanes) {
            const std::size_t lanes = std::min(kLanes, trees_.size() - first);
            const Node* roots[kLanes] = {};
            int levels = 0;
            for (std::size_t l = 0; l < lanes; ++l) {
                roots[l] = trees_[first + l].nodes.data();
                levels = std::max(levels, trees_[first + l].depth);
            }
            for (std::size_t r = 0; r < rows; ++r) {
                const float* row = values.data() + r * inputs_;
                std::int32_t at[kLanes] = {};
                if (missing[r]) {
                    walk(roots, lanes, levels, row, at, [](const Node& node, float x) {
                        return (x < node.threshold) | (std::isnan(x) & node.default_left());
                    });
                } else {
                    walk(roots, lanes, levels, row, at, [](const Node& node, float x) { return x < node.threshold; });
                }
                const auto row_out = static_cast<Eigen::Index>(r);
                for (std::size_t l = 0; l < lanes; ++l) {  // in tree order
                    out(row_out, tree_margin_[first + l]) += roots[l][at[l]].threshold;
                }
            }
        }
        return out;
    }

private:
    // `levels` steps down `lanes` trees side by side for one row; `goes_left(node, x)` decides each split.
    template <typename GoesLeft>
    static void walk(const Node* const* roots, std::size_t lanes, int levels, const float* row, std::int32_t* at,
                     GoesLeft goes_left) {
        for (int level = 0; level < levels; ++level) {
            for (std::size_t l = 0; l < lanes; ++l) {
                const Node& node = roots[l][at[l]];
                const std::int32_t right = node.right_offset();
                const std::int32_t step = goes_left(node, row[node.feature]) ? 1 : right;
                at[l] += right == 0 ? 0 : step;  // a leaf stays
            }
        }
    }

    std::size_t inputs_, margins_;
    double base_score_ = 0;
    std::vector<Tree> trees_;
    std::vector<Eigen::Index> tree_margin_;  // per tree, the margin it adds to
};

class TreeRegressor : public Regressor {
public:
    TreeRegressor(XgboostModel model, std::size_t inputs, const std::string& path)
        : trees_(std::move(model), inputs, path, {"reg:squarederror"}, 1) {}
    Eigen::VectorXd predict(const FeatureMatrix& inputs) const override { return trees_.margins(inputs).col(0); }

private:
    TreeEnsemble trees_;
};

class TreeClassifier : public Classifier {
public:
    TreeClassifier(XgboostModel model, std::size_t inputs, std::size_t classes, const std::string& path)
        : trees_(std::move(model), inputs, path, {"multi:softprob", "multi:softmax"}, classes) {}
    std::vector<std::size_t> predict_class(const FeatureMatrix& inputs) const override {
        const Eigen::MatrixXd margins = trees_.margins(inputs);
        std::vector<std::size_t> classes(static_cast<std::size_t>(margins.rows()));
        for (Eigen::Index r = 0; r < margins.rows(); ++r) {
            Eigen::Index best = 0;
            margins.row(r).maxCoeff(&best);  // the first of equal margins, as argmax
            classes[static_cast<std::size_t>(r)] = static_cast<std::size_t>(best);
        }
        return classes;
    }

private:
    TreeEnsemble trees_;
};

}  // namespace

namespace {

// The model in the xgboost JSON file at `path`, made by `make` (a regressor or a classifier); errors name the file.
// With a `cache_folder`, the trees come from a binary copy of an earlier read where one matches (tree_cache.hpp),
// and a read from the JSON leaves one.
template <typename Make>
auto load_trees(const std::string& path, std::size_t inputs, const std::string& cache_folder, Make make) {
    const auto stamp = cache_folder.empty() ? std::nullopt : source_stamp(path);
    const std::string cache_file = stamp ? tree_cache_file(cache_folder, path) : "";
    auto cached = stamp ? read_tree_cache(cache_file, *stamp, inputs) : std::nullopt;
    const std::string text = cached ? "" : read_model_file(path);
    try {
        if (cached) return make(std::move(*cached));
        JsonCursor cursor(text);
        XgboostModel model = read_xgboost_model(cursor, inputs, path);
        if (stamp) write_tree_cache(cache_file, *stamp, model);
        return make(std::move(model));
    } catch (const JsonError& e) {
        throw std::runtime_error(path + " is not an xgboost JSON model: " + e.what());
    } catch (const std::out_of_range& e) {  // a field or a tree's array missing, or std::stoul / std::stod out of range
        throw std::runtime_error(path + " lacks fields of an xgboost JSON model: " + e.what());
    } catch (const std::invalid_argument& e) {  // std::stoul / std::stod on a malformed number
        throw std::runtime_error(path + ": malformed model parameter: " + e.what());
    }
}

}  // namespace

std::unique_ptr<Regressor> load_tree_ensemble(const std::string& path, std::size_t inputs,
                                              const std::string& cache_folder) {
    return load_trees(path, inputs, cache_folder, [&](XgboostModel model) -> std::unique_ptr<Regressor> {
        return std::make_unique<TreeRegressor>(std::move(model), inputs, path);
    });
}

std::unique_ptr<Classifier> load_tree_classifier(const std::string& path, std::size_t inputs, std::size_t classes,
                                                 const std::string& cache_folder) {
    return load_trees(path, inputs, cache_folder, [&](XgboostModel model) -> std::unique_ptr<Classifier> {
        return std::make_unique<TreeClassifier>(std::move(model), inputs, classes, path);
    });
}

}  // namespace prenet::regressors
