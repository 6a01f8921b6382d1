// Two-dimensional max and average pooling, torch.nn.MaxPool2d / AvgPool2d with square windows.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kinds.hpp"
#include "prenet/features.hpp"

namespace prenet::kinds {

namespace {

// Output size: floor((in + 2 * padding - kernel) / stride) + 1 (PyTorch MaxPool2d docs, ceil_mode off).
double pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
    return static_cast<double>((in + 2 * padding - kernel) / stride + 1);
}

void validate_pool(const LayerConfig& c) {
    if (2 * c["padding"] > c["kernel_size"]) {
        throw std::invalid_argument("pool2d: padding " + std::to_string(c["padding"]) +
                                    " exceeds half the kernel_size " + std::to_string(c["kernel_size"]));
    }
    for (const char* side : {"height", "width"}) {
        if (c["kernel_size"] > c[side] + 2 * c["padding"]) {
            throw std::invalid_argument("pool2d: kernel_size " + std::to_string(c["kernel_size"]) +
                                        " is larger than the padded " + side + " " +
                                        std::to_string(c[side] + 2 * c["padding"]));
        }
    }
}

double pool_outputs(const LayerConfig& c) {
    return static_cast<double>(c["batch"]) * c["channels"] *
           pool_output_size(c["height"], c["kernel_size"], c["stride"], c["padding"]) *
           pool_output_size(c["width"], c["kernel_size"], c["stride"], c["padding"]);
}

// Max pooling writes (forward) and reads (backward) the int64 argmax of each output.
double index_bytes(bool max, const LayerConfig& c) { return max ? kIndexBytes * pool_outputs(c) : 0.0; }

LayerCost pool_cost(bool max, const LayerConfig& c, double bytes_per_element) {
    const double window = static_cast<double>(c["kernel_size"]) * c["kernel_size"];
    const double input = static_cast<double>(c["batch"]) * c["channels"] * c["height"] * c["width"];
    const double output = pool_outputs(c);
    LayerCost cost;
    cost.paper_operations = output * window;  // no PreNeT equation: window elements visited
    cost.memory_input = input;                 // PreNeT eq. 11
    cost.memory_output = output;               // PreNeT eq. 12
    // Max: one comparison per window element. Average: one add per window element and a division.
    cost.forward_flops = max ? output * window : output * (window + 1);
    // Max: route each dY to its argmax. Average: spread dY / window over the window.
    cost.backward_flops = max ? output : output * (window + 1);
    cost.forward_bytes = bytes_per_element * (input + output) + index_bytes(max, c);
    // Backward zero-fills dX, reads dY and writes the gradients into dX.
    cost.backward_bytes = bytes_per_element * (2 * input + output) + index_bytes(max, c);
    return cost;
}

LayerKind make_pool2d(bool max) {
    LayerKind kind;
    kind.name = max ? "maxpool2d" : "avgpool2d";
    kind.paper_name = "Pooling";
    kind.description = max ? "Max pooling (torch.nn.MaxPool2d), square window" :
                             "Average pooling (torch.nn.AvgPool2d, padding counted), square window";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"channels", 1, kMaxSize, std::nullopt, "channels"},
        {"height", 1, kMaxSize, std::nullopt, "input height"},
        {"width", 1, kMaxSize, std::nullopt, "input width"},
        {"kernel_size", 1, kMaxSize, std::nullopt, "side of the square window"},
        {"stride", 1, kMaxSize, std::nullopt, "stride (PyTorch's default is kernel_size)"},
        {"padding", 0, kMaxSize, 0, "implicit padding on each side"},
    };
    kind.validate = validate_pool;
    kind.derived_names = {"out_height", "out_width"};
    kind.derived_values = [](const LayerConfig& c) {
        return std::vector<double>{pool_output_size(c["height"], c["kernel_size"], c["stride"], c["padding"]),
                                   pool_output_size(c["width"], c["kernel_size"], c["stride"], c["padding"])};
    };
    kind.cost = [max](const LayerConfig& c, double bytes_per_element) { return pool_cost(max, c, bytes_per_element); };
    // Without a predictor of its own: streaming kernels over the input plane scaled to the pool's traffic
    // (pool_cost): forward as a ReLU (one read, one write per element), backward as an add (two reads, one write:
    // zero-fill dX, read dY, scatter into dX); max pooling's int64 indices as a kernel of the same kind kept at
    // full width under a 2-byte precision.
    const auto kernels = [max](const LayerConfig& c, bool forward) {
        const LayerCost cost = pool_cost(max, c, kFp32Bytes);
        const double plane_bytes =
            kFp32Bytes * static_cast<double>(c["batch"]) * c["channels"] * c["height"] * c["width"];
        const double passes = forward ? kUnaryElementPasses : kBinaryElementPasses;
        const std::map<std::string, std::int64_t> plane = {{"batch", c["batch"] * c["channels"]},
                                                           {"features", c["height"] * c["width"]}};
        const std::string kind = forward ? "relu" : "add";
        const double values = (forward ? cost.forward_bytes : cost.backward_bytes) - index_bytes(max, c);
        std::vector<KernelWork> work{{kind, plane, values / plane_bytes / passes}};
        if (max) work.push_back({kind, plane, index_bytes(max, c) / plane_bytes / passes, true});
        return work;
    };
    kind.forward_kernels = [kernels](const LayerConfig& c) { return kernels(c, true); };
    kind.backward_kernels = [kernels](const LayerConfig& c) { return kernels(c, false); };
    return kind;
}

}  // namespace

LayerKind make_maxpool2d() { return make_pool2d(true); }
LayerKind make_avgpool2d() { return make_pool2d(false); }

}  // namespace prenet::kinds
