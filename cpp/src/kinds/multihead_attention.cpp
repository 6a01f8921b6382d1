// Multi-head self-attention, torch.nn.MultiheadAttention with query = key = value (batch, seq_len, embed_dim).
#include <stdexcept>
#include <string>

#include "kinds.hpp"

namespace prenet::kinds {

namespace {

void validate_attention(const LayerConfig& c) {
    if (c["embed_dim"] % c["num_heads"] != 0) {
        throw std::invalid_argument("multihead_attention: num_heads " + std::to_string(c["num_heads"]) +
                                    " does not divide embed_dim " + std::to_string(c["embed_dim"]));
    }
}

LayerCost attention_cost(const LayerConfig& c, double bytes_per_element) {
    const double b = c["batch"], seq = c["seq_len"], e = c["embed_dim"], heads = c["num_heads"];
    const double bias = c["bias"] ? 1.0 : 0.0;
    const double tokens = b * seq;
    const double scores = b * heads * seq * seq;          // elements of the attention matrices
    const double projection_gemm = 2 * tokens * e * e;    // one of the q, k, v and output projections
    const double score_gemm = 2 * b * seq * seq * e;      // Q K^T summed over heads; likewise P V
    LayerCost cost;
    cost.paper_operations = heads * seq * seq * (e / heads);  // PreNeT eq. 7: h * s^2 * d (d per head, no batch)
    cost.parameters = 4 * e * e + 4 * bias * e;               // in_proj (3E x E), out_proj (E x E), biases
    cost.parameter_tensors = 2 + 2 * bias;                    // in_proj_weight, out_proj.weight, their biases
    cost.memory_weights = cost.parameters;                    // PreNeT eq. 10
    cost.memory_input = tokens * e;                           // PreNeT eq. 11
    cost.memory_output = tokens * e;                          // PreNeT eq. 12
    // Four projections with biases, query scaling, two score GEMMs, softmax.
    cost.forward_flops = 4 * projection_gemm + 4 * bias * tokens * e + tokens * e + 2 * score_gemm +
                         kSoftmaxForwardFlopsPerElement * scores;
    // Every GEMM has an input and a weight (or second operand) gradient; bias gradients sum over tokens.
    cost.backward_flops = 8 * projection_gemm + 4 * bias * tokens * e + tokens * e + 4 * score_gemm +
                          kSoftmaxBackwardFlopsPerElement * scores;
    const double x = tokens * e, w_in = 3 * e * e + 3 * bias * e, w_out = e * e + bias * e;
    // in_proj: X, W_in -> QKV; scores: Q, K -> S; softmax: S -> P; context: P, V -> C; out_proj: C, W_out -> Y.
    cost.forward_bytes = bytes_per_element * ((x + w_in + 3 * x) + (2 * x + scores) + (2 * scores) +
                                              (scores + x + x) + (x + w_out + x));
    // out_proj: dY,W->dC and dY,C->dW; context: dC,V->dP and P,dC->dV; softmax: P,dP->dS;
    // scores: dS,K->dQ and dS,Q->dK; in_proj: dQKV,W->dX and dQKV,X->dW.
    cost.backward_bytes = bytes_per_element *
                          ((x + w_out + x) + (x + x + w_out) + (x + x + scores) + (scores + x + x) +
                           (3 * scores) + (scores + x + x) + (scores + x + x) + (3 * x + w_in + x) +
                           (3 * x + x + w_in));
    return cost;
}

// The kernels PyTorch's multi_head_attention_forward runs: the packed q, k, v projection, query scaling,
// Q K^T per head, softmax over keys, P V per head, the output projection.
std::vector<KernelWork> attention_kernels(const LayerConfig& c) {
    const std::int64_t b = c["batch"], seq = c["seq_len"], e = c["embed_dim"], heads = c["num_heads"];
    return {
        {"linear", {{"batch", b}, {"seq_len", seq}, {"in_features", e}, {"out_features", 3 * e}, {"bias", c["bias"]}}},
        {"relu", {{"batch", b * seq}, {"features", e}}},  // q * head_dim^-1/2: one read and one write, as a ReLU
        {"bmm", {{"batch", b * heads}, {"m", seq}, {"k", e / heads}, {"n", seq}}},
        {"softmax", {{"batch", b * heads * seq}, {"features", seq}}},
        {"bmm", {{"batch", b * heads}, {"m", seq}, {"k", seq}, {"n", e / heads}}},
        {"linear", {{"batch", b}, {"seq_len", seq}, {"in_features", e}, {"out_features", e}, {"bias", c["bias"]}}},
    };
}

}  // namespace

LayerKind make_multihead_attention() {
    LayerKind kind;
    kind.name = "multihead_attention";
    kind.paper_name = "Attention";
    kind.description = "Multi-head self-attention (torch.nn.MultiheadAttention, query = key = value)";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"seq_len", 1, kMaxSize, std::nullopt, "tokens per sample L"},
        {"embed_dim", 1, kMaxSize, std::nullopt, "model dimension E"},
        {"num_heads", 1, kMaxSize, std::nullopt, "attention heads H (must divide embed_dim)"},
        {"bias", 0, 1, 1, "1 if the projections add biases"},
    };
    kind.validate = validate_attention;
    kind.derived_names = {"head_dim"};
    kind.derived_values = [](const LayerConfig& c) {
        return std::vector<double>{static_cast<double>(c["embed_dim"] / c["num_heads"])};
    };
    kind.cost = attention_cost;
    kind.forward_kernels = attention_kernels;
    kind.flops_bound_time = true;  // its products and softmax
    return kind;
}

}  // namespace prenet::kinds
