// Two-dimensional convolution, torch.nn.Conv2d with square kernels, strides and padding.
#include <stdexcept>
#include <string>
#include <utility>

#include "kinds.hpp"

namespace prenet::kinds {

namespace {

// Output size of a convolution: floor((in + 2 * padding - kernel) / stride) + 1 (PyTorch Conv2d docs, dilation 1).
std::int64_t conv_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
    return (in + 2 * padding - kernel) / stride + 1;
}

// The output plane of `c`: its height and width.
std::pair<std::int64_t, std::int64_t> output_plane(const LayerConfig& c) {
    return {conv_output_size(c["height"], c["kernel_size"], c["stride"], c["padding"]),
            conv_output_size(c["width"], c["kernel_size"], c["stride"], c["padding"])};
}

void validate_conv2d(const LayerConfig& c) {
    for (const char* side : {"height", "width"}) {
        if (c["kernel_size"] > c[side] + 2 * c["padding"]) {
            throw std::invalid_argument("conv2d: kernel_size " + std::to_string(c["kernel_size"]) +
                                        " is larger than the padded " + side + " " +
                                        std::to_string(c[side] + 2 * c["padding"]));
        }
    }
    if (c["in_channels"] % c["groups"] != 0 || c["out_channels"] % c["groups"] != 0) {
        throw std::invalid_argument("conv2d: groups " + std::to_string(c["groups"]) +
                                    " must divide in_channels and out_channels");
    }
}

std::vector<double> conv2d_derived(const LayerConfig& c) {
    const auto [hout, wout] = output_plane(c);
    return {static_cast<double>(hout), static_cast<double>(wout)};
}

LayerCost conv2d_cost(const LayerConfig& c, double bytes_per_element) {
    const double b = c["batch"], cin = c["in_channels"], cout = c["out_channels"], k = c["kernel_size"];
    const auto [hout, wout] = output_plane(c);
    return convolution_cost({b * cin * c["height"] * c["width"], cout * (cin / c["groups"]) * k * k,
                             b * cout * hout * wout, b * hout * wout, k * k, cin, cout, c["bias"] != 0},
                            bytes_per_element);
}

// dX is a transposed convolution with the channel counts swapped and the forward's multiply-adds: taken as a
// stride-1 convolution from c_out to c_in channels over the output plane ("same" padding). dW repeats the
// forward's multiply-adds over the same tensors. db sums dY (one read: a third of an add's traffic).
std::vector<KernelWork> conv2d_backward(const LayerConfig& c) {
    const auto [hout, wout] = output_plane(c);
    std::vector<KernelWork> work = {
        {"conv2d", {{"batch", c["batch"]}, {"in_channels", c["out_channels"]}, {"out_channels", c["in_channels"]},
                    {"kernel_size", c["kernel_size"]}, {"stride", 1}, {"padding", c["kernel_size"] / 2},
                    {"height", hout}, {"width", wout}, {"groups", c["groups"]}, {"bias", 0},
                    {"channels_last", c["channels_last"]}}},
        {"conv2d", {{"batch", c["batch"]}, {"in_channels", c["in_channels"]}, {"out_channels", c["out_channels"]},
                    {"kernel_size", c["kernel_size"]}, {"stride", c["stride"]}, {"padding", c["padding"]},
                    {"height", c["height"]}, {"width", c["width"]}, {"groups", c["groups"]}, {"bias", 0},
                    {"channels_last", c["channels_last"]}}},
    };
    if (c["bias"]) {
        work.push_back(
            {"add", {{"batch", c["batch"] * c["out_channels"]}, {"features", hout * wout}}, kReductionOfAdd});
    }
    return work;
}

// On tensor cores a convolution is its implicit GEMM (convolution_work.cpp). Our GPU predictor learned CUDA-core
// kernels, for 3x3 convolutions mostly Winograd, which needs fewer multiplies than the GEMM (a median 1.04-1.13x
// the FP32 peak counted in direct FLOPs, NeuSight set) and does not carry over. Tensors already in channels_last
// (NHWC) format need no transposes. Grouped and depthwise convolutions keep their own kernels.
std::vector<KernelWork> conv2d_tensor_core_kernels(const LayerConfig& c) {
    if (c["groups"] != 1) return {};
    const auto [hout, wout] = output_plane(c);
    const std::int64_t taps = c["in_channels"] * c["kernel_size"] * c["kernel_size"];
    // the bias is added after cuDNN's kernels (conv2d_bias_add)
    std::vector<KernelWork> work = {implicit_gemm(c["batch"] * hout * wout, taps, c["out_channels"], 0)};
    if (!c["channels_last"]) {
        work.push_back(layout_transposes(c["batch"] * c["in_channels"] * c["height"] * c["width"] +
                                         c["out_channels"] * taps + c["batch"] * c["out_channels"] * hout * wout));
    }
    return work;
}

// cuDNN's convolution, grouped or not, and then its bias added in place (convolution_work.cpp); a depthwise one runs
// PyTorch's own kernel, which adds it.
std::vector<KernelWork> conv2d_bias_add(const LayerConfig& c) {
    const auto [hout, wout] = output_plane(c);
    return cudnn_bias_add(c["bias"],
                          runs_pytorch_depthwise_kernel(c["in_channels"], c["out_channels"], c["groups"], false),
                          c["batch"] * c["out_channels"], hout * wout);
}

// The same convolution as the general kind sees it (convolution.cpp: positions per channel, exact
// multiply-adds per group).
std::vector<KernelWork> conv2d_as_general(const LayerConfig& c) {
    const auto [hout, wout] = output_plane(c);
    return {{"convolution", {{"batch", c["batch"]}, {"in_channels", c["in_channels"]},
                             {"out_channels", c["out_channels"]}, {"in_positions", c["height"] * c["width"]},
                             {"out_positions", hout * wout}, {"kernel_positions", c["kernel_size"] * c["kernel_size"]},
                             {"groups", c["groups"]}, {"transposed", 0}, {"bias", c["bias"]},
                             {"channels_last", c["channels_last"]}}}};
}

}  // namespace

LayerKind make_conv2d() {
    LayerKind kind;
    kind.name = "conv2d";
    kind.paper_name = "Convolution";
    kind.description = "2-D convolution (torch.nn.Conv2d), square kernel, stride and padding, dilation 1";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"in_channels", 1, kMaxSize, std::nullopt, "input channels c_in"},
        {"out_channels", 1, kMaxSize, std::nullopt, "output channels c_out"},
        {"kernel_size", 1, kMaxSize, std::nullopt, "side k of the square kernel"},
        {"stride", 1, kMaxSize, 1, "stride in both directions"},
        {"padding", 0, kMaxSize, 0, "zero padding on each side"},
        {"height", 1, kMaxSize, std::nullopt, "input height h"},
        {"width", 1, kMaxSize, std::nullopt, "input width w"},
        {"groups", 1, kMaxSize, 1, "channel groups (in_channels for depthwise)"},
        {"bias", 0, 1, 1, "1 if the layer adds a bias"},
        {"channels_last", 0, 1, 0, "1 if its tensors are in channels_last (NHWC) memory format"},
    };
    kind.validate = validate_conv2d;
    kind.derived_names = {"out_height", "out_width"};
    kind.derived_values = conv2d_derived;
    kind.cost = conv2d_cost;
    kind.backward_kernels = conv2d_backward;
    kind.tensor_cores = TensorCores::cudnn;
    kind.tensor_core_kernels = conv2d_tensor_core_kernels;
    kind.gpu_bias_kernels = conv2d_bias_add;
    kind.unfitted_parameters = {"groups"};
    kind.unfitted_kernels = conv2d_as_general;
    return kind;
}

}  // namespace prenet::kinds
