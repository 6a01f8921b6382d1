// Any convolution the two-dimensional kind does not describe exactly (torch.nn.Conv1d and Conv3d, transposed and
// dilated convolutions, non-square kernels), by the work it does: the implicit GEMM of convolution_work.cpp. No
// predictor of its own: timed as that GEMM by the linear predictor, on tensor cores where cuDNN would use them.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "kinds.hpp"

namespace prenet::kinds {

namespace {

void validate_convolution(const LayerConfig& c) {
    if (c["in_channels"] % c["groups"] != 0 || c["out_channels"] % c["groups"] != 0) {
        throw std::invalid_argument("convolution: groups " + std::to_string(c["groups"]) +
                                    " must divide in_channels and out_channels");
    }
}

// The positions each weight is applied at: a convolution's output positions; a transposed one's input positions
// (each input element scatters its kernel's taps into the output).
std::int64_t weight_positions(const LayerConfig& c) {
    return c["batch"] * (c["transposed"] ? c["in_positions"] : c["out_positions"]);
}

// Weights: c_out x c_in/groups x kernel (c_in x c_out/groups x kernel transposed).
ConvolutionSizes sizes_of(const LayerConfig& c) {
    const double cin = c["in_channels"], cout = c["out_channels"], batch = c["batch"];
    return {batch * cin * c["in_positions"], cin * cout / static_cast<double>(c["groups"]) * c["kernel_positions"],
            batch * cout * c["out_positions"], static_cast<double>(weight_positions(c)),
            static_cast<double>(c["kernel_positions"]), cin, cout, c["bias"] != 0};
}

LayerCost convolution_layer_cost(const LayerConfig& c, double bytes_per_element) {
    return convolution_cost(sizes_of(c), bytes_per_element);
}

// One implicit GEMM for all groups, block-diagonal (each group's columns read only its own taps), as cuDNN runs
// a grouped convolution in one kernel: rows the batch's output positions, columns c_out, and an inner dimension
// that gives the exact multiply-adds: c_in / groups x kernel taps for a plain convolution; for a transposed one,
// where each output gathers the taps its inputs scatter to it, that times in_positions / out_positions (rounded),
// so that no buffer of every scattered tap is formed.
std::vector<KernelWork> convolution_forward(const LayerConfig& c) {
    const std::int64_t rows = c["batch"] * c["out_positions"];
    const double macs = static_cast<double>(weight_positions(c)) * sizes_of(c).weights;
    const std::int64_t inner = std::max<std::int64_t>(1, std::llround(macs / (static_cast<double>(rows) *
                                                                                c["out_channels"])));
    return {implicit_gemm(rows, inner, c["out_channels"], c["bias"])};
}

// On tensor cores: the same GEMM and, for NCHW tensors, the transposes; grouped convolutions keep their
// CUDA-core kernels, as in conv2d.cpp.
std::vector<KernelWork> convolution_tensor_core_kernels(const LayerConfig& c) {
    if (c["groups"] != 1) return {};
    std::vector<KernelWork> work = convolution_forward(c);
    if (!c["channels_last"]) {
        const ConvolutionSizes s = sizes_of(c);
        work.push_back(layout_transposes(std::llround(s.input + s.weights + s.output)));
    }
    return work;
}

// The convolution `c` without its bias as a kernel, or (`reversed`) the one running the other way: from c_out to
// c_in channels, from its output positions to its input ones, transposed if `c` is not and back.
KernelWork unbiased(const LayerConfig& c, bool reversed) {
    std::int64_t in_channels = c["in_channels"], out_channels = c["out_channels"];
    std::int64_t in_positions = c["in_positions"], out_positions = c["out_positions"];
    if (reversed) {
        std::swap(in_channels, out_channels);
        std::swap(in_positions, out_positions);
    }
    return {"convolution", {{"batch", c["batch"]}, {"in_channels", in_channels}, {"out_channels", out_channels},
                            {"in_positions", in_positions}, {"out_positions", out_positions},
                            {"kernel_positions", c["kernel_positions"]}, {"groups", c["groups"]},
                            {"transposed", reversed ? 1 - c["transposed"] : c["transposed"]}, {"bias", 0},
                            {"channels_last", c["channels_last"]}}};
}

// dX is the convolution running the other way, with the forward's multiply-adds; dW repeats them over the same
// tensors; db sums dY (one read).
std::vector<KernelWork> convolution_backward(const LayerConfig& c) {
    std::vector<KernelWork> work = {unbiased(c, true), unbiased(c, false)};
    if (c["bias"]) {
        work.push_back({"add", {{"batch", c["batch"] * c["out_channels"]}, {"features", c["out_positions"]}},
                        kReductionOfAdd});
    }
    return work;
}

// On a GPU, the bias added after cuDNN's kernels (convolution_work.cpp).
std::vector<KernelWork> convolution_bias_add(const LayerConfig& c) {
    const bool depthwise = runs_pytorch_depthwise_kernel(c["in_channels"], c["out_channels"], c["groups"],
                                                         c["transposed"] != 0);
    return cudnn_bias_add(c["bias"], depthwise, c["batch"] * c["out_channels"], c["out_positions"]);
}

}  // namespace

LayerKind make_convolution() {
    LayerKind kind;
    kind.name = "convolution";
    kind.paper_name = "Convolution";
    kind.description = "Any other convolution (Conv1d, Conv3d, transposed, dilated, non-square), as its implicit GEMM";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"in_channels", 1, kMaxSize, std::nullopt, "input channels c_in"},
        {"out_channels", 1, kMaxSize, std::nullopt, "output channels c_out"},
        {"in_positions", 1, kMaxSize, std::nullopt, "input positions per channel (L, H x W or D x H x W)"},
        {"out_positions", 1, kMaxSize, std::nullopt, "output positions per channel"},
        {"kernel_positions", 1, kMaxSize, std::nullopt, "kernel taps per channel pair (k, kh x kw, ...)"},
        {"groups", 1, kMaxSize, 1, "channel groups (in_channels for depthwise)"},
        {"transposed", 0, 1, 0, "1 for a transposed convolution (ConvTranspose)"},
        {"bias", 0, 1, 1, "1 if the layer adds a bias"},
        {"channels_last", 0, 1, 0, "1 if its tensors are in a channels-last memory format"},
    };
    kind.validate = validate_convolution;
    kind.cost = convolution_layer_cost;
    kind.forward_kernels = convolution_forward;
    kind.backward_kernels = convolution_backward;
    kind.tensor_cores = TensorCores::cudnn;
    kind.tensor_core_kernels = convolution_tensor_core_kernels;
    kind.gpu_bias_kernels = convolution_bias_add;
    return kind;
}

}  // namespace prenet::kinds
