// Row-wise and elementwise operators on (batch, seq_len, features): activations, softmax and the residual add.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kinds.hpp"

namespace prenet::kinds {

namespace {

struct PointwiseTraits {
    const char* name;
    const char* description;
    double forward_per_element;   // FLOPs, one per arithmetic operation or elementary function
    double backward_per_element;  // FLOPs of the input gradient, including the product with dY
    double inputs;                // tensors read by the forward pass
    double backward_tensors;      // tensors the backward kernel reads and writes (0: gradient passed through)
};

// Forward / backward FLOPs per element, our count:
//  relu     max(x, 0)                                  1 / select 1
//  gelu     x * 0.5 * (1 + erf(x / sqrt 2))            5 / cdf 4, pdf 4, x * pdf 1, sum 1, times dY 1 = 11
//  tanh     tanh(x)                                    1 / (1 - y^2) * dY 3
//  sigmoid  1 / (1 + exp(-x))                          4 / y * (1 - y) * dY 3
//  silu     x * sigmoid(x)                             5 / sigmoid 4, s + x s (1 - s) 4, times dY 1 = 9
//  softmax  max, subtract, exp, sum, divide            5 / kSoftmaxBackwardFlopsPerElement
//  add      a + b                                      1 / none: autograd hands dY to both inputs
PointwiseTraits traits_of(Pointwise op) {
    switch (op) {
        case Pointwise::relu: return {"relu", "ReLU activation (torch.relu)", 1, 1, 1, 3};
        case Pointwise::gelu:
            return {"gelu", "GELU activation, exact erf form (torch.nn.functional.gelu)", 5, 11, 1, 3};
        case Pointwise::tanh: return {"tanh", "Hyperbolic tangent activation (torch.tanh)", 1, 3, 1, 3};
        case Pointwise::sigmoid: return {"sigmoid", "Logistic sigmoid activation (torch.sigmoid)", 4, 3, 1, 3};
        case Pointwise::silu: return {"silu", "SiLU / swish activation (torch.nn.functional.silu)", 5, 9, 1, 3};
        case Pointwise::softmax:
            return {"softmax", "Softmax over the last dimension (torch.softmax)", kSoftmaxForwardFlopsPerElement,
                    kSoftmaxBackwardFlopsPerElement, 1, 3};
        case Pointwise::add: return {"add", "Elementwise sum of two tensors, e.g. a residual connection", 1, 0, 2, 0};
    }
    throw std::logic_error("unknown pointwise operator");
}

LayerCost pointwise_cost(const PointwiseTraits& t, const LayerConfig& c, double bytes_per_element) {
    const double elements = static_cast<double>(c["batch"]) * c["seq_len"] * c["features"];
    LayerCost cost;
    cost.paper_operations = elements;              // no PreNeT equation: we use the elements processed
    cost.memory_input = t.inputs * elements;       // PreNeT eq. 11
    cost.memory_output = elements;                 // PreNeT eq. 12
    cost.forward_flops = t.forward_per_element * elements;
    cost.backward_flops = t.backward_per_element * elements;
    cost.forward_bytes = bytes_per_element * (t.inputs + 1) * elements;  // read the inputs, write the output
    cost.backward_bytes = bytes_per_element * t.backward_tensors * elements;  // read dY and x (or y), write dX
    return cost;
}

KernelWork same_shape(const char* kind, const LayerConfig& c) {
    return {kind, {{"batch", c["batch"]}, {"seq_len", c["seq_len"]}, {"features", c["features"]}}};
}

}  // namespace

KernelWork streaming_add(double elements, double count) {
    // rows of at most kMaxSize elements: an elementwise kernel's work is its element count (row_parameters below)
    const auto rows = static_cast<std::int64_t>(std::ceil(std::max(elements, 1.0) / static_cast<double>(kMaxSize)));
    const auto per_row = static_cast<std::int64_t>(std::ceil(std::max(elements, 1.0) / static_cast<double>(rows)));
    return {"add", {{"batch", rows}, {"features", per_row}}, count};
}

LayerKind make_pointwise(Pointwise op) {
    const PointwiseTraits t = traits_of(op);
    LayerKind kind;
    kind.name = t.name;
    kind.paper_name = "Elementwise";
    kind.description = t.description;
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"seq_len", 1, kMaxSize, 1, "rows per sample (tokens, or channels x pixels); 1 for a plain vector"},
        {"features", 1, kMaxSize, std::nullopt, "elements per row (the softmax dimension)"},
    };
    kind.cost = [t](const LayerConfig& c, double bytes_per_element) { return pointwise_cost(t, c, bytes_per_element); };
    kind.streaming_rows = true;
    // Elementwise, the element count alone sets the work (softmax reduces over its features, which stay as given).
    if (op != Pointwise::softmax) kind.row_parameters = std::pair<std::string, std::string>{"batch", "features"};
    if (op == Pointwise::softmax) kind.vectorised_axis = "features";  // its row reductions run in SIMD vectors
    if (op == Pointwise::relu || op == Pointwise::tanh || op == Pointwise::sigmoid || op == Pointwise::softmax) {
        // The gradient comes from the sign of x or from y without a transcendental (tanh: 1 - y^2, sigmoid:
        // y (1 - y), softmax: y (dY - sum(dY y))): read two tensors, write one, as an add does.
        kind.backward_kernels = [](const LayerConfig& c) { return std::vector<KernelWork>{same_shape("add", c)}; };
    }
    if (op == Pointwise::tanh || op == Pointwise::sigmoid || op == Pointwise::silu) {
        // Without a predictor of its own: a transcendental activation of the same traffic (read x, write y).
        kind.forward_kernels = [](const LayerConfig& c) { return std::vector<KernelWork>{same_shape("gelu", c)}; };
    }
    return kind;
}

}  // namespace prenet::kinds
