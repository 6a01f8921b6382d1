// Embedding lookup, torch.nn.Embedding with dense gradients.
#include "kinds.hpp"

namespace prenet::kinds {

namespace {

LayerCost embedding_cost(const LayerConfig& c, double bytes_per_element) {
    const double tokens = static_cast<double>(c["batch"]) * c["seq_len"];
    const double vocab = c["num_embeddings"], dim = c["embedding_dim"];
    LayerCost cost;
    cost.paper_operations = tokens * dim;  // PreNeT eq. 8: B * S * D_emb
    cost.parameters = vocab * dim;
    cost.parameter_tensors = 1;
    cost.memory_weights = vocab * dim;     // PreNeT eq. 10: the table
    cost.memory_input = tokens;            // PreNeT eq. 11: token ids
    cost.memory_output = tokens * dim;     // PreNeT eq. 12
    cost.forward_flops = 0;                // a gather: no arithmetic
    cost.backward_flops = tokens * dim;    // scatter-add of each output-gradient row into the table gradient
    // Forward reads ids and the selected rows, writes the output.
    cost.forward_bytes = kIndexBytes * tokens + bytes_per_element * 2 * tokens * dim;
    // Backward zero-fills the dense table gradient, reads ids and dY, and accumulates rows (read + write).
    cost.backward_bytes = kIndexBytes * tokens + bytes_per_element * (vocab * dim + tokens * dim + 2 * tokens * dim);
    return cost;
}

}  // namespace

LayerKind make_embedding() {
    LayerKind kind;
    kind.name = "embedding";
    kind.paper_name = "Embedding";
    kind.description = "Token embedding lookup (torch.nn.Embedding, dense gradient)";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"seq_len", 1, kMaxSize, std::nullopt, "tokens per sample S"},
        {"num_embeddings", 1, kMaxSize, std::nullopt, "vocabulary size"},
        {"embedding_dim", 1, kMaxSize, std::nullopt, "embedding dimension D_emb"},
    };
    kind.cost = embedding_cost;
    // Without a predictor of its own: the gather reads and writes each output element once, as a ReLU does.
    kind.forward_kernels = [](const LayerConfig& c) {
        return std::vector<KernelWork>{{"relu", {{"batch", c["batch"] * c["seq_len"]},
                                                 {"features", c["embedding_dim"]}}}};
    };
    // Backward (cost.backward_bytes): the dense table gradient zero-filled, a write of every element (half a
    // ReLU's read and write), then each output-gradient row added into its token's row (read dY and the row,
    // write the row, as an add does).
    kind.backward_kernels = [](const LayerConfig& c) {
        return std::vector<KernelWork>{
            {"relu", {{"batch", c["num_embeddings"]}, {"features", c["embedding_dim"]}}, 0.5},
            {"add", {{"batch", c["batch"] * c["seq_len"]}, {"features", c["embedding_dim"]}}}};
    };
    return kind;
}

}  // namespace prenet::kinds
