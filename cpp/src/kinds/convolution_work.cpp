// What any convolution does, whatever its dimensions: its cost from its sizes, and the implicit GEMM cuDNN runs
// it as (NVIDIA, "Convolutional Layers User's Guide", convolution algorithms): rows are the batch's output
// positions, the inner dimension the taps each output reads (c_in / groups x kernel positions), columns c_out; on
// tensor cores on NHWC tensors, so that PyTorch's NCHW ones are transposed there and back (same guide, "Tensor
// Layouts in Memory").
#include "kinds.hpp"

namespace prenet::kinds {

LayerCost convolution_cost(const ConvolutionSizes& s, double bytes_per_element) {
    const double bias = s.bias ? 1.0 : 0.0;
    const double macs = s.weight_positions * s.weights;  // one multiply-add per weight per position it is applied at
    LayerCost cost;
    cost.paper_operations = s.weight_positions * s.taps * s.in_channels * s.out_channels;  // PreNeT eq. 3 (no groups)
    cost.memory_weights = s.taps * s.in_channels * s.out_channels;  // PreNeT eq. 10 with D_in = taps * c_in
    cost.memory_input = s.input;                                    // PreNeT eq. 11
    cost.memory_output = s.output;                                  // PreNeT eq. 12
    cost.parameters = s.weights + bias * s.out_channels;
    cost.parameter_tensors = 1 + bias;
    cost.forward_flops = 2 * macs + bias * s.output;
    // Input gradient (the convolution the other way) and weight gradient each repeat the forward's multiply-adds;
    // db sums dY.
    cost.backward_flops = 4 * macs + bias * s.output;
    cost.forward_bytes = bytes_per_element * (s.input + s.weights + bias * s.out_channels + s.output);
    // dX reads dY, W, writes dX; dW reads dY, X, writes dW; db reads dY, writes db.
    cost.backward_bytes = bytes_per_element * ((s.output + s.weights + s.input) + (s.output + s.input + s.weights) +
                                               bias * (s.output + s.out_channels));
    return cost;
}

KernelWork implicit_gemm(std::int64_t rows, std::int64_t inner, std::int64_t columns, std::int64_t bias) {
    return {"linear", {{"batch", 1}, {"seq_len", rows}, {"in_features", inner}, {"out_features", columns},
                       {"bias", bias}}};
}

// A read and a write of each element: 2/3 of an add's passes.
KernelWork layout_transposes(std::int64_t elements) {
    return streaming_add(static_cast<double>(elements), kUnaryElementPasses / kBinaryElementPasses);
}

// PyTorch's convolution backend choice (aten/src/ATen/native/Convolution.cpp, is_depthwise): one group per input
// channel, several, and a whole number of output channels each, not transposed; a 1-d convolution is made 2-d first.
bool runs_pytorch_depthwise_kernel(std::int64_t in_channels, std::int64_t out_channels, std::int64_t groups,
                                   bool transposed) {
    return !transposed && groups > 1 && groups == in_channels && out_channels % in_channels == 0;
}

// The cuDNN backend of the same file: output.add_(bias) after cuDNN's kernels, a read and a write of the output
// (2/3 of an add's passes); PyTorch's depthwise kernels add it within their own.
std::vector<KernelWork> cudnn_bias_add(std::int64_t bias, bool depthwise, std::int64_t planes,
                                       std::int64_t positions) {
    if (!bias || depthwise) return {};
    return {{"add", {{"batch", planes}, {"features", positions}}, kUnaryElementPasses / kBinaryElementPasses}};
}

}  // namespace prenet::kinds
