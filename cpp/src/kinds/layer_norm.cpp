// Layer normalisation, torch.nn.LayerNorm over the last dimension of (batch, seq_len, normalized_shape).
#include "kinds.hpp"

namespace prenet::kinds {

namespace {

// Forward FLOPs per element: mean 1, variance 3 (subtract, square, sum), normalise 2 (subtract, scale).
constexpr double kNormForwardPerElement = 6.0;
// Affine transform per element: multiply by gamma, add beta.
constexpr double kAffinePerElement = 2.0;
// Backward per element, dX = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dY (* gamma):
// recompute xhat 2, two row sums with one product 3, final combination 4.
constexpr double kNormBackwardPerElement = 9.0;
// Affine backward per element: g = dY * gamma 1, dGamma += dY * xhat 2, dBeta += dY 1.
constexpr double kAffineBackwardPerElement = 4.0;
// Per row: add epsilon to the variance and take its reciprocal square root.
constexpr double kNormPerRow = 2.0;

LayerCost layer_norm_cost(const LayerConfig& c, double bytes_per_element) {
    const double rows = static_cast<double>(c["batch"]) * c["seq_len"];
    const double n = c["normalized_shape"];
    const double affine = c["elementwise_affine"] ? 1.0 : 0.0;
    const double elements = rows * n;
    LayerCost cost;
    cost.paper_operations = elements;   // no PreNeT equation for LayerNorm: we use the normalised elements
    cost.parameters = 2 * affine * n;
    cost.parameter_tensors = 2 * affine;  // weight, bias
    cost.memory_weights = cost.parameters;  // PreNeT eq. 10
    cost.memory_input = elements;           // PreNeT eq. 11: B * D_in
    cost.memory_output = elements;          // PreNeT eq. 12: B * D_out
    cost.forward_flops = (kNormForwardPerElement + affine * kAffinePerElement) * elements + kNormPerRow * rows;
    cost.backward_flops = (kNormBackwardPerElement + affine * kAffineBackwardPerElement) * elements;
    // Forward reads X and gamma, beta; writes Y and the saved mean and rstd of each row.
    cost.forward_bytes = bytes_per_element * (kLayerNormForwardPasses * elements + 2 * affine * n + 2 * rows);
    // dX kernel reads dY, X, gamma, mean, rstd and writes dX; the affine kernel rereads dY, X, mean, rstd.
    cost.backward_bytes = bytes_per_element * ((3 * elements + affine * n + 2 * rows) +
                                               affine * (2 * elements + 2 * rows + 2 * n));
    return cost;
}

}  // namespace

LayerKind make_layer_norm() {
    LayerKind kind;
    kind.name = "layer_norm";
    kind.paper_name = "LayerNorm";
    kind.description = "Layer normalisation over the last dimension (torch.nn.LayerNorm)";
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"seq_len", 1, kMaxSize, 1, "rows per sample (tokens); 1 for a plain vector"},
        {"normalized_shape", 1, kMaxSize, std::nullopt, "size of the normalised last dimension D_in"},
        {"elementwise_affine", 0, 1, 1, "1 if the layer has gamma and beta"},
    };
    kind.row_parameters = std::pair<std::string, std::string>{"batch", "seq_len"};
    kind.streaming_rows = true;
    kind.vectorised_axis = "normalized_shape";
    kind.cost = layer_norm_cost;
    return kind;
}

}  // namespace prenet::kinds
