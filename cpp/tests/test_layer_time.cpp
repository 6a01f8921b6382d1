// Backward and composite kernels against the kinds' exact counts, and the estimator's rules on a small bundle.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <stdexcept>

#include "prenet/features.hpp"
#include "prenet/layer_time.hpp"
#include "prenet/optimizer.hpp"

namespace {

namespace fs = std::filesystem;
using prenet::find_layer_kind;
using prenet::KernelWork;

double forward_flops_of(const std::vector<KernelWork>& work) {
    double flops = 0;
    for (const auto& k : work) {
        const auto c = find_layer_kind(k.kind).configure(k.config);
        flops += k.count * c.kind().cost(c, 4).forward_flops;
    }
    return flops;
}

TEST(Kernels, BackwardKernelsOfProductsRepeatTheExactGradientFlops) {
    const auto linear = find_layer_kind("linear").configure(
        {{"batch", 8}, {"seq_len", 16}, {"in_features", 96}, {"out_features", 40}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(forward_flops_of(linear.kind().backward_kernels(linear)), linear.kind().cost(linear, 4).backward_flops);
    const auto bmm = find_layer_kind("bmm").configure({{"batch", 12}, {"m", 7}, {"k", 64}, {"n", 33}});
    EXPECT_DOUBLE_EQ(forward_flops_of(bmm.kind().backward_kernels(bmm)), bmm.kind().cost(bmm, 4).backward_flops);
    // Stride 1, odd kernel, "same" padding: the transposed convolution has the forward's shape and MACs.
    const auto conv = find_layer_kind("conv2d").configure({{"batch", 4}, {"in_channels", 24}, {"out_channels", 48},
                                                           {"kernel_size", 3}, {"padding", 1}, {"height", 14},
                                                           {"width", 14}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(forward_flops_of(conv.kind().backward_kernels(conv)), conv.kind().cost(conv, 4).backward_flops);
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
        folder_ = fs::path(::testing::TempDir()) / "estimator_bundle";
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
    fs::path folder_;
    prenet::GpuSpec gpu_;
};

TEST_F(EstimatorTest, PredictedForwardComposedBackwardAndRooflineOptimizer) {
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    const auto c = find_layer_kind("linear").configure({{"batch", 32}, {"in_features", 64}, {"out_features", 128}, {"bias", 0}});
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

TEST_F(EstimatorTest, CudnnConvolutionsRunOnTheTf32RooflineByDefault) {
    const auto bundle = prenet::PredictorBundle::load(folder_.string());
    // No conv2d predictor: forward and backward are roofline bounds, at the TF32 rate where the GPU has one.
    const auto big = find_layer_kind("conv2d").configure({{"batch", 32}, {"in_channels", 256}, {"out_channels", 256},
                                                          {"kernel_size", 3}, {"padding", 1}, {"height", 28},
                                                          {"width", 28}});
    const auto depthwise = find_layer_kind("conv2d").configure({{"batch", 32}, {"in_channels", 256},
                                                                {"out_channels", 256}, {"kernel_size", 3},
                                                                {"padding", 1}, {"height", 28}, {"width", 28},
                                                                {"groups", 256}});
    const auto fp32 = prenet::estimate_layer_times(bundle, {big, depthwise}, gpu_, "sgd", true);  // no TF32 rate
    prenet::GpuSpec ampere = gpu_;
    ampere.tf32_tflops = 80;  // 8x the fp32 rate
    const auto tf32 = prenet::estimate_layer_times(bundle, {big, depthwise}, ampere, "sgd", true);
    const auto strict = prenet::estimate_layer_times(bundle, {big, depthwise}, ampere, "sgd", false);

    const auto cost = big.kind().cost(big, 4);
    const double compute_fp32 = 1e3 * cost.forward_flops / 10e12, memory = 1e3 * cost.forward_bytes / 100e9;
    ASSERT_GT(compute_fp32, memory);  // compute-bound at fp32
    EXPECT_NEAR(prenet::tf32_convolution_factor(cost, ampere),
                std::max(compute_fp32 / 8, memory) / compute_fp32, 1e-12);
    EXPECT_EQ(prenet::tf32_convolution_factor(cost, gpu_), 1.0);
    EXPECT_DOUBLE_EQ(strict[0].forward_ms, fp32[0].forward_ms);
    EXPECT_NEAR(tf32[0].forward_ms, fp32[0].forward_ms * prenet::tf32_convolution_factor(cost, ampere), 1e-12);
    EXPECT_LT(tf32[0].backward_ms, fp32[0].backward_ms);  // its gradient convolutions too
    // A depthwise convolution is memory-bound at either rate: unchanged.
    EXPECT_DOUBLE_EQ(tf32[1].forward_ms, fp32[1].forward_ms);
}

}  // namespace
