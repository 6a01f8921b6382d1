// Recurrent layers, torch.nn.RNN (tanh), torch.nn.LSTM and torch.nn.GRU, stacked and optionally bidirectional.
#include <stdexcept>

#include "kinds.hpp"

namespace prenet::kinds {

namespace {

struct RecurrenceTraits {
    const char* name;
    const char* paper_name;
    const char* description;
    double gates;                 // weight blocks per hidden unit (PyTorch's gate_size / hidden_size)
    double paper_coefficient;     // the leading factor of PreNeT eqs. 4-6
    double elementwise_per_unit;  // forward pointwise FLOPs per hidden unit and step (our count, below)
};

// Pointwise work per hidden unit and step, one FLOP per add, multiply or activation:
//  RNN:  gate sum 1, tanh 1                                                          = 2
//  LSTM: gate sums 4, activations 4, c = f*c + i*g 3, h = o*tanh(c) 2                  = 13
//  GRU:  r,z sums 2, r,z sigmoid 2, n = tanh(x_n + r*h_n) 3, h = (1-z)*n + z*h 4       = 11
RecurrenceTraits traits_of(Recurrence r) {
    switch (r) {
        case Recurrence::rnn:
            return {"rnn", "RNN", "Elman RNN with tanh (torch.nn.RNN)", 1, 2, 2};          // PreNeT eq. 4
        case Recurrence::lstm:
            return {"lstm", "LSTM", "Long short-term memory (torch.nn.LSTM)", 4, 4, 13};   // PreNeT eq. 5
        case Recurrence::gru:
            return {"gru", "GRU", "Gated recurrent unit (torch.nn.GRU)", 3, 3, 11};       // PreNeT eq. 6
    }
    throw std::logic_error("unknown recurrence");
}

LayerCost recurrent_cost(const RecurrenceTraits& t, const LayerConfig& c, double bytes_per_element) {
    const double b = c["batch"], seq = c["seq_len"], h = c["hidden_size"];
    const double directions = c["bidirectional"] ? 2.0 : 1.0;
    const double bias = c["bias"] ? 1.0 : 0.0;
    const double steps = b * seq;  // (sample, time step) pairs
    const double g = t.gates * h;  // gate rows of each weight matrix
    LayerCost cost;
    for (std::int64_t layer = 0; layer < c["num_layers"]; ++layer) {
        const double in = layer == 0 ? static_cast<double>(c["input_size"]) : h * directions;
        const double weights = g * in + g * h + 2 * bias * g;  // W_ih, W_hh, b_ih, b_hh
        const double gemm_flops = 2 * steps * g * (in + h);
        const double elementwise = steps * h * t.elementwise_per_unit + 2 * bias * steps * g;
        // PreNeT eqs. 4-6 for one layer and direction: k * b * s * h * (h + d).
        cost.paper_operations += directions * t.paper_coefficient * steps * h * (h + in);
        cost.parameters += directions * weights;
        cost.parameter_tensors += directions * (2 + 2 * bias);  // W_ih, W_hh, b_ih, b_hh
        cost.forward_flops += directions * (gemm_flops + elementwise);
        // Gradients of the inputs and of both weight matrices repeat the GEMMs; pointwise backward costs twice
        // the forward pointwise work (derivative and product); bias gradients sum over steps.
        cost.backward_flops += directions * (2 * gemm_flops + 2 * steps * h * t.elementwise_per_unit +
                                             2 * bias * steps * g);
        // Forward reads the input and weights, writes outputs and the gate activations kept for backward.
        cost.forward_bytes += directions * bytes_per_element * (steps * in + weights + steps * h + steps * g);
        // Backward reads output gradients, kept gates, weights and inputs; writes input and weight gradients.
        cost.backward_bytes += directions * bytes_per_element *
                               (steps * h + steps * g + weights + steps * in + steps * in + weights);
    }
    cost.memory_weights = cost.parameters;                       // PreNeT eq. 10, all weight matrices
    cost.memory_input = steps * c["input_size"];                 // PreNeT eq. 11: B * L * D_in
    cost.memory_output = steps * h * directions;                 // PreNeT eq. 12: B * L * D_out
    return cost;
}

// The kernels of cuDNN's and PyTorch's recurrent layers, per layer and direction: one GEMM projecting the
// inputs of every step, then per step a GEMM of the hidden state and the fused pointwise cell (reading the gate
// pre-activations and the state, writing the new state: about an add over the gate rows).
std::vector<KernelWork> recurrent_kernels(const RecurrenceTraits& t, const LayerConfig& c) {
    const std::int64_t b = c["batch"], seq = c["seq_len"], h = c["hidden_size"];
    const std::int64_t directions = c["bidirectional"] ? 2 : 1;
    const auto gate_rows = static_cast<std::int64_t>(t.gates) * h;
    std::vector<KernelWork> work;
    for (std::int64_t layer = 0; layer < c["num_layers"]; ++layer) {
        const std::int64_t in = layer == 0 ? c["input_size"] : h * directions;
        const auto per_direction = static_cast<double>(directions);
        work.push_back({"linear", {{"batch", b}, {"seq_len", seq}, {"in_features", in},
                                   {"out_features", gate_rows}, {"bias", c["bias"]}}, per_direction});
        work.push_back({"linear", {{"batch", b}, {"in_features", h}, {"out_features", gate_rows},
                                   {"bias", c["bias"]}}, per_direction * seq});
        work.push_back({"add", {{"batch", b}, {"features", gate_rows}}, per_direction * seq});
    }
    return work;
}

}  // namespace

LayerKind make_recurrent(Recurrence recurrence) {
    const RecurrenceTraits t = traits_of(recurrence);
    LayerKind kind;
    kind.name = t.name;
    kind.paper_name = t.paper_name;
    kind.description = t.description;
    kind.parameters = {
        {"batch", 1, kMaxSize, std::nullopt, "samples per batch"},
        {"seq_len", 1, kMaxSize, std::nullopt, "time steps L"},
        {"input_size", 1, kMaxSize, std::nullopt, "input features per step D_in"},
        {"hidden_size", 1, kMaxSize, std::nullopt, "hidden state size H"},
        {"num_layers", 1, 1024, 1, "stacked layers"},
        {"bidirectional", 0, 1, 0, "1 for a bidirectional layer"},
        {"bias", 0, 1, 1, "1 if the layer has bias vectors"},
    };
    kind.derived_names = {"directions"};
    kind.derived_values = [](const LayerConfig& c) { return std::vector<double>{c["bidirectional"] ? 2.0 : 1.0}; };
    kind.cost = [t](const LayerConfig& c, double bytes_per_element) { return recurrent_cost(t, c, bytes_per_element); };
    kind.forward_kernels = [t](const LayerConfig& c) { return recurrent_kernels(t, c); };
    // cuDNN's RNN descriptor takes PyTorch's cuDNN TF32 flag (aten/src/ATen/native/cudnn/RNN.cpp): TF32 by default.
    kind.tensor_cores = TensorCores::cudnn;
    kind.flops_bound_time = true;
    return kind;
}

}  // namespace prenet::kinds
