// Dense layer, torch.nn.Linear: y = x W^T + b over batch * seq_len rows.
#include "kinds.hpp"

namespace prenet::kinds {

namespace {

LayerCost linear_cost(const LayerConfig& c, double bytes_per_element) {
    const double rows = static_cast<double>(c["batch"]) * c["seq_len"];
    const double in = c["in_features"], out = c["out_features"];
    const double bias = c["bias"] ? 1.0 : 0.0;
    LayerCost cost;
    cost.paper_operations = rows * in * out;            // PreNeT eq. 2: b * d_in * d_out
    cost.memory_weights = in * out;                     // PreNeT eq. 10: D_in * D_out
    cost.memory_input = rows * in;                      // PreNeT eq. 11: B * D_in
    cost.memory_output = rows * out;                    // PreNeT eq. 12: B * D_out
    cost.parameters = in * out + bias * out;
    cost.parameter_tensors = 1 + bias;
    // GEMM of (rows x in) by (in x out): one multiply and one add per term; bias adds one per output.
    cost.forward_flops = 2 * rows * in * out + bias * rows * out;
    // dX = dY W and dW = dY^T X are GEMMs of the same size; db sums dY over rows.
    cost.backward_flops = 4 * rows * in * out + bias * rows * out;
    // Forward reads X, W, b and writes Y.
    cost.forward_bytes = bytes_per_element * (rows * in + in * out + bias * out + rows * out);
    // dX reads dY, W, writes dX; dW reads dY, X, writes dW; db reads dY, writes db.
    cost.backward_bytes = bytes_per_element * ((rows * out + in * out + rows * in) +
                                               (rows * out + rows * in + in * out) +
                                               bias * (rows * out + out));
    return cost;
}

// dX = dY W is (rows x out) by (out x in); dW = dY^T X is (out x rows) by (rows x in); db sums dY, reading it
// once (a third of an add's traffic: two reads and a write).
std::vector<KernelWork> linear_backward(const LayerConfig& c) {
    const std::int64_t rows = c["batch"] * c["seq_len"];
    std::vector<KernelWork> work = {
        {"linear", {{"batch", c["batch"]}, {"seq_len", c["seq_len"]}, {"in_features", c["out_features"]},
                    {"out_features", c["in_features"]}, {"bias", 0}}},
        {"linear", {{"batch", 1}, {"seq_len", c["out_features"]}, {"in_features", rows},
                    {"out_features", c["in_features"]}, {"bias", 0}}},
    };
    if (c["bias"]) work.push_back({"add", {{"batch", rows}, {"features", c["out_features"]}}, kReductionOfAdd});
    return work;
}

}  // namespace

LayerKind make_linear() {
    LayerKind kind;
    kind.name = "linear";
    kind.paper_name = "Dense";
    kind.description = "Fully connected layer (torch.nn.Linear) applied to batch x seq_len rows";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"seq_len", 1, kMaxSize, 1, "rows per sample (tokens of a sequence); 1 for a plain MLP"},
        {"in_features", 1, kMaxSize, std::nullopt, "input dimension D_in"},
        {"out_features", 1, kMaxSize, std::nullopt, "output dimension D_out"},
        {"bias", 0, 1, 1, "1 if the layer adds a bias"},
    };
    kind.row_parameters = std::pair<std::string, std::string>{"batch", "seq_len"};
    kind.cost = linear_cost;
    kind.backward_kernels = linear_backward;
    kind.tensor_cores = TensorCores::matmul;
    kind.flops_bound_time = true;
    // PyTorch runs y = x W^T as the column-major product y^T = W x^T: m = D_out, n = the rows, k = D_in
    // (addmm in aten/src/ATen/native/cuda/Blas.cpp: row-major operands as their column-major transposes).
    kind.gemm_shape = [](const LayerConfig& c) {
        return GemmShape{static_cast<double>(c["out_features"]), static_cast<double>(c["batch"]) * c["seq_len"],
                         static_cast<double>(c["in_features"])};
    };
    return kind;
}

}  // namespace prenet::kinds
