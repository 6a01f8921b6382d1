// Batch normalisation in training mode, torch.nn.BatchNorm2d on (batch, channels, height, width).
#include "kinds.hpp"

namespace prenet::kinds {

namespace {

// Per element, forward: mean 1, variance 3, normalise 2, affine 2 (as LayerNorm, cpp/src/kinds/layer_norm.cpp).
constexpr double kForwardPerElement = 8.0;
// Per element, backward: the LayerNorm count with affine (9 + 4), the statistics running over the batch.
constexpr double kBackwardPerElement = 13.0;
// Per channel: rstd (2) and the running mean and variance updates (2 x 3).
constexpr double kPerChannel = 8.0;
// Element passes. Forward: the statistics need a pass of their own: read X for the statistics, read X again
// and write Y. Backward: the reduction pass reads dY and X; the gradient pass reads both again and writes dX.
constexpr double kForwardPasses = 3.0;
constexpr double kBackwardPasses = 5.0;

LayerCost batchnorm2d_cost(const LayerConfig& c, double bytes_per_element) {
    const double channels = c["channels"];
    const double elements = static_cast<double>(c["batch"]) * channels * c["height"] * c["width"];
    LayerCost cost;
    cost.paper_operations = elements;  // no PreNeT equation: the elements normalised
    cost.parameters = 2 * channels;
    cost.parameter_tensors = 2;  // weight, bias
    cost.memory_weights = 2 * channels;  // PreNeT eq. 10
    cost.memory_input = elements;        // PreNeT eq. 11
    cost.memory_output = elements;       // PreNeT eq. 12
    cost.forward_flops = kForwardPerElement * elements + kPerChannel * channels;
    cost.backward_flops = kBackwardPerElement * elements;
    cost.forward_bytes = bytes_per_element * (kForwardPasses * elements + 6 * channels);
    cost.backward_bytes = bytes_per_element * (kBackwardPasses * elements + 4 * channels);
    return cost;
}

}  // namespace

LayerKind make_batchnorm2d() {
    LayerKind kind;
    kind.name = "batchnorm2d";
    kind.paper_name = "BatchNorm";
    kind.description =
        "Batch normalisation over (batch, height, width) per channel, training mode (torch.nn.BatchNorm2d)";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"channels", 1, kMaxSize, std::nullopt, "channels (num_features)"},
        {"height", 1, kMaxSize, std::nullopt, "input height"},
        {"width", 1, kMaxSize, std::nullopt, "input width"},
    };
    kind.cost = batchnorm2d_cost;
    // Without a predictor of its own: LayerNorm over each (sample, channel) plane, the same elements, scaled by
    // the element passes of each (the statistics pass rereads X).
    kind.forward_kernels = [](const LayerConfig& c) {
        return std::vector<KernelWork>{{"layer_norm", {{"batch", c["batch"]}, {"seq_len", c["channels"]},
                                                       {"normalized_shape", c["height"] * c["width"]},
                                                       {"elementwise_affine", 0}},
                                       kForwardPasses / kLayerNormForwardPasses}};
    };
    return kind;
}

}  // namespace prenet::kinds
