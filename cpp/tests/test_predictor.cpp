// Predictor bundles and dense models against hand-computed values, and every load error path.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "prenet/predictor_bundle.hpp"
#include "prenet/regressor.hpp"

namespace {

namespace fs = std::filesystem;

prenet::GpuSpec gpu() {
    prenet::GpuSpec g;
    g.name = "Test GPU";
    g.fp32_tflops = 10;
    g.memory_bandwidth_gbs = 100;
    g.sm_count = 10;
    return g;
}

class BundleTest : public ::testing::Test {
protected:
    void SetUp() override {
        folder_ = fs::path(::testing::TempDir()) /
                  ("bundle_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        fs::remove_all(folder_);
        fs::create_directories(folder_);
    }
    void write(const std::string& name, const std::string& text) { std::ofstream(folder_ / name) << text; }
    std::string manifest(const std::string& features, const std::string& family = "linear",
                         const std::string& target = "log_ms", int version = 1) {
        return R"({"format": "prenet-predictors", "version": )" + std::to_string(version) +
               R"(, "predictors": [{"kind": "linear", "mode": "forward", "family": ")" + family +
               R"(", "file": "m.json", "features": )" + features + R"(, "target": ")" + target + R"("}]})";
    }
    std::string load_error() {
        try {
            prenet::PredictorBundle::load(folder_.string());
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "";
    }
    fs::path folder_;
};

std::vector<prenet::LayerConfig> linear_configs() {
    const auto& kind = prenet::find_layer_kind("linear");
    return {kind.configure({{"batch", 2}, {"in_features", 3}, {"out_features", 4}}),
            kind.configure({{"batch", 8}, {"in_features", 3}, {"out_features", 4}})};
}

TEST_F(BundleTest, LinearModelWithIndicatorsAndLogTarget) {
    // log(ms) = 0.5 * (batch - 1) / 2 + 1.0 * [optimizer = adam] - 0.25
    write("manifest.json", manifest(R"(["batch", "optimizer=adam", "gpu=Test GPU"])"));
    write("m.json",
          R"({"mean": [1, 0, 0], "scale": [2, 1, 1], "layers": [{"weight": [[0.5, 1.0, 0.0]], "bias": [-0.25]}]})");
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto sgd = bundle.predict_ms("linear", "forward", linear_configs(), gpu(), "sgd");
    EXPECT_NEAR(sgd[0], std::exp(0.5 * 0.5 - 0.25), 1e-12);
    EXPECT_NEAR(sgd[1], std::exp(0.5 * 3.5 - 0.25), 1e-12);
    const auto adam = bundle.predict_ms("linear", "forward", linear_configs(), gpu(), "adam");
    EXPECT_NEAR(adam[0], std::exp(0.5 * 0.5 + 1.0 - 0.25), 1e-12);
    const auto inputs =
        prenet::model_inputs({"batch", "optimizer=adam", "gpu=Test GPU"}, linear_configs(), gpu(), "adam");
    EXPECT_EQ(inputs(1, 0), 8);
    EXPECT_EQ(inputs(1, 1), 1);
    EXPECT_EQ(inputs(1, 2), 1);
}

TEST_F(BundleTest, MlpWithReluAndRelativeTarget) {
    // Hidden: relu([x - 1, -(x - 1)]); output: 2 * h0 + 3 * h1 + 0.5; target log(ms / forward_flops).
    write("manifest.json", manifest(R"(["batch"])", "mlp", "log_ms_over:forward_flops"));
    write("m.json", R"({"mean": [1], "scale": [1], "layers": [{"weight": [[1], [-1]], "bias": [0, 0]},
                                                          {"weight": [[2, 3]], "bias": [0.5]}]})");
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto ms = bundle.predict_ms("linear", "forward", linear_configs(), gpu(), "sgd");
    // batch 2: h = (1, 0) -> 2.5; forward FLOPs 2*2*3*4 + 2*4 = 56.
    EXPECT_NEAR(ms[0], std::exp(2.5) * 56, 1e-9);
    // batch 8: h = (7, 0) -> 14.5; FLOPs 2*8*12 + 32 = 224.
    EXPECT_NEAR(ms[1], std::exp(14.5) * 224, 1e-6 * std::exp(14.5) * 224);
}

TEST_F(BundleTest, ARatioTargetIsHeldWithinTheRangeItWasFittedOn) {
    // The MLP above (2.5 at batch 2, 14.5 at batch 8), its targets held within [1, 3]; a time target has no range.
    const auto with_range = [&](const std::string& target, const std::string& range) {
        std::string text = manifest(R"(["batch"])", "mlp", target);
        text.insert(text.rfind("}]"), R"(, "target_range": )" + range);  // into the predictor's entry
        write("manifest.json", text);
    };
    write("m.json", R"({"mean": [1], "scale": [1], "layers": [{"weight": [[1], [-1]], "bias": [0, 0]},
                                                          {"weight": [[2, 3]], "bias": [0.5]}]})");
    with_range("log_ms_over:forward_flops", "[1, 3]");
    const auto ms = prenet::PredictorBundle::load(folder_.string())
                        .predict_ms("linear", "forward", linear_configs(), gpu(), "sgd");
    EXPECT_NEAR(ms[0], std::exp(2.5) * 56, 1e-9);  // within: as predicted
    EXPECT_NEAR(ms[1], std::exp(3.0) * 224, 1e-9);  // beyond: at the largest ratio fitted
    with_range("log_ms_over:forward_flops", "[3, 1]");
    EXPECT_NE(load_error().find("target_range is [3,1], not [least, largest]"), std::string::npos) << load_error();
    with_range("log_ms_over:forward_flops", "[1]");
    EXPECT_NE(load_error().find("not [least, largest]"), std::string::npos) << load_error();
    with_range("log_ms", "[1, 3]");
    EXPECT_NE(load_error().find("target_range is given for target 'log_ms', which is no ratio"), std::string::npos)
        << load_error();
}

TEST_F(BundleTest, RowsArePlacedWithinTheFittedRangesTheManifestRecords) {
    // log(ms) = batch / 64: the model sees the placed batch, 64 samples of 64 rows for 4,096 rows of one sample.
    const std::string ranges = R"({"fitted_on": {"ranges": {"linear": {"batch": [1, 512], "seq_len": [1, 502]}}}, )";
    write("manifest.json", ranges + manifest(R"(["batch"])").substr(1));
    write("m.json", R"({"mean": [0], "scale": [64], "layers": [{"weight": [[1]], "bias": [0]}]})");
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto& linear = prenet::find_layer_kind("linear");
    const auto one_sample =
        linear.configure({{"batch", 1}, {"seq_len", 4096}, {"in_features", 3}, {"out_features", 4}});
    const auto within = linear.configure({{"batch", 2}, {"seq_len", 7}, {"in_features", 3}, {"out_features", 4}});
    const auto ms = bundle.predict_ms("linear", "forward", {one_sample, within}, gpu(), "sgd");
    EXPECT_NEAR(ms[0], std::exp(1.0), 1e-12);
    EXPECT_NEAR(ms[1], std::exp(2.0 / 64), 1e-12);  // within the ranges: as given
    EXPECT_EQ(bundle.fitted_ranges("linear").at("seq_len").second, 502);
    EXPECT_TRUE(bundle.fitted_ranges("conv2d").empty());
    write("manifest.json",
          R"({"fitted_on": {"ranges": {"linear": {"batch": [1]}}}, )" + manifest(R"(["batch"])").substr(1));
    EXPECT_NE(load_error().find("missing or has malformed fields"), std::string::npos);
    write("manifest.json",
          R"({"fitted_on": {"ranges": {"linear": {"bias": [0, 0]}}}, )" + manifest(R"(["batch"])").substr(1));
    EXPECT_EQ(load_error(), "");  // a flag fitted at 0 only is a range
    write("manifest.json",
          R"({"fitted_on": {"ranges": {"linear": {"batch": [9, 2]}}}, )" + manifest(R"(["batch"])").substr(1));
    EXPECT_NE(load_error().find("fitted_on.ranges of linear, batch is [9,2], not [smallest, largest]"),
              std::string::npos) << load_error();
}

TEST_F(BundleTest, UnknownKindOrModeIsNamed) {
    write("manifest.json", manifest(R"(["batch"])"));
    write("m.json", R"({"mean": [0], "scale": [1], "layers": [{"weight": [[1]], "bias": [0]}]})");
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    try {
        bundle.predict_ms("conv2d", "train", {}, gpu(), "sgd");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("no predictor for layer kind 'conv2d' in mode 'train'"),
                  std::string::npos);
        EXPECT_NE(std::string(e.what()).find("linear/forward"), std::string::npos);
    }
}

// Two trees over inputs (batch, in_features): tree 0 splits batch at 4 (NaN goes left), tree 1 is a single leaf.
std::string tree_model(const std::string& objective = "reg:squarederror", const std::string& features = "2") {
    return R"({"learner": {"objective": {"name": ")" + objective + R"("},
        "learner_model_param": {"num_feature": ")" + features + R"(", "base_score": "5E-1"},
        "gradient_booster": {"name": "gbtree", "model": {"trees": [
          {"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [0, 0, 0],
           "split_conditions": [4.0, 0.25, 2.0], "default_left": [1, 0, 0]},
          {"left_children": [-1], "right_children": [-1], "split_indices": [0], "split_conditions": [-1.5],
           "default_left": [false]}]}}}})";
}

TEST_F(BundleTest, TreeEnsembleFollowsXgboostSemantics) {
    write("manifest.json", manifest(R"(["batch", "in_features"])", "xgboost"));
    write("m.json", tree_model());
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto ms = bundle.predict_ms("linear", "forward", linear_configs(), gpu(), "sgd");
    EXPECT_NEAR(ms[0], std::exp(0.5 + 0.25 - 1.5), 1e-6);  // batch 2 < 4: left leaf
    EXPECT_NEAR(ms[1], std::exp(0.5 + 2.0 - 1.5), 1e-6);   // batch 8: right leaf
    // A split at exactly the threshold goes right (x < split is the left test).
    const auto at_split =
        prenet::find_layer_kind("linear").configure({{"batch", 4}, {"in_features", 3}, {"out_features", 4}});
    EXPECT_NEAR(bundle.predict_ms("linear", "forward", {at_split}, gpu(), "sgd")[0], std::exp(1.0), 1e-6);
}

TEST_F(BundleTest, ARowWithAMissingValueFollowsTheDefaultDirectionBesideRowsWithout) {
    // Rows without a missing value are walked by their splits alone, rows with one also by the default direction;
    // mixed in one call, each takes its own path.
    write("m.json", tree_model());
    const auto model = prenet::load_regressor("xgboost", (folder_ / "m.json").string(), 2);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    prenet::FeatureMatrix rows(4, 2);
    rows << 2, 1,  // batch 2 < 4: left leaf
        nan, 1,    // batch missing: default_left, the left leaf
        8, nan,    // batch 8: right leaf; the missing in_features is never split on
        4, 3;      // at the split: right
    const Eigen::VectorXd out = model->predict(rows);
    EXPECT_NEAR(out[0], 0.5 + 0.25 - 1.5, 1e-6);
    EXPECT_NEAR(out[1], 0.5 + 0.25 - 1.5, 1e-6);
    EXPECT_NEAR(out[2], 0.5 + 2.0 - 1.5, 1e-6);
    EXPECT_NEAR(out[3], 0.5 + 2.0 - 1.5, 1e-6);
}

TEST_F(BundleTest, DeeperTreesWalkTheirLeftSubtreesFirstAndAgreeWithTheSplits) {
    // Root: batch < 4 ? (in_features < 3 ? 0.1 : 0.2) : 0.3; nodes listed breadth first, as xgboost writes them.
    write("manifest.json", manifest(R"(["batch", "in_features"])", "xgboost"));
    write("m.json", R"({"learner": {"objective": {"name": "reg:squarederror"},
        "learner_model_param": {"num_feature": "2", "base_score": "0"},
        "gradient_booster": {"name": "gbtree", "model": {"trees": [
          {"left_children": [1, 3, -1, -1, -1], "right_children": [2, 4, -1, -1, -1],
           "split_indices": [0, 1, 0, 0, 0], "split_conditions": [4.0, 3.0, 0.3, 0.1, 0.2],
           "default_left": [0, 0, 0, 0, 0]}]}}}})");
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto& kind = prenet::find_layer_kind("linear");
    const std::vector<prenet::LayerConfig> configs = {
        kind.configure({{"batch", 2}, {"in_features", 2}, {"out_features", 4}}),
        kind.configure({{"batch", 2}, {"in_features", 5}, {"out_features", 4}}),
        kind.configure({{"batch", 9}, {"in_features", 2}, {"out_features", 4}})};
    const auto ms = bundle.predict_ms("linear", "forward", configs, gpu(), "sgd");
    EXPECT_NEAR(ms[0], std::exp(0.1), 1e-6);
    EXPECT_NEAR(ms[1], std::exp(0.2), 1e-6);
    EXPECT_NEAR(ms[2], std::exp(0.3), 1e-6);
}

TEST_F(BundleTest, TreeEnsembleErrorsAreClear) {
    write("manifest.json", manifest(R"(["batch", "in_features"])", "random_forest"));
    write("m.json", tree_model("binary:logistic"));
    EXPECT_NE(load_error().find("objective 'binary:logistic' is not supported"), std::string::npos);
    write("m.json", tree_model("reg:squarederror", "3"));
    EXPECT_NE(load_error().find("the model takes 3 features, the bundle lists 2"), std::string::npos);
    write("m.json", R"({"learner": {"objective": {"name": "reg:squarederror"}}})");
    EXPECT_NE(load_error().find("lacks fields of an xgboost JSON model"), std::string::npos);
    write("m.json", "{\"learner\": ");
    EXPECT_NE(load_error().find("is not an xgboost JSON model"), std::string::npos);
    auto cyclic = tree_model();
    cyclic.replace(cyclic.find("[1, -1, -1]"), 11, "[0, -1, -1]");
    write("m.json", cyclic);
    EXPECT_NE(load_error().find("node 0 points outside the tree or the inputs"), std::string::npos);
    auto shared = tree_model();  // both of the root's branches lead to node 1: not a tree
    const std::string right = "\"right_children\": [2, -1, -1]";
    shared.replace(shared.find(right), right.size(), "\"right_children\": [1, -1, -1]");
    write("m.json", shared);
    EXPECT_NE(load_error().find("node 1 has two parents"), std::string::npos);
    auto no_defaults = tree_model();  // a tree without one of its arrays
    const std::string defaults = R"(, "default_left": [1, 0, 0])";
    no_defaults.erase(no_defaults.find(defaults), defaults.size());
    write("m.json", no_defaults);
    EXPECT_NE(load_error().find("lacks fields of an xgboost JSON model: " + (folder_ / "m.json").string() +
                                " tree 0 has no 'default_left'"),
              std::string::npos)
        << load_error();
}

// A three-class classifier over (batch, in_features), two rounds (tree_info: the class each tree adds to).
// Round 1: class 0 gets 1 where batch < 4; class 1 gets 1 where batch >= 4; class 2 gets 0.5 everywhere.
// Round 2: class 2 gets 1 where in_features >= 5; classes 0 and 1 get 0.
std::string classifier_model(const std::string& tree_info = "[0, 1, 2, 0, 1, 2]",
                             const std::string& classes = "3") {
    const std::string split = R"({"left_children": [1, -1, -1], "right_children": [2, -1, -1], )";
    const std::string leaf = R"({"left_children": [-1], "right_children": [-1], "split_indices": [0], )"
                             R"("default_left": [0], "split_conditions": )";
    return R"({"learner": {"objective": {"name": "multi:softprob"},
        "learner_model_param": {"num_feature": "2", "base_score": "5E-1", "num_class": ")" + classes + R"("},
        "gradient_booster": {"name": "gbtree", "model": {"tree_info": )" + tree_info + R"(, "trees": [)" +
           split + R"("split_indices": [0, 0, 0], "split_conditions": [4.0, 1.0, 0.0], "default_left": [0, 0, 0]}, )" +
           split + R"("split_indices": [0, 0, 0], "split_conditions": [4.0, 0.0, 1.0], "default_left": [0, 0, 0]}, )" +
           leaf + "[0.5]}, " + leaf + "[0.0]}, " + leaf + "[0.0]}, " + split +
           R"("split_indices": [1, 0, 0], "split_conditions": [5.0, 0.0, 1.0], "default_left": [0, 0, 0]}]}}}})";
}

TEST_F(BundleTest, TreeClassifierPicksTheClassOfTheLargestMargin) {
    write("c.json", classifier_model());
    const auto classifier = prenet::load_classifier((folder_ / "c.json").string(), 2, 3);
    prenet::FeatureMatrix rows(4, 2);
    rows << 2, 3,  // margins (1.5, 0.5, 1.0): class 0
        8, 3,      // (0.5, 1.5, 1.0): class 1
        2, 6,      // (1.5, 0.5, 2.0): class 2
        8, 5;      // (0.5, 1.5, 2.0): class 2 (in_features at the split goes right)
    EXPECT_EQ(classifier->predict_class(rows), (std::vector<std::size_t>{0, 1, 2, 2}));
    const auto error = [&](const std::string& text, std::size_t classes) {
        write("c.json", text);
        try {
            prenet::load_classifier((folder_ / "c.json").string(), 2, classes);
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(error(classifier_model(), 4).find("the model has 3 classes, the bundle lists 4"), std::string::npos);
    EXPECT_NE(error(classifier_model("[0, 1, 2, 0, 1]"), 3).find("tree_info lists 5 margins for 6 trees"),
              std::string::npos);
    EXPECT_NE(error(classifier_model("[0, 1, 2, 0, 1, 3]"), 3).find("tree_info names margin 3 of 3"),
              std::string::npos);
    EXPECT_NE(error(tree_model(), 1).find("objective 'reg:squarederror' is not supported here (multi:softprob"),
              std::string::npos);
}

TEST_F(BundleTest, AKernelClassifierSetsThePredictorsKernelInputs) {
    // log(ms) = kernel=b - kernel=a, over inputs [batch, in_features, kernel=a, kernel=b]; the classifier reads
    // (batch, in_features) and picks a (class 0) for batch < 4, b (class 1) for batch >= 4 and c (class 2) where
    // in_features >= 5.
    const std::string chooser = R"(, "kernel_classifier": {"file": "c.json", "features": ["batch", "in_features"], )"
                                R"("classes": ["a", "b", "c"]})";
    const auto with_chooser = [&](const std::string& extra) {
        auto text = manifest(R"(["batch", "in_features", "kernel=a", "kernel=b"])");
        return text.insert(text.size() - 3, extra);
    };
    write("manifest.json", with_chooser(chooser));
    write("m.json", R"({"mean": [0, 0, 0, 0], "scale": [1, 1, 1, 1],
                        "layers": [{"weight": [[0, 0, -1, 1]], "bias": [0]}]})");
    write("c.json", classifier_model());
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto& kind = prenet::find_layer_kind("linear");
    const std::vector<prenet::LayerConfig> configs = {
        kind.configure({{"batch", 2}, {"in_features", 3}, {"out_features", 4}}),
        kind.configure({{"batch", 8}, {"in_features", 3}, {"out_features", 4}}),
        kind.configure({{"batch", 8}, {"in_features", 6}, {"out_features", 4}})};
    const auto ms = bundle.predict_ms("linear", "forward", configs, gpu(), "sgd");
    EXPECT_NEAR(ms[0], std::exp(-1.0), 1e-12);  // kernel a
    EXPECT_NEAR(ms[1], std::exp(1.0), 1e-12);   // kernel b
    EXPECT_NEAR(ms[2], 1.0, 1e-12);             // kernel c: neither input set
    // Kernel inputs without a classifier, a classifier input the predictor lacks, a kernel no class names.
    write("manifest.json", with_chooser(""));
    EXPECT_NE(load_error().find("has kernel=<name> inputs but no kernel_classifier"), std::string::npos);
    auto other_input = chooser;
    other_input.replace(other_input.find("\"in_features\"]"), 14, "\"out_features\"]");
    write("manifest.json", with_chooser(other_input));
    EXPECT_NE(load_error().find("the kernel classifier's input 'out_features' is not an input of the predictor"),
              std::string::npos);
    auto other_class = chooser;
    other_class.replace(other_class.find("\"b\""), 3, "\"d\"");
    write("manifest.json", with_chooser(other_class));
    EXPECT_NE(load_error().find("input 'kernel=b' names no class of the kernel classifier"), std::string::npos);
    write("manifest.json", with_chooser(chooser));
    write("c.json", classifier_model("[0, 1, 2, 0, 1, 2]", "2"));
    EXPECT_NE(load_error().find("the model has 2 classes, the bundle lists 3"), std::string::npos);
}

TEST_F(BundleTest, TreeModelsLoadThroughABinaryCopyWhileTheirFileIsUnchanged) {
    const fs::path cache = folder_ / "cache";
    const std::string model = (folder_ / "m.json").string();
    prenet::FeatureMatrix rows(2, 2);
    rows << 2, 1, 8, 1;
    const auto predict = [&] { return prenet::load_regressor("xgboost", model, 2, cache.string())->predict(rows); };
    write("m.json", tree_model());
    EXPECT_NEAR(predict()[1], 0.5 + 2.0 - 1.5, 1e-6);  // read from the JSON, a copy made
    ASSERT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator{}), 1);
    const fs::path copy = fs::directory_iterator(cache)->path();
    // The JSON spoilt without changing its size or time: the copy is what loads.
    const auto written = fs::last_write_time(model);
    auto spoilt = tree_model();
    spoilt.replace(spoilt.find("\"learner\""), 9, "\"learnex\"");
    write("m.json", spoilt);
    fs::last_write_time(model, written);
    EXPECT_NEAR(predict()[1], 0.5 + 2.0 - 1.5, 1e-6);
    // A changed file (another time): read again, the copy remade.
    auto changed = tree_model();
    changed.replace(changed.find("[4.0, 0.25, 2.0]"), 16, "[4.0, 0.25, 3.0]");
    write("m.json", changed);
    fs::last_write_time(model, written + std::chrono::seconds(5));
    EXPECT_NEAR(predict()[1], 0.5 + 3.0 - 1.5, 1e-6);
    // A damaged copy (cut short, or a node pointing outside its tree) is passed over and remade as it was.
    const auto read_copy = [&] {
        std::ifstream in(copy, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    };
    const std::string sound = read_copy();
    for (const auto damage : {0, 1}) {
        std::string bytes = sound;
        if (damage == 0) bytes.resize(bytes.size() - 7);
        else bytes.replace(bytes.size() - 16, 4, "\x7f\x7f\x7f\x7f");  // the last node's right child
        std::ofstream(copy, std::ios::binary | std::ios::trunc) << bytes;
        EXPECT_NEAR(predict()[1], 0.5 + 3.0 - 1.5, 1e-6) << damage;
        EXPECT_EQ(read_copy(), sound) << damage;
    }
    // A cache folder that cannot be made (under a file): loads from the JSON all the same.
    write("file", "x");
    EXPECT_NEAR(prenet::load_regressor("xgboost", model, 2, (folder_ / "file" / "cache").string())->predict(rows)[1],
                0.5 + 3.0 - 1.5, 1e-6);
    // A classifier's trees too.
    write("c.json", classifier_model());
    prenet::FeatureMatrix classify(1, 2);
    classify << 8, 3;
    for (int load = 0; load < 2; ++load) {
        const auto classifier = prenet::load_classifier((folder_ / "c.json").string(), 2, 3, cache.string());
        EXPECT_EQ(classifier->predict_class(classify), std::vector<std::size_t>{1}) << load;
    }
}

TEST_F(BundleTest, ModelFilesLoadSideBySideAndTheFirstFailureInTheManifestIsReported) {
    // Several model files are read on several threads; every one is loaded, and where more than one fails, the
    // error is the first failing entry's in manifest order, whichever thread met it first.
    const std::string dense = R"({"mean": [0], "scale": [1], "layers": [{"weight": [[1]], "bias": [0]}]})";
    const auto entry = [](const std::string& kind, const std::string& file) {
        return R"({"kind": ")" + kind + R"(", "mode": "forward", "family": "linear", "file": ")" + file +
               R"(", "features": ["batch"], "target": "log_ms"})";
    };
    const auto bundle_of = [&](const std::vector<std::string>& entries) {
        std::string list;
        for (const auto& e : entries) list += (list.empty() ? "" : ", ") + e;
        return R"({"format": "prenet-predictors", "version": 1, "predictors": [)" + list + "]}";
    };
    const std::vector<std::string> kinds = {"linear", "conv2d", "relu", "add", "gelu", "softmax", "bmm", "layer_norm",
                                            "embedding", "batchnorm2d"};
    std::vector<std::string> entries;
    for (const auto& kind : kinds) {
        write(kind + ".json", dense);
        entries.push_back(entry(kind, kind + ".json"));
    }
    write("manifest.json", bundle_of(entries));
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    EXPECT_EQ(bundle.available().size(), kinds.size());
    const auto& relu = prenet::find_layer_kind("relu");
    EXPECT_NEAR(bundle.predict_ms("relu", "forward", {relu.configure({{"batch", 3}, {"features", 8}})}, gpu(),
                                  "sgd")[0], std::exp(3.0), 1e-9);
    entries[7] = entry("layer_norm", "missing.json");
    write("add.json", "{not json");
    write("manifest.json", bundle_of(entries));
    EXPECT_NE(load_error().find("add.json: not a valid dense model"), std::string::npos) << load_error();
    entries.push_back(entry("relu", "relu.json"));
    write("manifest.json", bundle_of(entries));
    EXPECT_NE(load_error().find("(relu, forward) is listed twice"), std::string::npos) << load_error();
}

TEST_F(BundleTest, LoadErrorsAreClear) {
    EXPECT_NE(load_error().find("cannot open"), std::string::npos);
    write("manifest.json", "{not json");
    EXPECT_NE(load_error().find("is not valid JSON"), std::string::npos);
    write("manifest.json", manifest(R"(["batch"])", "linear", "log_ms", 7));
    EXPECT_NE(load_error().find("has format version 7; this build reads version 1"), std::string::npos);
    write("manifest.json", manifest(R"(["batch", "colour"])"));
    EXPECT_NE(load_error().find("input 'colour' is not a feature of layer kind 'linear'"), std::string::npos);
    write("manifest.json", manifest(R"(["batch"])", "linear", "seconds"));
    EXPECT_NE(load_error().find("unknown target 'seconds'"), std::string::npos);
    write("manifest.json", manifest(R"(["batch"])", "magic"));
    EXPECT_NE(load_error().find("unknown model family 'magic'"), std::string::npos);
    write("manifest.json", manifest(R"(["batch"])"));
    EXPECT_NE(load_error().find("cannot open model file"), std::string::npos);
    write("m.json", R"({"mean": [0, 0], "scale": [1, 1], "layers": [{"weight": [[1, 1]], "bias": [0]}]})");
    EXPECT_NE(load_error().find("layer sizes do not match 1 inputs"), std::string::npos);
    write("m.json", R"({"mean": [0], "scale": [1], "layers": [{"weight": [[1]], "bias": [0)");
    EXPECT_NE(load_error().find("not a valid dense model"), std::string::npos);
    write("manifest.json", R"({"format": "prenet-predictors", "version": 1})");
    EXPECT_NE(load_error().find("missing or has malformed fields"), std::string::npos);
}

}  // namespace
