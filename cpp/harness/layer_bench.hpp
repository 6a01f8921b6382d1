// One layer of a given kind and configuration, built on a device, ready to time.
// The kinds: the paper's six (with RNN, LSTM, GRU), and the operators every real model also spends time in.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "request.hpp"

namespace prenet::harness {

struct LayerBench {
    std::vector<torch::Tensor> parameters;  // what the optimizer updates (empty for parameter-free kinds)
    std::function<torch::Tensor()> forward; // runs the layer on its prepared inputs
};

// Builds the layer named by request.text("kind") with floating tensors of `options`; throws
// std::invalid_argument for an unknown kind or configuration.
LayerBench build_layer(const Request& request, const torch::TensorOptions& options);

// The kinds build_layer accepts, in table order.
std::vector<std::string> harness_kinds();

}  // namespace prenet::harness
