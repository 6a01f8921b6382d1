// Every formula against hand-computed cases (numbers worked out in the comments).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "prenet/features.hpp"

namespace {

using prenet::find_layer_kind;
using prenet::LayerCost;

LayerCost cost_of(const std::string& kind, const std::map<std::string, std::int64_t>& config) {
    const auto& k = find_layer_kind(kind);
    return k.cost(k.configure(config), prenet::kFp32Bytes);
}

prenet::GpuSpec test_gpu() {
    prenet::GpuSpec gpu;
    gpu.name = "Test GPU";
    gpu.fp32_tflops = 10.0;           // 1e13 FLOP/s
    gpu.memory_bandwidth_gbs = 100.0; // 1e11 B/s
    gpu.sm_count = 10;
    gpu.cuda_cores = 1280;
    gpu.boost_clock_mhz = 1500;
    gpu.memory_gb = 16;
    gpu.l2_cache_mb = 4;
    return gpu;
}

double feature(const prenet::FeatureVector& f, const std::string& name) {
    for (const auto& [n, v] : f) {
        if (n == name) return v;
    }
    ADD_FAILURE() << "no feature " << name;
    return 0;
}

TEST(Linear, HandComputedWithBias) {
    // rows 2, in 3, out 4: CO = 2*3*4 = 24; forward 2*24 + 2*4 = 56; backward 4*24 + 8 = 104.
    const auto c = cost_of("linear", {{"batch", 2}, {"in_features", 3}, {"out_features", 4}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 24);
    EXPECT_DOUBLE_EQ(c.memory_weights, 12);
    EXPECT_DOUBLE_EQ(c.memory_input, 6);
    EXPECT_DOUBLE_EQ(c.memory_output, 8);
    EXPECT_DOUBLE_EQ(c.parameters, 16);
    EXPECT_DOUBLE_EQ(c.forward_flops, 56);
    EXPECT_DOUBLE_EQ(c.backward_flops, 104);
    EXPECT_DOUBLE_EQ(c.forward_bytes, 4 * (6 + 12 + 4 + 8));
    EXPECT_DOUBLE_EQ(c.backward_bytes, 4 * ((8 + 12 + 6) + (8 + 6 + 12) + (8 + 4)));
}

TEST(Linear, BatchOneNoBiasAndSequenceRows) {
    const auto one = cost_of("linear", {{"batch", 1}, {"in_features", 1}, {"out_features", 1}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(one.forward_flops, 2);
    EXPECT_DOUBLE_EQ(one.backward_flops, 4);
    EXPECT_DOUBLE_EQ(one.parameters, 1);
    // seq_len multiplies the rows: batch 2 x seq 5 = 10 rows of 8 -> 16.
    const auto seq = cost_of("linear", {{"batch", 2}, {"seq_len", 5}, {"in_features", 8}, {"out_features", 16}});
    EXPECT_DOUBLE_EQ(seq.paper_operations, 10.0 * 8 * 16);
    EXPECT_DOUBLE_EQ(seq.memory_input, 80);
}

TEST(Conv2d, ThreeByThreeSamePadding) {
    // b1, 2 -> 3 channels, 4x4, k3, s1, p1: out 4x4; CO = 1*4*4*9*2*3 = 864 = MACs.
    const auto c = cost_of("conv2d", {{"batch", 1}, {"in_channels", 2}, {"out_channels", 3}, {"kernel_size", 3},
                                      {"padding", 1}, {"height", 4}, {"width", 4}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 864);
    EXPECT_DOUBLE_EQ(c.forward_flops, 2 * 864 + 48);
    EXPECT_DOUBLE_EQ(c.backward_flops, 4 * 864 + 48);
    EXPECT_DOUBLE_EQ(c.parameters, 54 + 3);
    EXPECT_DOUBLE_EQ(c.memory_weights, 54);
    EXPECT_DOUBLE_EQ(c.memory_input, 32);
    EXPECT_DOUBLE_EQ(c.memory_output, 48);
    EXPECT_DOUBLE_EQ(c.forward_bytes, 4 * (32 + 54 + 3 + 48));
    EXPECT_DOUBLE_EQ(c.backward_bytes, 4 * ((48 + 54 + 32) + (48 + 32 + 54) + (48 + 3)));
}

TEST(Conv2d, OutputSizesForStrideAndOneByOne) {
    const auto& kind = find_layer_kind("conv2d");
    // 1x1, stride 2, no padding on 5x5: (5 - 1) / 2 + 1 = 3.
    auto cfg = kind.configure({{"batch", 1}, {"in_channels", 1}, {"out_channels", 1}, {"kernel_size", 1},
                               {"stride", 2}, {"height", 5}, {"width", 5}});
    EXPECT_EQ(kind.derived_values(cfg), (std::vector<double>{3, 3}));
    // 3x3, stride 2, padding 1 on 7x6: (7 + 2 - 3) / 2 + 1 = 4 and (6 + 2 - 3) / 2 + 1 = 3.
    cfg = kind.configure({{"batch", 1}, {"in_channels", 1}, {"out_channels", 1}, {"kernel_size", 3}, {"stride", 2},
                          {"padding", 1}, {"height", 7}, {"width", 6}});
    EXPECT_EQ(kind.derived_values(cfg), (std::vector<double>{4, 3}));
    // ResNet-50's 1x1 64 -> 256 at 56x56, batch 32: CO = 32 * 56 * 56 * 64 * 256.
    const auto c = cost_of("conv2d", {{"batch", 32}, {"in_channels", 64}, {"out_channels", 256}, {"kernel_size", 1},
                                      {"height", 56}, {"width", 56}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 32.0 * 56 * 56 * 64 * 256);
    EXPECT_DOUBLE_EQ(c.forward_flops, 2 * c.paper_operations);
}

TEST(Conv2d, DepthwiseGroupsAndKernelFillingThePaddedInput) {
    // 8 channels, 8 groups, k3 p1 on 4x4: 8 * 16 outputs, 9 MACs each.
    const auto c = cost_of("conv2d", {{"batch", 1}, {"in_channels", 8}, {"out_channels", 8}, {"kernel_size", 3},
                                      {"padding", 1}, {"height", 4}, {"width", 4}, {"groups", 8}, {"bias", 0}});
    EXPECT_DOUBLE_EQ(c.forward_flops, 2.0 * 8 * 16 * 9);
    EXPECT_DOUBLE_EQ(c.parameters, 8 * 9);
    // k5 on a 3x3 input padded by 1 fits exactly: one output.
    const auto& kind = find_layer_kind("conv2d");
    auto cfg = kind.configure({{"batch", 1}, {"in_channels", 1}, {"out_channels", 1}, {"kernel_size", 5},
                               {"padding", 1}, {"height", 3}, {"width", 3}});
    EXPECT_EQ(kind.derived_values(cfg), (std::vector<double>{1, 1}));
}

TEST(Recurrent, LstmSingleLayer) {
    // b2, L3, D4, H5: 6 steps, 20 gate rows. GEMMs 2*6*20*(4+5) = 2160; pointwise 6*5*13 + 2*6*20 = 630.
    const auto c = cost_of("lstm", {{"batch", 2}, {"seq_len", 3}, {"input_size", 4}, {"hidden_size", 5}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 4.0 * 6 * 5 * 9);  // eq. 5
    EXPECT_DOUBLE_EQ(c.parameters, 20 * 4 + 20 * 5 + 40);
    EXPECT_DOUBLE_EQ(c.forward_flops, 2160 + 630);
    EXPECT_DOUBLE_EQ(c.backward_flops, 2 * 2160 + 2 * 6 * 5 * 13 + 2 * 6 * 20);
    EXPECT_DOUBLE_EQ(c.memory_input, 24);
    EXPECT_DOUBLE_EQ(c.memory_output, 30);
    // Forward bytes: input 24, weights 220, outputs 30, gates kept 120.
    EXPECT_DOUBLE_EQ(c.forward_bytes, 4 * (24 + 220 + 30 + 120));
}

TEST(Recurrent, GruStackedBidirectional) {
    // b1 L1 D2 H3, 2 layers, 2 directions. Layer 0 input 2, layer 1 input 2*3 = 6.
    const auto c = cost_of("gru", {{"batch", 1}, {"seq_len", 1}, {"input_size", 2}, {"hidden_size", 3},
                                   {"num_layers", 2}, {"bidirectional", 1}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 2 * 3 * 3 * (3 + 2) + 2 * 3 * 3 * (3 + 6));  // eq. 6 per layer and direction
    EXPECT_DOUBLE_EQ(c.parameters, 2 * (9 * 2 + 9 * 3 + 18) + 2 * (9 * 6 + 9 * 3 + 18));  // = 324, as torch counts
    EXPECT_DOUBLE_EQ(c.memory_output, 6);
}

TEST(Recurrent, RnnSequenceOne) {
    const auto c = cost_of("rnn", {{"batch", 1}, {"seq_len", 1}, {"input_size", 1}, {"hidden_size", 1}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 2 * 1 * 1 * 1 * 2);  // eq. 4
    EXPECT_DOUBLE_EQ(c.forward_flops, 2 * 1 * 2 + 2 + 2);      // GEMMs 4, tanh and gate sum 2, biases 2
    EXPECT_DOUBLE_EQ(c.parameters, 4);
}

TEST(MultiheadAttention, HandComputed) {
    // b2 L3 E4 H2: tokens 6, 36 score elements, projection GEMM 192, score GEMM 144.
    const auto c = cost_of("multihead_attention", {{"batch", 2}, {"seq_len", 3}, {"embed_dim", 4}, {"num_heads", 2}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 2 * 9 * 2);  // eq. 7: h * s^2 * d
    EXPECT_DOUBLE_EQ(c.parameters, 80);              // torch: in_proj 48 + 12, out_proj 16 + 4
    EXPECT_DOUBLE_EQ(c.forward_flops, 4 * 192 + 4 * 24 + 24 + 2 * 144 + 5 * 36);
    EXPECT_DOUBLE_EQ(c.backward_flops, 8 * 192 + 4 * 24 + 24 + 4 * 144 + 4 * 36);
    EXPECT_DOUBLE_EQ(c.memory_input, 24);
    EXPECT_DOUBLE_EQ(c.memory_output, 24);
}

TEST(Embedding, HandComputed) {
    const auto c = cost_of("embedding", {{"batch", 2}, {"seq_len", 3}, {"num_embeddings", 10}, {"embedding_dim", 4}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 24);  // eq. 8: B * S * D
    EXPECT_DOUBLE_EQ(c.forward_flops, 0);
    EXPECT_DOUBLE_EQ(c.backward_flops, 24);
    EXPECT_DOUBLE_EQ(c.parameters, 40);
    EXPECT_DOUBLE_EQ(c.forward_bytes, 8 * 6 + 4 * 2 * 24);
    EXPECT_DOUBLE_EQ(c.backward_bytes, 8 * 6 + 4 * (40 + 24 + 48));
}

TEST(LayerNorm, HandComputed) {
    // 6 rows of 4: forward 8 per element + 2 per row = 204; backward 13 per element = 312.
    const auto c = cost_of("layer_norm", {{"batch", 2}, {"seq_len", 3}, {"normalized_shape", 4}});
    EXPECT_DOUBLE_EQ(c.forward_flops, 204);
    EXPECT_DOUBLE_EQ(c.backward_flops, 312);
    EXPECT_DOUBLE_EQ(c.parameters, 8);
    EXPECT_DOUBLE_EQ(c.forward_bytes, 4 * (48 + 8 + 12));
    EXPECT_DOUBLE_EQ(c.backward_bytes, 4 * ((72 + 4 + 12) + (48 + 12 + 8)));
    const auto plain = cost_of("layer_norm", {{"batch", 1}, {"normalized_shape", 4}, {"elementwise_affine", 0}});
    EXPECT_DOUBLE_EQ(plain.forward_flops, 6 * 4 + 2);
    EXPECT_DOUBLE_EQ(plain.backward_flops, 9 * 4);
    EXPECT_DOUBLE_EQ(plain.parameters, 0);
}

TEST(Bmm, HandComputed) {
    const auto c = cost_of("bmm", {{"batch", 2}, {"m", 3}, {"k", 4}, {"n", 5}});
    EXPECT_DOUBLE_EQ(c.paper_operations, 120);
    EXPECT_DOUBLE_EQ(c.forward_flops, 240);
    EXPECT_DOUBLE_EQ(c.backward_flops, 480);
    EXPECT_DOUBLE_EQ(c.parameters, 0);
    EXPECT_DOUBLE_EQ(c.forward_bytes, 4 * (24 + 40 + 30));
    EXPECT_DOUBLE_EQ(c.backward_bytes, 4 * 2 * (24 + 40 + 30));
}

TEST(Pointwise, ActivationsSoftmaxAndAdd) {
    // 2 x 3 = 6 elements.
    const auto gelu = cost_of("gelu", {{"batch", 2}, {"features", 3}});
    EXPECT_DOUBLE_EQ(gelu.forward_flops, 5 * 6);
    EXPECT_DOUBLE_EQ(gelu.backward_flops, 11 * 6);
    EXPECT_DOUBLE_EQ(gelu.forward_bytes, 4 * 2 * 6);
    EXPECT_DOUBLE_EQ(gelu.backward_bytes, 4 * 3 * 6);
    const auto relu = cost_of("relu", {{"batch", 1}, {"seq_len", 4}, {"features", 5}});
    EXPECT_DOUBLE_EQ(relu.forward_flops, 20);
    const auto softmax = cost_of("softmax", {{"batch", 2}, {"features", 3}});
    EXPECT_DOUBLE_EQ(softmax.forward_flops, 30);
    EXPECT_DOUBLE_EQ(softmax.backward_flops, 24);
    const auto add = cost_of("add", {{"batch", 2}, {"features", 3}});
    EXPECT_DOUBLE_EQ(add.forward_flops, 6);
    EXPECT_DOUBLE_EQ(add.backward_flops, 0);
    EXPECT_DOUBLE_EQ(add.forward_bytes, 4 * 3 * 6);
    EXPECT_DOUBLE_EQ(add.backward_bytes, 0);
    EXPECT_DOUBLE_EQ(add.memory_input, 12);
}

TEST(BatchNorm2d, HandComputed) {
    // 2 x 3 x 4 x 4 = 96 elements, 3 channels.
    const auto c = cost_of("batchnorm2d", {{"batch", 2}, {"channels", 3}, {"height", 4}, {"width", 4}});
    EXPECT_DOUBLE_EQ(c.forward_flops, 8 * 96 + 8 * 3);
    EXPECT_DOUBLE_EQ(c.backward_flops, 13 * 96);
    EXPECT_DOUBLE_EQ(c.parameters, 6);
    EXPECT_DOUBLE_EQ(c.forward_bytes, 4 * (3 * 96 + 6 * 3));
    EXPECT_DOUBLE_EQ(c.backward_bytes, 4 * (5 * 96 + 4 * 3));
}

TEST(Pool2d, MaxAndAverage) {
    // 1 x 2 x 4 x 4, window 2, stride 2: 8 outputs of 4 window elements each.
    const std::map<std::string, std::int64_t> config = {{"batch", 1}, {"channels", 2}, {"height", 4}, {"width", 4},
                                                        {"kernel_size", 2}, {"stride", 2}};
    const auto max = cost_of("maxpool2d", config);
    EXPECT_DOUBLE_EQ(max.forward_flops, 32);
    EXPECT_DOUBLE_EQ(max.backward_flops, 8);
    EXPECT_DOUBLE_EQ(max.forward_bytes, 4 * (32 + 8) + 8 * 8);
    EXPECT_DOUBLE_EQ(max.backward_bytes, 4 * (64 + 8) + 8 * 8);
    const auto avg = cost_of("avgpool2d", config);
    EXPECT_DOUBLE_EQ(avg.forward_flops, 8 * 5);
    EXPECT_DOUBLE_EQ(avg.backward_flops, 8 * 5);
    EXPECT_DOUBLE_EQ(avg.forward_bytes, 4 * (32 + 8));
    // ResNet's stem pool: k3, s2, p1 on 7x7 gives 4x4.
    const auto& kind = find_layer_kind("maxpool2d");
    auto cfg = kind.configure({{"batch", 1}, {"channels", 1}, {"height", 7}, {"width", 7}, {"kernel_size", 3},
                               {"stride", 2}, {"padding", 1}});
    EXPECT_EQ(kind.derived_values(cfg), (std::vector<double>{4, 4}));
    EXPECT_THROW(kind.configure({{"batch", 1}, {"channels", 1}, {"height", 7}, {"width", 7}, {"kernel_size", 3},
                                 {"stride", 2}, {"padding", 2}}), std::invalid_argument);
}

TEST(Features, ComputationalTimeAndRoofline) {
    const auto& kind = find_layer_kind("linear");
    const auto f = prenet::layer_features(kind.configure({{"batch", 2}, {"in_features", 3}, {"out_features", 4}}),
                                          test_gpu());
    EXPECT_DOUBLE_EQ(feature(f, "co"), 24);
    EXPECT_DOUBLE_EQ(feature(f, "ct_ms"), 1e3 * 24 / 1e13);  // eq. 9 at 10 TFLOP/s
    // Forward: 56 FLOPs take 5.6e-12 s, 120 bytes take 1.2e-9 s: memory bound.
    EXPECT_DOUBLE_EQ(feature(f, "forward_roofline_ms"), 1e3 * 120 / 1e11);
    EXPECT_DOUBLE_EQ(feature(f, "train_roofline_ms"), 1e3 * (120 + 256) / 1e11);
    // the bounds learned targets are taken over: each roofline bound plus a kernel's startup
    EXPECT_DOUBLE_EQ(feature(f, "forward_kernel_bound_ms"), 1e3 * 120 / 1e11 + prenet::kKernelStartupMs);
    EXPECT_DOUBLE_EQ(feature(f, "train_kernel_bound_ms"), 1e3 * (120 + 256) / 1e11 + prenet::kKernelStartupMs);
    EXPECT_DOUBLE_EQ(feature(f, "backward_kernel_bound_ms"), 1e3 * 256 / 1e11 + prenet::kKernelStartupMs);
    EXPECT_DOUBLE_EQ(feature(f, "gpu_fp32_tflops"), 10);
    EXPECT_DOUBLE_EQ(feature(f, "batch"), 2);
    EXPECT_DOUBLE_EQ(feature(f, "seq_len"), 1);
}

TEST(Features, ComputeBoundRoofline) {
    // 1024^3 GEMM: 2.1e9 FLOPs take 0.21 ms at 10 TFLOP/s; 12.6 MB take 0.126 ms at 100 GB/s.
    const auto& kind = find_layer_kind("linear");
    const auto f = prenet::layer_features(
        kind.configure({{"batch", 1024}, {"in_features", 1024}, {"out_features", 1024}, {"bias", 0}}), test_gpu());
    EXPECT_DOUBLE_EQ(feature(f, "forward_roofline_ms"), 1e3 * 2.0 * 1024 * 1024 * 1024 / 1e13);
}

TEST(Features, LinearTilesInCublasOrientation) {
    // y = x W^T over 32 x 4 rows (n = 128), D_in 512 (k), D_out 1000 (m), on 10 SMs.
    const auto& kind = find_layer_kind("linear");
    const auto f = prenet::layer_features(
        kind.configure({{"batch", 32}, {"seq_len", 4}, {"in_features", 512}, {"out_features", 1000}}), test_gpu());
    EXPECT_DOUBLE_EQ(feature(f, "gemm_m"), 1000);
    EXPECT_DOUBLE_EQ(feature(f, "gemm_n"), 128);
    EXPECT_DOUBLE_EQ(feature(f, "gemm_k"), 512);
    // 128 x 128 tiles: ceil(1000 / 128) = 8 blocks by 1, 0.8 of a wave, 8 of its 10 slots working.
    EXPECT_DOUBLE_EQ(feature(f, "tiles_128x128_waves"), 0.8);
    EXPECT_DOUBLE_EQ(feature(f, "tiles_128x128_filled"), 0.8);
    // 32 x 32 tiles: 32 blocks by 4 = 128, 12.8 waves, the 13 waves' 130 slots 128 full.
    EXPECT_DOUBLE_EQ(feature(f, "tiles_32x32_waves"), 12.8);
    EXPECT_DOUBLE_EQ(feature(f, "tiles_32x32_filled"), 128.0 / 130.0);
    // 128 x 32 tiles: 8 by 4 = 32 blocks, 3.2 waves; 32 x 128: 32 by 1, the same count.
    EXPECT_DOUBLE_EQ(feature(f, "tiles_128x32_waves"), 3.2);
    EXPECT_DOUBLE_EQ(feature(f, "tiles_32x128_waves"), 3.2);
    EXPECT_DOUBLE_EQ(feature(f, "tiles_64x32_filled"), 64.0 / 70.0);  // 16 by 4 blocks in 7 waves
    // tile quantization: 1000 x 128 outputs in 8 by 1 tiles of 128 x 128, and in 32 by 1 of 32 x 128
    EXPECT_DOUBLE_EQ(feature(f, "tiles_128x128_useful"), 1000.0 / 1024.0);
    EXPECT_DOUBLE_EQ(feature(f, "tiles_32x128_useful"), 1000.0 / 1024.0);
    EXPECT_DOUBLE_EQ(feature(f, "tiles_64x64_useful"), 1000.0 / 1024.0);
    EXPECT_TRUE(prenet::gemm_feature_names(find_layer_kind("conv2d")).empty());
}

TEST(Features, SimdVectorsAndTailOfTheReducedAxis) {
    // LayerNorm over 300 features: 37 full vectors of 8 floats (296) and a tail of 4; 38 vectors in all.
    const auto f = prenet::layer_features(
        find_layer_kind("layer_norm").configure({{"batch", 2}, {"normalized_shape", 300}}), test_gpu());
    EXPECT_DOUBLE_EQ(feature(f, "simd_vectors"), 38);
    EXPECT_DOUBLE_EQ(feature(f, "simd_tail"), 4);
    // Softmax over 64 features: 8 full vectors, no tail.
    const auto g = prenet::layer_features(
        find_layer_kind("softmax").configure({{"batch", 2}, {"features", 64}}), test_gpu());
    EXPECT_DOUBLE_EQ(feature(g, "simd_vectors"), 8);
    EXPECT_DOUBLE_EQ(feature(g, "simd_tail"), 0);
    // Elementwise kinds treat their tensor as flat: no such features.
    EXPECT_TRUE(prenet::simd_feature_names(find_layer_kind("relu")).empty());
}

TEST(Features, NamesMatchValuesForEveryKind) {
    const std::map<std::string, std::map<std::string, std::int64_t>> samples = {
        {"linear", {{"batch", 1}, {"in_features", 1}, {"out_features", 1}}},
        {"conv2d",
         {{"batch", 1}, {"in_channels", 1}, {"out_channels", 1}, {"kernel_size", 1}, {"height", 1}, {"width", 1}}},
        {"convolution", {{"batch", 1}, {"in_channels", 1}, {"out_channels", 1}, {"in_positions", 1},
                         {"out_positions", 1}, {"kernel_positions", 1}}},
        {"rnn", {{"batch", 1}, {"seq_len", 1}, {"input_size", 1}, {"hidden_size", 1}}},
        {"lstm", {{"batch", 1}, {"seq_len", 1}, {"input_size", 1}, {"hidden_size", 1}}},
        {"gru", {{"batch", 1}, {"seq_len", 1}, {"input_size", 1}, {"hidden_size", 1}}},
        {"multihead_attention", {{"batch", 1}, {"seq_len", 1}, {"embed_dim", 1}, {"num_heads", 1}}},
        {"embedding", {{"batch", 1}, {"seq_len", 1}, {"num_embeddings", 1}, {"embedding_dim", 1}}},
        {"layer_norm", {{"batch", 1}, {"normalized_shape", 1}}},
        {"batchnorm2d", {{"batch", 1}, {"channels", 1}, {"height", 1}, {"width", 1}}},
        {"maxpool2d", {{"batch", 1}, {"channels", 1}, {"height", 1}, {"width", 1}, {"kernel_size", 1}, {"stride", 1}}},
        {"avgpool2d", {{"batch", 1}, {"channels", 1}, {"height", 1}, {"width", 1}, {"kernel_size", 1}, {"stride", 1}}},
        {"relu", {{"batch", 1}, {"features", 1}}},
        {"gelu", {{"batch", 1}, {"features", 1}}},
        {"tanh", {{"batch", 1}, {"features", 1}}},
        {"sigmoid", {{"batch", 1}, {"features", 1}}},
        {"silu", {{"batch", 1}, {"features", 1}}},
        {"softmax", {{"batch", 1}, {"features", 1}}},
        {"add", {{"batch", 1}, {"features", 1}}},
        {"bmm", {{"batch", 1}, {"m", 1}, {"k", 1}, {"n", 1}}},
    };
    ASSERT_EQ(samples.size(), prenet::layer_kinds().size());
    for (const auto& kind : prenet::layer_kinds()) {
        const auto f = prenet::layer_features(kind.configure(samples.at(kind.name)), test_gpu());
        const auto names = prenet::feature_names(kind);
        ASSERT_EQ(f.size(), names.size()) << kind.name;
        for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i].first, names[i]);
        for (const auto& [n, v] : f) EXPECT_GE(v, 0) << kind.name << "." << n;
    }
}

}  // namespace
