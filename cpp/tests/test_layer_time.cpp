// Backward and composite kernels against the kinds' exact counts, and the estimator's rules on a small bundle.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <stdexcept>

#include "prenet/features.hpp"
#include "prenet/layer_time.hpp"
#include "prenet/optimizer.hpp"

namespace {

namespace fs = std::filesystem;
using prenet::find_layer_kind;
using prenet::KernelWork;

// A forward cost (`member` of LayerCost, fp32) summed over kernels, each times its count.
double forward_sum(const std::vector<KernelWork>& work, double prenet::LayerCost::*member) {
    double total = 0;
    for (const auto& k : work) {
        const auto c = find_layer_kind(k.kind).configure(k.config);
        total += k.count * c.kind().cost(c, 4).*member;
    }
    return total;
}

double forward_flops_of(const std::vector<KernelWork>& work) {
    return forward_sum(work, &prenet::LayerCost::forward_flops);
}
double forward_bytes_of(const std::vector<KernelWork>& work) {
    return forward_sum(work, &prenet::LayerCost::forward_bytes);
}

TEST(Kernels, BackwardKernelsOfProductsRepeatTheExactGradientFlops) {
    const auto linear = find_layer_kind("linear").configure(
        {{"batch", 8}, {"seq_len", 16}, {"in_features", 96}, {"out_features", 40}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(forward_flops_of(linear.kind().backward_kernels(linear)),
                     linear.kind().cost(linear, 4).backward_flops);
    const auto bmm = find_layer_kind("bmm").configure({{"batch", 12}, {"m", 7}, {"k", 64}, {"n", 33}});
    EXPECT_DOUBLE_EQ(forward_flops_of(bmm.kind().backward_kernels(bmm)), bmm.kind().cost(bmm, 4).backward_flops);
    // Stride 1, odd kernel, "same" padding: the transposed convolution has the forward's shape and MACs.
    const auto conv = find_layer_kind("conv2d").configure({{"batch", 4}, {"in_channels", 24}, {"out_channels", 48},
                                                           {"kernel_size", 3}, {"padding", 1}, {"height", 14},
                                                           {"width", 14}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(forward_flops_of(conv.kind().backward_kernels(conv)), conv.kind().cost(conv, 4).backward_flops);
}

TEST(Kernels, AConvolutionOnTensorCoresIsItsImplicitGemmAndTransposes) {
    const auto conv = find_layer_kind("conv2d").configure({{"batch", 4}, {"in_channels", 24}, {"out_channels", 48},
                                                           {"kernel_size", 3}, {"stride", 2}, {"padding", 1},
                                                           {"height", 15}, {"width", 15}});
    const auto work = conv.kind().tensor_core_kernels(conv);
    ASSERT_EQ(work.size(), 2u);
    EXPECT_EQ(work[0].kind, "linear");
    EXPECT_EQ(work[0].config.at("seq_len"), 4 * 8 * 8);  // output pixels of the batch
    EXPECT_EQ(work[0].config.at("in_features"), 24 * 9);
    // the GEMM without the bias, which PyTorch adds after cuDNN's kernels in a kernel of its own: a read and a
    // write of the output, 2/3 of an add of its size (on CUDA cores too)
    const auto bias = conv.kind().gpu_bias_kernels(conv);
    ASSERT_EQ(bias.size(), 1u);
    EXPECT_EQ(bias[0].kind, "add");
    EXPECT_EQ(bias[0].config.at("batch") * bias[0].config.at("features"), 4 * 48 * 8 * 8);
    EXPECT_DOUBLE_EQ(3 * bias[0].count, 2.0);
    EXPECT_DOUBLE_EQ(forward_flops_of({work[0]}) + 4 * 48 * 8 * 8, conv.kind().cost(conv, 4).forward_flops);
    EXPECT_EQ(work[1].kind, "add");  // input, weights and output, each read and written once
    EXPECT_EQ(work[1].config.at("features"), 4 * 24 * 15 * 15 + 48 * 24 * 9 + 4 * 48 * 8 * 8);
    EXPECT_DOUBLE_EQ(3 * work[1].count, 2.0);
    const auto depthwise = find_layer_kind("conv2d").configure({{"batch", 4}, {"in_channels", 24},
                                                                {"out_channels", 24}, {"kernel_size", 3},
                                                                {"height", 15}, {"width", 15}, {"groups", 24}});
    EXPECT_TRUE(depthwise.kind().tensor_core_kernels(depthwise).empty());
    EXPECT_TRUE(depthwise.kind().gpu_bias_kernels(depthwise).empty());  // PyTorch's depthwise kernel adds it
    auto unbiased = conv.values();
    unbiased[conv.kind().parameter_index("bias")] = 0;
    EXPECT_TRUE(conv.kind().gpu_bias_kernels(prenet::LayerConfig(conv.kind(), unbiased)).empty());
}

TEST(Kernels, AChannelsLastConvolutionNeedsNoTransposesAndItsGradientsKeepTheFormat) {
    const auto conv = find_layer_kind("conv2d").configure({{"batch", 4}, {"in_channels", 24}, {"out_channels", 48},
                                                           {"kernel_size", 3}, {"padding", 1}, {"height", 14},
                                                           {"width", 14}, {"channels_last", 1}});
    const auto work = conv.kind().tensor_core_kernels(conv);
    ASSERT_EQ(work.size(), 1u);  // the implicit GEMM alone (its bias added after it)
    EXPECT_EQ(work[0].kind, "linear");
    EXPECT_DOUBLE_EQ(forward_flops_of(work) + 4 * 48 * 14 * 14, conv.kind().cost(conv, 4).forward_flops);
    for (const auto& gradient : conv.kind().backward_kernels(conv)) {
        if (gradient.kind == "conv2d") EXPECT_EQ(gradient.config.at("channels_last"), 1);
    }
    // NCHW by default
    const auto nchw = find_layer_kind("conv2d").configure({{"batch", 4}, {"in_channels", 24}, {"out_channels", 48},
                                                           {"kernel_size", 3}, {"height", 14}, {"width", 14}});
    EXPECT_EQ(nchw.kind().tensor_core_kernels(nchw).size(), 2u);
}

// Conv1d(16, 32, kernel 5) over 60 positions, and the transposed ConvTranspose1d(32, 16, 5) back to them, grouped too.
prenet::LayerConfig convolution(std::int64_t transposed, std::int64_t groups, std::int64_t bias = 1) {
    const bool t = transposed != 0;
    return find_layer_kind("convolution").configure(
        {{"batch", 8}, {"in_channels", t ? 32 : 16}, {"out_channels", t ? 16 : 32}, {"in_positions", t ? 56 : 60},
         {"out_positions", t ? 60 : 56}, {"kernel_positions", 5}, {"groups", groups}, {"transposed", transposed},
         {"bias", bias}});
}

TEST(Kernels, AnyConvolutionIsItsImplicitGemmWithTheExactMultiplyAdds) {
    for (std::int64_t transposed : {0, 1}) {
        for (std::int64_t groups : {1, 4, 16}) {
            const auto c = convolution(transposed, groups);
            const auto cost = c.kind().cost(c, 4);
            // Conv1d: each of the 8 x 32 x 56 outputs sums 16 / groups x 5 taps; ConvTranspose1d: each of the
            // 8 x 32 x 56 inputs scatters into 16 / groups x 5 outputs. Bias: one add per output element.
            const double macs = 8.0 * 32 * 56 * 16 / groups * 5, outputs = 8.0 * 16 * 60;
            EXPECT_DOUBLE_EQ(cost.forward_flops, 2 * macs + (transposed ? outputs : 8.0 * 32 * 56));
            EXPECT_DOUBLE_EQ(cost.parameters, 16.0 * 32 / groups * 5 + (transposed ? 16 : 32));
            // One GEMM for all groups, over the output (a transposed one's inner dimension rounded: its outputs
            // gather 56/60 of the taps on average).
            const auto kernels = c.kind().forward_kernels(c);
            ASSERT_EQ(kernels.size(), 1u);
            EXPECT_EQ(kernels[0].kind, "linear");
            EXPECT_EQ(kernels[0].config.at("seq_len") * kernels[0].config.at("out_features"),
                      8 * (transposed ? 16 * 60 : 32 * 56));
            const double tolerance = transposed ? 0.5 / kernels[0].config.at("in_features") : 0;
            EXPECT_NEAR(forward_flops_of(kernels), cost.forward_flops, tolerance * cost.forward_flops);
            // dX runs the other way with the same multiply-adds, dW repeats them; db sums dY.
            const auto unbiased = convolution(transposed, groups, 0);
            EXPECT_NEAR(forward_flops_of(unbiased.kind().backward_kernels(unbiased)),
                        unbiased.kind().cost(unbiased, 4).backward_flops,
                        0.05 * unbiased.kind().cost(unbiased, 4).backward_flops);
            EXPECT_EQ(c.kind().backward_kernels(c)[0].config.at("transposed"), 1 - transposed);
            // On tensor cores: the GEMM and the layout transposes, grouped ones keep their CUDA-core kernel.
            EXPECT_EQ(c.kind().tensor_core_kernels(c).size(), groups == 1 ? 2u : 0u);
        }
    }
    EXPECT_THROW(find_layer_kind("convolution").configure({{"batch", 1}, {"in_channels", 6}, {"out_channels", 4},
                                                          {"in_positions", 9}, {"out_positions", 9},
                                                          {"kernel_positions", 1}, {"groups", 4}}),
                 std::invalid_argument);
}

TEST(Kernels, AttentionKernelsAddUpToItsForwardFlops) {
    for (std::int64_t bias : {0, 1}) {
        const auto c = find_layer_kind("multihead_attention").configure(
            {{"batch", 3}, {"seq_len", 50}, {"embed_dim", 64}, {"num_heads", 8}, {"bias", bias}});
        EXPECT_DOUBLE_EQ(forward_flops_of(c.kind().forward_kernels(c)), c.kind().cost(c, 4).forward_flops) << bias;
    }
}

TEST(Kernels, RecurrentKernelsCoverEveryGemm) {
    // Two stacked bidirectional LSTM layers: input projections of both layers plus one hidden GEMM per step.
    const auto c = find_layer_kind("lstm").configure({{"batch", 4}, {"seq_len", 10}, {"input_size", 32},
                                                      {"hidden_size", 16}, {"num_layers", 2}, {"bidirectional", 1},
                                                      {"bias", 0}});
    double gemm_flops = 0;
    for (const auto& k : c.kind().forward_kernels(c)) {
        if (k.kind != "linear") continue;
        const auto kc = find_layer_kind(k.kind).configure(k.config);
        gemm_flops += k.count * kc.kind().cost(kc, 4).forward_flops;
    }
    const double steps = 4 * 10, gates = 4 * 16;
    EXPECT_DOUBLE_EQ(gemm_flops, 2 * (2 * steps * gates * (32 + 16)) + 2 * (2 * steps * gates * (32 + 16)));
}

TEST(Kernels, AnEmbeddingsBackwardZeroFillsTheWholeTableGradient) {
    // 1,000 tokens into a 50,000-row table: the table's zero-fill, not the tokens' rows, is most of the traffic.
    const auto embedding = find_layer_kind("embedding").configure(
        {{"batch", 10}, {"seq_len", 100}, {"num_embeddings", 50000}, {"embedding_dim", 64}});
    const auto cost = embedding.kind().cost(embedding, 4);
    const double kernel_bytes = forward_bytes_of(embedding.kind().backward_kernels(embedding));
    EXPECT_DOUBLE_EQ(kernel_bytes, 4.0 * (50000 * 64 + 3 * 1000 * 64));
    // what the kernels leave out of the kind's backward traffic is the token ids, as in its forward
    EXPECT_DOUBLE_EQ(cost.backward_bytes - kernel_bytes, cost.forward_bytes - 4.0 * 2 * 1000 * 64);
}

TEST(Kernels, PoolKernelsMoveThePoolsWholeTrafficIndicesIncluded) {
    // ResNet's stem pool: 3x3, stride 2, padding 1 over 112x112; max pooling also writes and reads int64 indices.
    for (const char* name : {"maxpool2d", "avgpool2d"}) {
        const auto pool = find_layer_kind(name).configure({{"batch", 8}, {"channels", 64}, {"height", 112},
                                                           {"width", 112}, {"kernel_size", 3}, {"stride", 2},
                                                           {"padding", 1}});
        const auto cost = pool.kind().cost(pool, 4);
        EXPECT_DOUBLE_EQ(forward_bytes_of(pool.kind().forward_kernels(pool)), cost.forward_bytes) << name;
        EXPECT_DOUBLE_EQ(forward_bytes_of(pool.kind().backward_kernels(pool)), cost.backward_bytes) << name;
    }
    const auto max = find_layer_kind("maxpool2d").configure({{"batch", 1}, {"channels", 1}, {"height", 4},
                                                             {"width", 4}, {"kernel_size", 2}, {"stride", 2}});
    // 16 inputs, 4 outputs: 4 bytes each, and 8 bytes per output index.
    EXPECT_DOUBLE_EQ(max.kind().cost(max, 4).forward_bytes, 4 * (16 + 4) + 8 * 4);
}

TEST(Optimizers, LookupNamesTheKnownOnes) {
    EXPECT_EQ(prenet::find_optimizer("AdamW").name, "adamw");
    try {
        prenet::find_optimizer("lion");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("unknown optimizer 'lion'"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("sgd_momentum"), std::string::npos);
    }
}

class EstimatorTest : public ::testing::Test {
protected:
    // A bundle with one predictor, linear forward: ms = 1e-9 * forward FLOPs (a 1 TFLOP/s device).
    void SetUp() override {
        // one folder per test, as ctest may run the tests side by side in separate processes
        folder_ = fs::path(::testing::TempDir()) /
                  ("estimator_bundle_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        fs::remove_all(folder_);
        fs::create_directories(folder_);
        std::ofstream(folder_ / "manifest.json")
            << R"({"format": "prenet-predictors", "version": 1, "predictors": [{"kind": "linear", "mode": "forward",
               "family": "linear", "file": "m.json", "features": ["batch"], "target": "log_ms_over:forward_flops"}]})";
        std::ofstream(folder_ / "m.json") << std::setprecision(17)
                                          << R"({"mean": [0], "scale": [1], "layers": [{"weight": [[0]], "bias": [)"
                                          << std::log(1e-9) << "]}]}";
        gpu_.name = "Test GPU";
        gpu_.fp32_tflops = 10;
        gpu_.memory_bandwidth_gbs = 100;
    }
    // The test GPU with a tensor-core rate besides (TF32, BF16 or FP16, in TFLOP/s).
    prenet::GpuSpec gpu_with(std::optional<double> prenet::GpuSpec::*rate, double tflops) const {
        prenet::GpuSpec gpu = gpu_;
        gpu.*rate = tflops;
        return gpu;
    }
    // A transformer's projection: 64 sequences of 128 tokens, 1024 to 1024 features.
    static prenet::LayerConfig token_linear() {
        return find_layer_kind("linear").configure(
            {{"batch", 64}, {"seq_len", 128}, {"in_features", 1024}, {"out_features", 1024}});
    }
    fs::path folder_;
    prenet::GpuSpec gpu_;
};

TEST_F(EstimatorTest, PredictedForwardComposedBackwardAndRooflineOptimizer) {
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto c =
        find_layer_kind("linear").configure({{"batch", 32}, {"in_features", 64}, {"out_features", 128}, {"bias", 0}});
    const auto cost = c.kind().cost(c, 4);
    const auto t = prenet::estimate_layer_times(bundle, {c}, gpu_, "adam").front();
    EXPECT_NEAR(t.forward_ms, 1e-9 * cost.forward_flops, 1e-15);
    EXPECT_EQ(t.forward_basis, prenet::TimeBasis::predicted);
    EXPECT_NEAR(t.backward_ms, 1e-9 * cost.backward_flops, 1e-15);  // dX and dW, both predicted linear kernels
    EXPECT_EQ(t.backward_basis, prenet::TimeBasis::kernels);
    // No add predictor: Adam's 8 kernels on the weight, each an add-shaped roofline over its share of 20 passes.
    const double elements = std::llround(64.0 * 128 * 20 / (3.0 * 8));
    EXPECT_NEAR(t.optimizer_ms, 8 * 1e3 * 3 * 4 * elements / 100e9, 1e-12);
    EXPECT_EQ(t.optimizer_basis, prenet::TimeBasis::roofline);
    const auto sgd = prenet::estimate_layer_times(bundle, {c}, gpu_, "sgd").front();
    EXPECT_LT(sgd.optimizer_ms, t.optimizer_ms);
    EXPECT_THROW(prenet::estimate_layer_times(bundle, {c}, gpu_, "lion"), std::invalid_argument);
}

TEST_F(EstimatorTest, ARepeatedConfigurationGetsTheTimesItGetsAlone) {
    // Predicted once and handed to every layer and kernel that runs it: a square linear layer's forward and its
    // dX and dW products are one configuration, and here two layers run it.
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto square = find_layer_kind("linear").configure(
        {{"batch", 64}, {"in_features", 64}, {"out_features", 64}, {"bias", 0}});
    const auto other = find_layer_kind("linear").configure(
        {{"batch", 32}, {"in_features", 64}, {"out_features", 128}, {"bias", 0}});
    const auto alone = prenet::estimate_layer_times(bundle, {square}, gpu_, "sgd").front();
    const auto together = prenet::estimate_layer_times(bundle, {square, other, square}, gpu_, "sgd");
    ASSERT_EQ(together.size(), 3u);
    for (const auto& t : {together[0], together[2]}) {
        EXPECT_DOUBLE_EQ(t.forward_ms, alone.forward_ms);
        EXPECT_DOUBLE_EQ(t.backward_ms, alone.backward_ms);
        EXPECT_DOUBLE_EQ(t.optimizer_ms, alone.optimizer_ms);
    }
    EXPECT_DOUBLE_EQ(alone.backward_ms, 2 * alone.forward_ms);  // dX and dW: the forward's shape twice
    EXPECT_DOUBLE_EQ(together[1].forward_ms, prenet::estimate_layer_times(bundle, {other}, gpu_, "sgd")[0].forward_ms);
}

TEST_F(EstimatorTest, TheIssueGapLeavesEachPredictedKernelsDeviceTimeNotBelowItsRoofline) {
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto c = find_layer_kind("linear").configure(
        {{"batch", 256}, {"in_features", 512}, {"out_features", 512}, {"bias", 0}});
    const auto cost = c.kind().cost(c, 4);
    const double predicted = 1e-9 * cost.forward_flops;
    const double roofline = prenet::roofline_ms(cost.forward_flops, cost.forward_bytes, gpu_);
    ASSERT_LT(roofline, predicted - 0.05);
    const auto as_measured = prenet::estimate_layer_times(bundle, {c}, gpu_, "sgd").front();
    const auto small_gap = prenet::estimate_layer_times(bundle, {c}, gpu_, "sgd", prenet::Precision::fp32,
                                                        {{"linear", 0.05}}).front();
    const auto large_gap = prenet::estimate_layer_times(bundle, {c}, gpu_, "sgd", prenet::Precision::fp32,
                                                        {{"linear", 1.0}}).front();
    EXPECT_NEAR(as_measured.forward_ms, predicted, 1e-12);
    EXPECT_NEAR(small_gap.forward_ms, predicted - 0.05, 1e-12);
    EXPECT_NEAR(large_gap.forward_ms, roofline, 1e-12);
    // The backward's two products are two kernels: the gap comes off each.
    EXPECT_NEAR(small_gap.backward_ms, as_measured.backward_ms - 2 * 0.05, 1e-12);
}

TEST_F(EstimatorTest, AProductIsNeverPredictedFasterThanItsFlopsAtTheDevicesPeak) {
    // The bundle's 1 TFLOP/s is beyond a 0.1 TFLOP/s device: its products are raised to their FLOPs at 0.1.
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    prenet::GpuSpec slow = gpu_;
    slow.fp32_tflops = 0.1;
    const auto c = find_layer_kind("linear").configure(
        {{"batch", 256}, {"in_features", 512}, {"out_features", 512}, {"bias", 0}});
    const auto cost = c.kind().cost(c, 4);
    const auto t = prenet::estimate_layer_times(bundle, {c}, slow, "sgd").front();
    EXPECT_NEAR(t.forward_ms, 1e-8 * cost.forward_flops, 1e-12 * cost.forward_flops);
    EXPECT_NEAR(t.backward_ms, 1e-8 * cost.backward_flops, 1e-12 * cost.backward_flops);
    const auto fast = prenet::estimate_layer_times(bundle, {c}, gpu_, "sgd").front();
    EXPECT_NEAR(fast.forward_ms, 1e-9 * cost.forward_flops, 1e-12 * cost.forward_flops);  // above it: as predicted
    // Plain products only: Winograd and FFT convolutions multiply less than a convolution's FLOPs.
    for (const char* kind : {"linear", "bmm", "rnn", "lstm", "gru", "multihead_attention"}) {
        EXPECT_TRUE(find_layer_kind(kind).flops_bound_time) << kind;
    }
    for (const char* kind : {"conv2d", "convolution", "add", "softmax"}) {
        EXPECT_FALSE(find_layer_kind(kind).flops_bound_time) << kind;
    }
}

TEST_F(EstimatorTest, AStreamingKernelBelowOneWaveTakesNoLongerThanTheFullWave) {
    // An add predictor whose time falls with the batch (log ms = log 1e-3 - 1e-4 batch), as a forest's noise on
    // tiny, host-paced kernels can make it: below one wave of the GPU's resident threads a kernel is timed as the
    // faster of itself and the same kernel filling that wave.
    const fs::path folder = folder_ / "streaming";
    fs::create_directories(folder);
    std::ofstream(folder / "manifest.json")
        << R"({"format": "prenet-predictors", "version": 1, "predictors": [{"kind": "add", "mode": "forward",
           "family": "linear", "file": "m.json", "features": ["batch"], "target": "log_ms"}]})";
    std::ofstream(folder / "m.json") << std::setprecision(17) << R"({"mean": [0], "scale": [1], "layers": [)"
                                     << R"({"weight": [[-1e-4]], "bias": [)" << std::log(1e-3) << "]}]}";
    const auto bundle = prenet::PredictorBundle::load(folder.string());
    const auto add = [](std::int64_t batch) {
        return find_layer_kind("add").configure({{"batch", batch}, {"features", 4}});
    };
    const auto predicted = [](double batch) { return 1e-3 * std::exp(-1e-4 * batch); };
    prenet::GpuSpec gpu = gpu_;
    gpu.sm_count = 2;  // a wave: 2 x kElementsPerWaveSm = 16,384 elements, a batch of 4,096 rows of 4
    ASSERT_DOUBLE_EQ(2 * prenet::kElementsPerWaveSm, 16384.0);
    const auto times = prenet::estimate_layer_times(bundle, {add(1), add(1000), add(8192)}, gpu, "sgd");
    EXPECT_NEAR(times[0].forward_ms, predicted(4096), 1e-15);
    EXPECT_NEAR(times[1].forward_ms, predicted(4096), 1e-15);
    EXPECT_NEAR(times[2].forward_ms, predicted(8192), 1e-15);  // beyond one wave: as predicted
    EXPECT_LT(times[2].forward_ms, times[0].forward_ms);
    // a host CPU has no waves: as predicted
    prenet::GpuSpec host = gpu;
    host.bus = "host";
    EXPECT_NEAR(prenet::estimate_layer_times(bundle, {add(1)}, host, "sgd")[0].forward_ms, predicted(1), 1e-15);
    // a kind that is not streaming rows keeps its own time: a product's work is not its rows
    EXPECT_TRUE(find_layer_kind("add").streaming_rows && find_layer_kind("softmax").streaming_rows &&
                find_layer_kind("layer_norm").streaming_rows);
    EXPECT_FALSE(find_layer_kind("linear").streaming_rows || find_layer_kind("conv2d").streaming_rows);
}

TEST_F(EstimatorTest, EachKernelOfACompositeLayerLosesItsOwnKindsGap) {
    // An LSTM layer's products are linear kernels: the linear gap comes off each of them (its adds, bounded by
    // their rooflines, have no predictor here), the LSTM's own entry, which no predictor learned, off none.
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto lstm = find_layer_kind("lstm").configure(
        {{"batch", 64}, {"seq_len", 10}, {"input_size", 256}, {"hidden_size", 256}});
    const auto plain = prenet::estimate_layer_times(bundle, {lstm}, gpu_, "sgd").front();
    const auto by_linear = prenet::estimate_layer_times(bundle, {lstm}, gpu_, "sgd", prenet::Precision::fp32,
                                                        {{"linear", 0.01}}).front();
    const auto by_lstm = prenet::estimate_layer_times(bundle, {lstm}, gpu_, "sgd", prenet::Precision::fp32,
                                                      {{"lstm", 0.01}}).front();
    double products = 0;  // linear kernels of the forward: the input projection and one per step
    for (const auto& k : lstm.kind().forward_kernels(lstm)) products += k.kind == "linear" ? k.count : 0;
    EXPECT_DOUBLE_EQ(products, 11);
    EXPECT_NEAR(plain.forward_ms - by_linear.forward_ms, 0.01 * products, 1e-9);
    EXPECT_DOUBLE_EQ(by_lstm.forward_ms, plain.forward_ms);
}

TEST_F(EstimatorTest, TheForwardInsideATrainingStepHasItsOwnPredictorWhereTheBundleHasOne) {
    const auto linear = find_layer_kind("linear").configure(
        {{"batch", 32}, {"in_features", 64}, {"out_features", 128}, {"bias", 0}});
    const auto add = find_layer_kind("add").configure({{"batch", 4}, {"features", 1000}});
    const auto without = prenet::estimate_layer_times(prenet::PredictorBundle::load(folder_.string()),
                                                      {linear, add}, gpu_, "sgd");
    for (const auto& t : without) {  // no train_forward predictor: the step's forward is the forward alone
        EXPECT_DOUBLE_EQ(t.step_forward_ms, t.forward_ms);
        EXPECT_EQ(t.step_forward_basis, t.forward_basis);
    }
    // A linear layer's forward within a step at 1.5 ns per FLOP, its forward alone at 1 ns.
    std::ofstream(folder_ / "manifest.json")
        << R"({"format": "prenet-predictors", "version": 1, "predictors": [{"kind": "linear", "mode": "forward",
           "family": "linear", "file": "m.json", "features": ["batch"], "target": "log_ms_over:forward_flops"},
           {"kind": "linear", "mode": "train_forward", "family": "linear", "file": "t.json", "features": ["batch"],
           "target": "log_ms_over:forward_flops"}]})";
    std::ofstream(folder_ / "t.json") << std::setprecision(17)
                                      << R"({"mean": [0], "scale": [1], "layers": [{"weight": [[0]], "bias": [)"
                                      << std::log(1.5e-9) << "]}]}";
    const auto with = prenet::estimate_layer_times(prenet::PredictorBundle::load(folder_.string()),
                                                   {linear, add}, gpu_, "sgd");
    EXPECT_DOUBLE_EQ(with[0].forward_ms, without[0].forward_ms);
    EXPECT_NEAR(with[0].step_forward_ms, 1.5 * with[0].forward_ms, 1e-12);
    EXPECT_EQ(with[0].step_forward_basis, prenet::TimeBasis::predicted);
    EXPECT_DOUBLE_EQ(with[0].backward_ms, without[0].backward_ms);  // its products stay forward kernels
    EXPECT_DOUBLE_EQ(with[1].step_forward_ms, with[1].forward_ms);  // a kind without one keeps its forward
}

TEST_F(EstimatorTest, CompositeKindsUseTheirKernelsAndParameterFreeKindsHaveNoUpdate) {
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto attention = find_layer_kind("multihead_attention").configure(
        {{"batch", 2}, {"seq_len", 16}, {"embed_dim", 32}, {"num_heads", 4}, {"bias", 0}});
    const auto add = find_layer_kind("add").configure({{"batch", 4}, {"features", 1000}});
    const auto times = prenet::estimate_layer_times(bundle, {attention, add}, gpu_, "sgd");
    // Projections predicted (2 * 16 * 32 * (96 + 32) FLOPs x 2 samples), the rest bounded by rooflines.
    EXPECT_GT(times[0].forward_ms, 1e-9 * 2 * 2 * 16 * 32 * (96 + 32));
    EXPECT_EQ(times[0].forward_basis, prenet::TimeBasis::roofline);
    EXPECT_GT(times[0].backward_ms, times[0].forward_ms);
    EXPECT_NEAR(times[1].forward_ms, prenet::roofline_ms(4000, 4 * 3 * 4000.0, gpu_), 1e-15);
    EXPECT_EQ(times[1].backward_ms, 0);  // autograd hands dY to both inputs
    EXPECT_EQ(times[1].optimizer_ms, 0);
    EXPECT_EQ(times[1].optimizer_basis, prenet::TimeBasis::exact);
}

TEST_F(EstimatorTest, CudnnConvolutionsRunOnTf32TensorCoresByDefaultWhereThatIsFaster) {
    using prenet::Precision;
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    // No conv2d predictor: on CUDA cores forward and backward are roofline bounds.
    const auto big = find_layer_kind("conv2d").configure({{"batch", 32}, {"in_channels", 256}, {"out_channels", 256},
                                                          {"kernel_size", 3}, {"padding", 1}, {"height", 28},
                                                          {"width", 28}});
    const auto depthwise = find_layer_kind("conv2d").configure({{"batch", 32}, {"in_channels", 256},
                                                                {"out_channels", 256}, {"kernel_size", 3},
                                                                {"padding", 1}, {"height", 28}, {"width", 28},
                                                                {"groups", 256}});
    const auto fp32 = prenet::estimate_layer_times(bundle, {big, depthwise}, gpu_, "sgd");  // no TF32 rate
    const prenet::GpuSpec ampere = gpu_with(&prenet::GpuSpec::tf32_tflops, 80);  // 8x the fp32 rate
    const auto cost = big.kind().cost(big, 4);
    const double compute_fp32 = 1e3 * cost.forward_flops / 10e12, memory = 1e3 * cost.forward_bytes / 100e9;
    ASSERT_GT(compute_fp32, memory);  // compute-bound at fp32
    EXPECT_NEAR(prenet::tensor_core_factor(big, ampere, Precision::fp32),
                std::max(compute_fp32 / 8, memory) / compute_fp32, 1e-12);
    EXPECT_EQ(prenet::tensor_core_factor(big, gpu_, Precision::fp32), 1.0);
    EXPECT_TRUE(prenet::on_tensor_cores(big.kind(), ampere, Precision::fp32));
    EXPECT_FALSE(prenet::on_tensor_cores(big.kind(), ampere, Precision::fp32_strict));
    EXPECT_FALSE(prenet::on_tensor_cores(big.kind(), gpu_, Precision::fp32));
    // A TF32 rate no faster than the CUDA cores' (GeForce Ampere and Ada, the L40) still lets cuDNN pick a
    // tensor-core kernel: the choice is made (here for the CUDA-core kernel, the implicit GEMM being slower)
    const prenet::GpuSpec ada = gpu_with(&prenet::GpuSpec::tf32_tflops, 10);
    EXPECT_TRUE(prenet::on_tensor_cores(big.kind(), ada, Precision::fp32));
    EXPECT_EQ(prenet::tensor_core_factor(big, ada, Precision::fp32), 1.0);
    EXPECT_DOUBLE_EQ(prenet::estimate_layer_times(bundle, {big}, ada, "sgd")[0].forward_ms, fp32[0].forward_ms);
    EXPECT_EQ(fp32[0].forward_basis, prenet::TimeBasis::roofline);
    const auto strict = prenet::estimate_layer_times(bundle, {big, depthwise}, ampere, "sgd", Precision::fp32_strict);
    EXPECT_DOUBLE_EQ(strict[0].forward_ms, fp32[0].forward_ms);

    // On tensor cores: the implicit GEMM, predicted as a linear layer (1e-9 ms per FLOP here) and moved to the
    // TF32 rate, plus a read and a write of the input, weights and output for the NCHW <-> NHWC transposes; the
    // bias is added after either kernel (bias_ms: a read and a write of the output, at the roofline here).
    auto unbiased = big.values();
    unbiased[big.kind().parameter_index("bias")] = 0;
    const prenet::LayerConfig gradient(big.kind(), unbiased);  // also the GEMM's work
    auto tensor_core_ms = [&](const prenet::LayerConfig& c, const prenet::GpuSpec& gpu) {
        const double transposed = 32.0 * 256 * 28 * 28 * 2 + 256.0 * 256 * 9;
        return 1e-9 * gradient.kind().cost(gradient, 4).forward_flops *
                   prenet::tensor_core_factor(c, gpu, Precision::fp32) +
               1e3 * 2 * 4 * transposed / gpu.memory_bandwidth_gbs / 1e9;
    };
    auto bias_ms = [&](const prenet::GpuSpec& gpu) {
        const double outputs = 32.0 * 256 * 28 * 28;
        return 2.0 / 3.0 * prenet::roofline_ms(outputs, 3 * 4 * outputs, gpu);
    };
    // Here that is slower than the CUDA-core kernel (this bundle's GEMMs reach a tenth of the fp32 peak), so cuDNN
    // would keep the latter, and so does the estimate.
    const auto slow_gemm = prenet::estimate_layer_times(bundle, {big}, ampere, "sgd", Precision::fp32);
    ASSERT_GT(tensor_core_ms(big, ampere) + bias_ms(ampere), fp32[0].forward_ms);
    // On a GPU the convolution is timed without its bias, then the bias kernel; a CPU (oneDNN fuses the bias into
    // the convolution) has no kernel of its own for it.
    EXPECT_NEAR(fp32[0].forward_ms,
                prenet::estimate_layer_times(bundle, {gradient}, gpu_, "sgd")[0].forward_ms + bias_ms(gpu_), 1e-12);
    prenet::GpuSpec host = gpu_;
    host.bus = "host";
    EXPECT_NEAR(prenet::estimate_layer_times(bundle, {big}, host, "sgd")[0].forward_ms,
                prenet::roofline_ms(cost.forward_flops, cost.forward_bytes, host), 1e-12);
    EXPECT_DOUBLE_EQ(slow_gemm[0].forward_ms, fp32[0].forward_ms);
    // With 100x the TF32 rate and the bandwidth the tensor-core path wins, for dX and dW too (without bias; db
    // reads dY once).
    prenet::GpuSpec hopper = ampere;
    hopper.tf32_tflops = 1000;
    hopper.memory_bandwidth_gbs = 10000;
    const auto tf32 = prenet::estimate_layer_times(bundle, {big}, hopper, "sgd", Precision::fp32);
    const auto hopper_strict = prenet::estimate_layer_times(bundle, {big}, hopper, "sgd", Precision::fp32_strict);
    EXPECT_NEAR(tf32[0].forward_ms, tensor_core_ms(big, hopper) + bias_ms(hopper), 1e-9);
    EXPECT_LT(tf32[0].forward_ms, hopper_strict[0].forward_ms);
    EXPECT_EQ(tf32[0].forward_basis, prenet::TimeBasis::roofline);  // no add predictor for the transposes
    EXPECT_NEAR(tf32[0].backward_ms, 2 * tensor_core_ms(gradient, hopper) + 1e3 * 4 * 32 * 256 * 28 * 28 / 10000e9,
                1e-9);
    // A depthwise convolution keeps its own kernel, memory-bound at either rate: unchanged.
    const auto ampere_tf32 = prenet::estimate_layer_times(bundle, {depthwise}, ampere, "sgd", Precision::fp32);
    EXPECT_DOUBLE_EQ(ampere_tf32[0].forward_ms, fp32[1].forward_ms);
    // Matmuls stay in full fp32 by default.
    const auto linear = find_layer_kind("linear").configure(
        {{"batch", 64}, {"seq_len", 128}, {"in_features", 1024}, {"out_features", 1024}});
    EXPECT_EQ(prenet::tensor_core_factor(linear, ampere, Precision::fp32), 1.0);
}

TEST_F(EstimatorTest, OnAGpuACudnnConvolutionsBiasIsAKernelAfterItsOwnAndPyTorchsDepthwiseKernelAddsItItself) {
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    auto forward_ms = [&](const prenet::LayerConfig& c, const prenet::GpuSpec& device) {
        return prenet::estimate_layer_times(bundle, {c}, device, "sgd")[0].forward_ms;
    };
    // Conv1d(16, 32, 5), plain and in 4 groups (cuDNN's): timed without the bias (its GEMM predicted as a linear
    // layer here), then a read and a write of the 8 x 32 x 56 outputs, 2/3 of an add of their size.
    const auto add = find_layer_kind("add").configure({{"batch", 8 * 32}, {"features", 56}});
    for (std::int64_t groups : {1, 4}) {
        const auto bias = convolution(0, groups).kind().gpu_bias_kernels(convolution(0, groups));
        ASSERT_EQ(bias.size(), 1u);
        EXPECT_EQ(bias[0].config.at("batch") * bias[0].config.at("features"), 8 * 32 * 56);
        EXPECT_NEAR(forward_ms(convolution(0, groups), gpu_),
                    forward_ms(convolution(0, groups, 0), gpu_) + 2.0 / 3.0 * forward_ms(add, gpu_), 1e-12);
    }
    EXPECT_EQ(convolution(1, 4).kind().gpu_bias_kernels(convolution(1, 4)).size(), 1u);  // cuDNN's transposed too
    // Depthwise (16 groups of 16 channels, two outputs each): PyTorch's own kernel, the bias inside it.
    auto depthwise = [](std::int64_t bias) {
        return find_layer_kind("convolution").configure(
            {{"batch", 8}, {"in_channels", 16}, {"out_channels", 32}, {"in_positions", 60}, {"out_positions", 56},
             {"kernel_positions", 5}, {"groups", 16}, {"bias", bias}});
    };
    EXPECT_TRUE(depthwise(1).kind().gpu_bias_kernels(depthwise(1)).empty());
    const double bias_share = forward_ms(depthwise(1), gpu_) - forward_ms(depthwise(0), gpu_);
    EXPECT_GE(bias_share, 0.0);
    EXPECT_LT(bias_share, 0.1 * 2.0 / 3.0 * forward_ms(add, gpu_));
    // A grouped Conv2d goes to the same kernel; a depthwise one does not.
    const auto grouped = find_layer_kind("conv2d").configure({{"batch", 8}, {"in_channels", 16}, {"out_channels", 32},
                                                              {"kernel_size", 3}, {"padding", 1}, {"height", 14},
                                                              {"width", 14}, {"groups", 4}});
    EXPECT_EQ(grouped.kind().gpu_bias_kernels(grouped).size(), 1u);
    auto values = grouped.values();
    values[grouped.kind().parameter_index("groups")] = 16;
    EXPECT_TRUE(grouped.kind().gpu_bias_kernels(prenet::LayerConfig(grouped.kind(), values)).empty());
    // On the CPU oneDNN adds it within the convolution.
    prenet::GpuSpec host = gpu_;
    host.bus = "host";
    EXPECT_GT(forward_ms(convolution(0, 1), host), forward_ms(convolution(0, 1, 0), host));
    EXPECT_LT(forward_ms(convolution(0, 1), host) - forward_ms(convolution(0, 1, 0), host),
              0.1 * 2.0 / 3.0 * forward_ms(add, host));
}

TEST_F(EstimatorTest, TheCudaCoreTimesBesideAnEstimateAreItsStrictFp32Times) {
    using prenet::Precision;
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto big = find_layer_kind("conv2d").configure({{"batch", 32}, {"in_channels", 256}, {"out_channels", 256},
                                                          {"kernel_size", 3}, {"padding", 1}, {"height", 28},
                                                          {"width", 28}});
    const auto add = find_layer_kind("add").configure({{"batch", 32}, {"features", 1 << 20}});
    prenet::GpuSpec hopper = gpu_with(&prenet::GpuSpec::tf32_tflops, 1000);
    hopper.memory_bandwidth_gbs = 10000;
    ASSERT_LT(prenet::tensor_core_factor(big, hopper, Precision::fp32), 1.0);
    ASSERT_EQ(prenet::tensor_core_factor(add, hopper, Precision::fp32), 1.0);  // memory-bound: no tensor cores
    const auto [times, cuda_core] = prenet::estimate_layer_times_with_cuda_core(
        bundle, {big, add}, hopper, "adam", Precision::fp32, {}, true);
    const auto alone = prenet::estimate_layer_times(bundle, {big, add}, hopper, "adam", Precision::fp32);
    const auto strict = prenet::estimate_layer_times(bundle, {big, add}, hopper, "adam", Precision::fp32_strict);
    ASSERT_EQ(times.size(), 2u);
    ASSERT_EQ(cuda_core.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {  // planned together, the estimate itself is unchanged
        EXPECT_DOUBLE_EQ(times[i].forward_ms, alone[i].forward_ms);
        EXPECT_DOUBLE_EQ(times[i].backward_ms, alone[i].backward_ms);
        EXPECT_DOUBLE_EQ(times[i].optimizer_ms, alone[i].optimizer_ms);
    }
    // on tensor cores: the strict estimate, slower; off them: the estimate itself
    EXPECT_DOUBLE_EQ(cuda_core[0].forward_ms, strict[0].forward_ms);
    EXPECT_DOUBLE_EQ(cuda_core[0].backward_ms, strict[0].backward_ms);
    EXPECT_GT(cuda_core[0].forward_ms, times[0].forward_ms);
    EXPECT_DOUBLE_EQ(cuda_core[1].forward_ms, times[1].forward_ms);
    EXPECT_DOUBLE_EQ(cuda_core[1].backward_ms, times[1].backward_ms);
    // without the request, nothing beside it
    EXPECT_TRUE(prenet::estimate_layer_times_with_cuda_core(bundle, {big}, hopper, "sgd", Precision::fp32, {}, false)
                    .second.empty());
}

TEST_F(EstimatorTest, AnyConvolutionIsTimedAsItsGemmOnTheCoresCudnnWouldUse) {
    using prenet::Precision;
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    // A Conv3d(64, 64, 3) over 16^3 positions: no predictor of its own; the GEMM is predicted as a linear layer.
    const auto conv3d = find_layer_kind("convolution").configure(
        {{"batch", 8}, {"in_channels", 64}, {"out_channels", 64}, {"in_positions", 16 * 16 * 16},
         {"out_positions", 14 * 14 * 14}, {"kernel_positions", 27}, {"bias", 0}});
    const double gemm_ms = 1e-9 * conv3d.kind().cost(conv3d, 4).forward_flops;
    const auto volta = prenet::estimate_layer_times(bundle, {conv3d}, gpu_, "sgd")[0];
    EXPECT_NEAR(volta.forward_ms, gemm_ms, 1e-12);
    EXPECT_EQ(volta.forward_basis, prenet::TimeBasis::kernels);
    // dX and dW, no bias (dX, a transposed convolution, has its GEMM's inner dimension rounded)
    EXPECT_NEAR(volta.backward_ms, 2 * gemm_ms, 1e-3 * gemm_ms);
    EXPECT_GT(volta.optimizer_ms, 0);
    // With a TF32 rate far above the bundle's GEMMs the tensor-core GEMM (and its transposes) wins in fp32, as it
    // does for conv2d; fp32_strict keeps the CUDA-core GEMM.
    prenet::GpuSpec hopper = gpu_with(&prenet::GpuSpec::tf32_tflops, 1000);
    hopper.memory_bandwidth_gbs = 10000;
    const auto tf32 = prenet::estimate_layer_times(bundle, {conv3d}, hopper, "sgd", Precision::fp32)[0];
    const auto strict = prenet::estimate_layer_times(bundle, {conv3d}, hopper, "sgd", Precision::fp32_strict)[0];
    EXPECT_NEAR(strict.forward_ms, gemm_ms, 1e-12);
    const double transposes = 1e3 * 2 * 4 * (8.0 * 64 * 4096 + 64.0 * 64 * 27 + 8.0 * 64 * 2744) / 10000e9;
    EXPECT_NEAR(tf32.forward_ms, gemm_ms * prenet::tensor_core_factor(conv3d, hopper, Precision::fp32) + transposes,
                1e-9);
    EXPECT_LT(tf32.backward_ms, strict.backward_ms);
}

TEST_F(EstimatorTest, AGroupedConvolutionBeyondTheFittedGroupsIsTimedAsTheGeneralConvolution) {
    // conv2d predicted at 5 ms whatever its size, fitted on groups 1 only (as the NeuSight set is): a depthwise
    // convolution is timed as the general kind's block-diagonal GEMM (the linear predictor, exact multiply-adds),
    // not by extrapolating the conv2d predictor in groups; a dense one, or a bundle fitted on groups, keeps it.
    const auto manifest = [&](const std::string& groups) {
        std::ofstream(folder_ / "manifest.json")
            << R"({"format": "prenet-predictors", "version": 1, "fitted_on": {"ranges": {"conv2d": {"groups": )"
            << groups << R"(}}}, "predictors": [
               {"kind": "linear", "mode": "forward", "family": "linear", "file": "m.json", "features": ["batch"],
                "target": "log_ms_over:forward_flops"},
               {"kind": "conv2d", "mode": "forward", "family": "linear", "file": "c.json", "features": ["batch"],
                "target": "log_ms"}]})";
    };
    std::ofstream(folder_ / "c.json") << std::setprecision(17)
                                      << R"({"mean": [0], "scale": [1], "layers": [{"weight": [[0]], "bias": [)"
                                      << std::log(5.0) << "]}]}";
    const auto conv = [](std::int64_t groups) {
        return find_layer_kind("conv2d").configure({{"batch", 8}, {"in_channels", 48}, {"out_channels", 48},
                                                    {"kernel_size", 3}, {"padding", 1}, {"height", 28},
                                                    {"width", 28}, {"groups", groups}, {"bias", 0}});
    };
    manifest("[1, 1]");
    auto bundle = prenet::PredictorBundle::load(folder_.string());
    prenet::GpuSpec fast_memory = gpu_;
    fast_memory.memory_bandwidth_gbs = 1e6;
    const auto depthwise = prenet::estimate_layer_times(bundle, {conv(48)}, fast_memory, "sgd")[0];
    const double gemm_ms = 1e-9 * conv(48).kind().cost(conv(48), 4).forward_flops;  // 2 x 9 x outputs
    EXPECT_NEAR(depthwise.forward_ms, gemm_ms, 1e-12);
    EXPECT_EQ(depthwise.forward_basis, prenet::TimeBasis::kernels);
    EXPECT_NEAR(depthwise.backward_ms, 2 * gemm_ms, 1e-3 * gemm_ms);  // its gradients are grouped too
    // That GEMM counts the im2col operand, not the layer's tensors: on a GPU the layer is never faster than its
    // own bytes beyond the L2 cache at the memory's peak (here 100 GB/s, 1 MiB of L2), each gradient likewise
    // (they move the same tensors); a host CPU has no such floor.
    prenet::GpuSpec slow_memory = gpu_;
    slow_memory.l2_cache_mb = 1;
    const double bytes = conv(48).kind().cost(conv(48), 4).forward_bytes;
    const double floor_ms = 1e3 * (bytes - 1024.0 * 1024.0) / 100e9;
    ASSERT_GT(floor_ms, gemm_ms);
    const auto floored = prenet::estimate_layer_times(bundle, {conv(48)}, slow_memory, "sgd")[0];
    EXPECT_NEAR(floored.forward_ms, floor_ms, 1e-12);
    EXPECT_EQ(floored.forward_basis, prenet::TimeBasis::roofline);
    EXPECT_NEAR(floored.backward_ms, 2 * floor_ms, 1e-9);
    prenet::GpuSpec host = slow_memory;
    host.bus = "host";
    EXPECT_NEAR(prenet::estimate_layer_times(bundle, {conv(48)}, host, "sgd")[0].forward_ms, gemm_ms, 1e-12);
    const auto dense = prenet::estimate_layer_times(bundle, {conv(1)}, gpu_, "sgd")[0];
    EXPECT_NEAR(dense.forward_ms, 5.0, 1e-9);
    EXPECT_EQ(dense.forward_basis, prenet::TimeBasis::predicted);
    manifest("[1, 64]");
    bundle = prenet::PredictorBundle::load(folder_.string());
    EXPECT_NEAR(prenet::estimate_layer_times(bundle, {conv(48)}, gpu_, "sgd")[0].forward_ms, 5.0, 1e-9);
}

TEST_F(EstimatorTest, TwoBytePrecisionsUseTheMatrixRateAndHalveTheTraffic) {
    using prenet::Precision;
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const prenet::GpuSpec hopper = gpu_with(&prenet::GpuSpec::bf16_tflops, 160);  // 16x the fp32 rate
    const auto linear = token_linear();
    const auto relu = find_layer_kind("relu").configure({{"batch", 1}, {"features", 1000001}});
    // Matrix kind: roofline at 160 TFLOPS with 2-byte operands over the fp32 roofline.
    const auto narrow_cost = linear.kind().cost(linear, 2), wide_cost = linear.kind().cost(linear, 4);
    const double expected =
        std::max(1e3 * narrow_cost.forward_flops / 160e12, 1e3 * narrow_cost.forward_bytes / 100e9) /
        std::max(1e3 * wide_cost.forward_flops / 10e12, 1e3 * wide_cost.forward_bytes / 100e9);
    EXPECT_NEAR(prenet::tensor_core_factor(linear, hopper, Precision::bf16), expected, 1e-12);
    // Memory-bound kind: the configuration moving the same bytes in fp32 (batch 1, so the features halve).
    const auto half = prenet::narrowed(relu, Precision::bf16);
    EXPECT_EQ(half["batch"], 1);
    EXPECT_EQ(half["features"], 500001);
    EXPECT_EQ(prenet::narrowed(relu, Precision::fp32)["features"], 1000001);
    EXPECT_EQ(prenet::narrowed(linear, Precision::bf16)["batch"], 64);  // a matrix kind keeps its shape
    const auto fp32 = prenet::estimate_layer_times(bundle, {linear, relu}, hopper, "adam");
    const auto bf16 = prenet::estimate_layer_times(bundle, {linear, relu}, hopper, "adam", Precision::bf16);
    EXPECT_NEAR(bf16[0].forward_ms, fp32[0].forward_ms * expected, 1e-9 * fp32[0].forward_ms);
    EXPECT_LT(bf16[1].forward_ms, fp32[1].forward_ms);
    EXPECT_DOUBLE_EQ(bf16[0].optimizer_ms, fp32[0].optimizer_ms);  // fp32 master weights and state
    // No bf16 rate in the catalog: the GPU does not support it, and the error says what to use instead.
    const prenet::GpuSpec volta = gpu_with(&prenet::GpuSpec::fp16_tflops, 120);
    try {
        prenet::estimate_layer_times(bundle, {linear}, volta, "sgd", Precision::bf16);
        FAIL() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("no bf16 rate"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("use fp16 or fp32"), std::string::npos) << e.what();
    }
    EXPECT_THROW(prenet::parse_precision("fp8"), std::invalid_argument);
    EXPECT_EQ(prenet::parse_precision("fp16"), Precision::fp16);
}

TEST_F(EstimatorTest, Tf32MovesMatmulsToTheTf32RateOnFourByteTensors) {
    using prenet::Precision;
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const prenet::GpuSpec ampere = gpu_with(&prenet::GpuSpec::tf32_tflops, 80);  // 8x the fp32 rate
    const auto linear = token_linear();
    const auto conv = find_layer_kind("conv2d").configure({{"batch", 32}, {"in_channels", 256}, {"out_channels", 256},
                                                           {"kernel_size", 3}, {"padding", 1}, {"height", 28},
                                                           {"width", 28}});
    // Matrix kind: roofline at 80 TFLOPS over the fp32 roofline, the same 4-byte operands.
    const auto cost = linear.kind().cost(linear, 4);
    const double memory = 1e3 * cost.forward_bytes / 100e9;
    const double expected = std::max(1e3 * cost.forward_flops / 80e12, memory) /
                            std::max(1e3 * cost.forward_flops / 10e12, memory);
    ASSERT_LT(expected, 1.0);
    EXPECT_NEAR(prenet::tensor_core_factor(linear, ampere, Precision::tf32), expected, 1e-12);
    EXPECT_DOUBLE_EQ(prenet::matrix_tflops(linear.kind(), ampere, Precision::tf32), 80);
    EXPECT_EQ(prenet::narrowed(linear, Precision::tf32).values(), linear.values());
    const auto fp32 = prenet::estimate_layer_times(bundle, {linear, conv}, ampere, "sgd");
    const auto tf32 = prenet::estimate_layer_times(bundle, {linear, conv}, ampere, "sgd", Precision::tf32);
    EXPECT_NEAR(tf32[0].forward_ms, fp32[0].forward_ms * expected, 1e-9 * fp32[0].forward_ms);
    EXPECT_LT(tf32[0].backward_ms, fp32[0].backward_ms);  // dX and dW are matmuls too
    EXPECT_DOUBLE_EQ(tf32[0].optimizer_ms, fp32[0].optimizer_ms);
    // Convolutions are on TF32 already by PyTorch's default: unchanged.
    EXPECT_DOUBLE_EQ(tf32[1].forward_ms, fp32[1].forward_ms);
    EXPECT_DOUBLE_EQ(tf32[1].backward_ms, fp32[1].backward_ms);
    // A GPU without a TF32 rate runs tf32 as fp32 (the flag changes nothing there).
    const auto volta_fp32 = prenet::estimate_layer_times(bundle, {linear}, gpu_, "sgd");
    const auto volta_tf32 = prenet::estimate_layer_times(bundle, {linear}, gpu_, "sgd", Precision::tf32);
    EXPECT_DOUBLE_EQ(volta_tf32[0].forward_ms, volta_fp32[0].forward_ms);
    EXPECT_DOUBLE_EQ(volta_tf32[0].backward_ms, volta_fp32[0].backward_ms);
    EXPECT_EQ(prenet::parse_precision("tf32"), Precision::tf32);
    EXPECT_STREQ(prenet::to_string(Precision::tf32), "tf32");
}

TEST_F(EstimatorTest, MaxPoolingsIndicesKeepTheirWidthUnderATwoBytePrecision) {
    using prenet::Precision;
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const prenet::GpuSpec gpu = gpu_with(&prenet::GpuSpec::bf16_tflops, 160);
    const auto pool = find_layer_kind("maxpool2d").configure({{"batch", 8}, {"channels", 64}, {"height", 112},
                                                             {"width", 112}, {"kernel_size", 3}, {"stride", 2},
                                                             {"padding", 1}});
    const auto work = pool.kind().forward_kernels(pool);
    ASSERT_EQ(work.size(), 2u);
    EXPECT_FALSE(work[0].full_width);
    EXPECT_TRUE(work[1].full_width);  // the int64 indices
    // No predictor for the streaming kernels here: each takes its roofline, so time follows bytes.
    const double input = 8.0 * 64 * 112 * 112, output = 8.0 * 64 * 56 * 56;
    const auto fp32 = prenet::estimate_layer_times(bundle, {pool}, gpu, "sgd")[0];
    const auto bf16 = prenet::estimate_layer_times(bundle, {pool}, gpu, "sgd", Precision::bf16)[0];
    EXPECT_NEAR(bf16.forward_ms / fp32.forward_ms,
                (2 * (input + output) + 8 * output) / (4 * (input + output) + 8 * output), 1e-4);
    EXPECT_NEAR(bf16.backward_ms / fp32.backward_ms,
                (2 * (2 * input + output) + 8 * output) / (4 * (2 * input + output) + 8 * output), 1e-4);
}

TEST_F(EstimatorTest, AKindFittedOverItsKernelsCompositionScalesWhatItsKernelsWouldTake) {
    const auto attention = find_layer_kind("multihead_attention").configure(
        {{"batch", 2}, {"seq_len", 16}, {"embed_dim", 32}, {"num_heads", 4}, {"bias", 0}});
    const auto add = find_layer_kind("add").configure({{"batch", 4}, {"features", 1000}});
    const auto composed = prenet::estimate_layer_times(prenet::PredictorBundle::load(folder_.string()),
                                                       {attention, add}, gpu_, "adam");
    // Attention's forward at twice its kernels' composition, its whole step at 3 times its step's; the linear
    // layers' forward predictor (1 ns per FLOP) stays and is composed of.
    std::ofstream(folder_ / "manifest.json")
        << R"({"format": "prenet-predictors", "version": 1, "predictors": [{"kind": "linear", "mode": "forward",
           "family": "linear", "file": "m.json", "features": ["batch"], "target": "log_ms_over:forward_flops"},
           {"kind": "multihead_attention", "mode": "forward", "family": "linear", "file": "a.json",
           "features": ["batch"], "target": "log_ms_over:kernels", "target_range": [-1, 1]},
           {"kind": "multihead_attention", "mode": "train", "family": "linear", "file": "t.json",
           "features": ["batch"], "target": "log_ms_over:kernels"}]})";
    std::ofstream(folder_ / "a.json") << std::setprecision(17)
                                      << R"({"mean": [0], "scale": [1], "layers": [{"weight": [[0]], "bias": [)"
                                      << std::log(2.0) << "]}]}";
    std::ofstream(folder_ / "t.json") << std::setprecision(17)
                                      << R"({"mean": [0], "scale": [1], "layers": [{"weight": [[0]], "bias": [)"
                                      << std::log(3.0) << "]}]}";
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto times = prenet::estimate_layer_times(bundle, {attention, add}, gpu_, "adam");
    EXPECT_NEAR(times[0].forward_ms, 2 * composed[0].forward_ms, 1e-12 * composed[0].forward_ms);
    EXPECT_EQ(times[0].forward_basis, prenet::TimeBasis::predicted);
    EXPECT_NEAR(times[0].step_forward_ms, times[0].forward_ms, 1e-15);  // no train_forward predictor
    EXPECT_DOUBLE_EQ(times[0].backward_ms, composed[0].backward_ms);    // no backward predictor: as before
    EXPECT_DOUBLE_EQ(times[1].forward_ms, composed[1].forward_ms);
    // The step's predictor alone: 3 times the composed forward, backward and (none: no parameters) update.
    const auto step = prenet::predict_mode_ms(bundle, "train", {attention}, gpu_, "adam");
    EXPECT_NEAR(step[0], 3 * (composed[0].forward_ms + composed[0].backward_ms + composed[0].optimizer_ms),
                1e-12 * step[0]);
    EXPECT_NEAR(prenet::predict_mode_ms(bundle, "forward", {attention}, gpu_, "adam")[0], times[0].forward_ms,
                1e-12 * times[0].forward_ms);
    EXPECT_NEAR(bundle.predict_ratio("multihead_attention", "forward", {attention}, gpu_, "adam")[0], 2.0, 1e-12);
    try {  // time over a composition is not a time by itself
        bundle.predict_ms("multihead_attention", "forward", {attention}, gpu_, "adam");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("over its kernels' composition"), std::string::npos);
    }
    // A predictor of a kind without one over its kernels is predicted as before.
    EXPECT_DOUBLE_EQ(prenet::predict_mode_ms(bundle, "forward", {token_linear()}, gpu_, "sgd")[0],
                     bundle.predict_ms("linear", "forward", {token_linear()}, gpu_, "sgd")[0]);
}

}  // namespace
