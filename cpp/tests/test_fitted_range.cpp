// Rows placed within a bundle's fitted ranges: the split, its exactness, and every case left alone.
#include <gtest/gtest.h>

#include "prenet/fitted_range.hpp"

namespace {

prenet::LayerConfig layer_norm(std::int64_t batch, std::int64_t seq_len) {
    return prenet::find_layer_kind("layer_norm")
        .configure({{"batch", batch}, {"seq_len", seq_len}, {"normalized_shape", 512}});
}

// The CPU set's ranges: up to 509 samples of up to 511 rows.
const prenet::ParameterRanges kCpuRanges = {
    {"batch", {1, 509}}, {"seq_len", {1, 511}}, {"normalized_shape", {1, 8192}}};

TEST(WithinFittedRows, RowsOfOneSampleBeyondTheRangeBecomeEqualFactors) {
    const auto placed = prenet::within_fitted_rows(layer_norm(4096, 1), kCpuRanges);
    EXPECT_EQ(placed["batch"], 64);
    EXPECT_EQ(placed["seq_len"], 64);
    EXPECT_EQ(placed["normalized_shape"], 512);  // the other parameters are kept
}

TEST(WithinFittedRows, TheProductIsKeptExactlyWhereADivisorLiesNear) {
    const auto placed = prenet::within_fitted_rows(layer_norm(1, 6000), kCpuRanges);  // sqrt 77.5; 75 * 80
    EXPECT_EQ(placed["batch"] * placed["seq_len"], 6000);
    EXPECT_LE(placed["seq_len"], 511);
    // A prime has no divisor in range: the nearest split, off by less than one row per sample.
    const auto prime = prenet::within_fitted_rows(layer_norm(4099, 1), kCpuRanges);
    EXPECT_NEAR(static_cast<double>(prime["batch"] * prime["seq_len"]), 4099.0, prime["batch"]);
}

TEST(WithinFittedRows, ASplitStaysWithinARangeThatForcesIt) {
    // One sample per row as in the GPU set's linear layers (batch always 1): rows go to seq_len.
    const prenet::ParameterRanges gpu = {{"batch", {1, 1}}, {"seq_len", {3, 8192}}};
    const auto& linear = prenet::find_layer_kind("linear");
    const auto placed = prenet::within_fitted_rows(
        linear.configure({{"batch", 16}, {"seq_len", 256}, {"in_features", 8}, {"out_features", 8}}), gpu);
    EXPECT_EQ(placed["batch"], 1);
    EXPECT_EQ(placed["seq_len"], 4096);
}

TEST(WithinFittedRows, ConfigurationsWithinOrBeyondEverySplitAreLeftAlone) {
    EXPECT_EQ(prenet::within_fitted_rows(layer_norm(300, 1), kCpuRanges).values(), layer_norm(300, 1).values());
    // 509 * 511 rows at most fit the ranges: more stay as given (the predictor extrapolates).
    EXPECT_EQ(prenet::within_fitted_rows(layer_norm(1 << 20, 1), kCpuRanges).values(),
              layer_norm(1 << 20, 1).values());
    // Ranges that do not name both row parameters, or a kind without row parameters.
    EXPECT_EQ(prenet::within_fitted_rows(layer_norm(4096, 1), {{"batch", {1, 509}}}).values(),
              layer_norm(4096, 1).values());
    const auto conv = prenet::find_layer_kind("conv2d").configure(
        {{"batch", 4096}, {"in_channels", 3}, {"out_channels", 8}, {"kernel_size", 3}, {"height", 8}, {"width", 8}});
    EXPECT_EQ(prenet::within_fitted_rows(conv, kCpuRanges).values(), conv.values());
    // Ranges that hold no rows at all.
    EXPECT_EQ(prenet::within_fitted_rows(layer_norm(4096, 1), {{"batch", {0, 0}}, {"seq_len", {1, 8}}}).values(),
              layer_norm(4096, 1).values());
}

TEST(WithinFittedRows, AnElementwiseOperatorsElementsAreSplitAndASoftmaxsRowsKeepTheirLength) {
    // The trace gives an activation its elements as one row; the CPU set's ReLUs hold up to 3,951 rows of 15,546.
    const prenet::ParameterRanges relu_ranges = {{"batch", {1, 3951}}, {"seq_len", {1, 1}}, {"features", {1, 15546}}};
    const auto one_row = [](const char* kind) {
        return prenet::find_layer_kind(kind).configure({{"batch", 1}, {"features", 1 << 21}});
    };
    for (const char* kind : {"relu", "gelu", "tanh", "sigmoid", "silu", "add"}) {
        const auto placed = prenet::within_fitted_rows(one_row(kind), relu_ranges);
        // sqrt(2^21) = 1448.2, no divisor within 64 of it: 1448 x 1448, short by less than one row
        EXPECT_EQ(placed["batch"], 1448) << kind;
        EXPECT_NEAR(static_cast<double>(placed["batch"] * placed["features"]), 1 << 21, placed["batch"]) << kind;
    }
    EXPECT_EQ(prenet::within_fitted_rows(one_row("softmax"), relu_ranges).values(), one_row("softmax").values());
}

}  // namespace
