// Factories of the entries of the layer-kind table (cpp/src/layer_kind.cpp), one file per kind.
#pragma once

#include <cstdint>
#include <limits>

#include "prenet/layer_kind.hpp"

namespace prenet::kinds {

enum class Recurrence { rnn, lstm, gru };
enum class Pointwise { relu, gelu, tanh, sigmoid, silu, softmax, add };

LayerKind make_linear();
LayerKind make_conv2d();
LayerKind make_recurrent(Recurrence recurrence);
LayerKind make_multihead_attention();
LayerKind make_embedding();
LayerKind make_layer_norm();
LayerKind make_batchnorm2d();
LayerKind make_maxpool2d();
LayerKind make_avgpool2d();
LayerKind make_pointwise(Pointwise op);
LayerKind make_bmm();
LayerKind make_convolution();

// The sizes a convolution's cost follows from, whatever its dimensions (convolution_work.cpp): elements of its
// input, weights and output; the positions each weight is applied at (the batch's output positions; a transposed
// convolution's input positions, each scattering into the output); kernel taps per channel pair; channels;
// whether it adds a bias.
struct ConvolutionSizes {
    double input, weights, output, weight_positions, taps, in_channels, out_channels;
    bool bias;
};
LayerCost convolution_cost(const ConvolutionSizes& sizes, double bytes_per_element);
// A convolution's implicit GEMM, (rows x inner) by (inner x columns), as a linear kernel (convolution_work.cpp).
KernelWork implicit_gemm(std::int64_t rows, std::int64_t inner, std::int64_t columns, std::int64_t bias);
// The NCHW <-> NHWC transposes of `elements` elements around a tensor-core convolution (convolution_work.cpp).
KernelWork layout_transposes(std::int64_t elements);
// Whether PyTorch runs a convolution on a GPU with a depthwise kernel of its own, which adds the bias itself, rather
// than through cuDNN (convolution_work.cpp).
bool runs_pytorch_depthwise_kernel(std::int64_t in_channels, std::int64_t out_channels, std::int64_t groups,
                                   bool transposed);
// The kernel a GPU adds a convolution's bias in after cuDNN's (none where `bias` is 0 or the convolution runs
// PyTorch's depthwise kernel): its output, `planes` (batch x c_out) of `positions` each, read and written once.
std::vector<KernelWork> cudnn_bias_add(std::int64_t bias, bool depthwise, std::int64_t planes,
                                       std::int64_t positions);

// Upper bound for sizes: large enough for any real layer, small enough that counts stay exact in a double.
inline constexpr std::int64_t kMaxSize = std::int64_t{1} << 31;
// An add-shaped streaming kernel producing `elements` elements, `count` times, within the add kind's ranges: rows of
// at most kMaxSize (an optimizer's update of billions of weights, the traffic of an operator without a kind)
// (elementwise.cpp).
KernelWork streaming_add(double elements, double count = 1);
// Bytes of one int64 index (token ids of an embedding lookup).
inline constexpr double kIndexBytes = 8.0;
// Elements a streaming kernel reads and writes per element it produces: a unary one (ReLU) one read and one write,
// a binary one (add) two reads and one write.
inline constexpr double kUnaryElementPasses = 2.0;
inline constexpr double kBinaryElementPasses = 3.0;
// A reduction over one tensor (a bias gradient summing dY) reads each element once: a third of an add's passes.
inline constexpr double kReductionOfAdd = 1.0 / kBinaryElementPasses;
// LayerNorm's forward passes over the elements: it reads X and writes Y (cpp/src/kinds/layer_norm.cpp).
inline constexpr double kLayerNormForwardPasses = 2.0;

}  // namespace prenet::kinds

namespace prenet::kinds {

// Our counting convention for softmax over a row: max, subtract, exp, sum and divide, one FLOP each per element.
inline constexpr double kSoftmaxForwardFlopsPerElement = 5.0;
// Its backward, dX = Y * (dY - sum(dY * Y)): multiply, sum, subtract, multiply.
inline constexpr double kSoftmaxBackwardFlopsPerElement = 4.0;

}  // namespace prenet::kinds
