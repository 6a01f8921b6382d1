// Batched matrix product, torch.bmm: (batch, m, k) x (batch, k, n) -> (batch, m, n).
#include "kinds.hpp"

namespace prenet::kinds {

namespace {

LayerCost bmm_cost(const LayerConfig& c, double bytes_per_element) {
    const double b = c["batch"], m = c["m"], k = c["k"], n = c["n"];
    const double a_elements = b * m * k, b_elements = b * k * n, c_elements = b * m * n;
    LayerCost cost;
    cost.paper_operations = b * m * k * n;      // as PreNeT eq. 2: the product of the dimensions
    cost.memory_input = a_elements + b_elements;  // PreNeT eq. 11 for both operands
    cost.memory_output = c_elements;              // PreNeT eq. 12
    cost.forward_flops = 2 * b * m * k * n;       // one multiply and one add per term
    cost.backward_flops = 4 * b * m * k * n;      // dA = dC B^T and dB = A^T dC
    cost.forward_bytes = bytes_per_element * (a_elements + b_elements + c_elements);
    // dA reads dC, B and writes dA; dB reads A, dC and writes dB.
    cost.backward_bytes = bytes_per_element * ((c_elements + b_elements + a_elements) +
                                               (a_elements + c_elements + b_elements));
    return cost;
}

// dA = dC B^T is (m x n) by (n x k); dB = A^T dC is (k x m) by (m x n).
std::vector<KernelWork> bmm_backward(const LayerConfig& c) {
    return {{"bmm", {{"batch", c["batch"]}, {"m", c["m"]}, {"k", c["n"]}, {"n", c["k"]}}},
            {"bmm", {{"batch", c["batch"]}, {"m", c["k"]}, {"k", c["m"]}, {"n", c["n"]}}}};
}

}  // namespace

LayerKind make_bmm() {
    LayerKind kind;
    kind.name = "bmm";
    kind.paper_name = "Batched matmul";
    kind.description = "Batched matrix product (torch.bmm), as in attention written with matmul";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "independent products"},
        {"m", 1, kMaxSize, std::nullopt, "rows of the first operand"},
        {"k", 1, kMaxSize, std::nullopt, "the shared (reduced) dimension"},
        {"n", 1, kMaxSize, std::nullopt, "columns of the second operand"},
    };
    kind.cost = bmm_cost;
    kind.backward_kernels = bmm_backward;
    kind.tensor_cores = TensorCores::matmul;
    kind.flops_bound_time = true;
    return kind;
}

}  // namespace prenet::kinds
