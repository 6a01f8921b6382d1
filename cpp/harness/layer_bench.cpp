#include "layer_bench.hpp"

#include <stdexcept>

namespace prenet::harness {

namespace {

using Builder = std::function<LayerBench(const Request&, const torch::TensorOptions&)>;

// Inputs take part in autograd, as they do in the middle of a network: backward computes input gradients.
torch::Tensor input(torch::IntArrayRef shape, const torch::TensorOptions& options) {
    return torch::randn(shape, options).requires_grad_(true);
}

template <typename Holder>
std::vector<torch::Tensor> parameters_of(const Holder& module) {
    return module->parameters();
}

torch::Tensor activate(const torch::Tensor& x, const std::string& name) {
    if (name == "none") return x;
    if (name == "relu") return torch::relu(x);
    if (name == "gelu") return torch::gelu(x);
    if (name == "tanh") return torch::tanh(x);
    if (name == "sigmoid") return torch::sigmoid(x);
    if (name == "silu") return torch::silu(x);
    throw std::invalid_argument("unknown activation '" + name + "'; accepted: none relu gelu tanh sigmoid silu");
}

LayerBench linear(const Request& r, const torch::TensorOptions& o) {
    torch::nn::Linear layer(torch::nn::LinearOptions(r.integer("in_features"), r.integer("out_features"))
                                .bias(r.integer("bias", 1) != 0));
    layer->to(o.device(), o.dtype().toScalarType());
    auto x = input({r.integer("batch"), r.integer("seq_len", 1), r.integer("in_features")}, o);
    const std::string activation = r.text("activation", "none");
    activate(x, activation);  // rejects an unknown activation before timing
    return {parameters_of(layer), [=]() mutable { return activate(layer->forward(x), activation); }};
}

LayerBench conv2d(const Request& r, const torch::TensorOptions& o) {
    torch::nn::Conv2d layer(torch::nn::Conv2dOptions(r.integer("in_channels"), r.integer("out_channels"),
                                                     r.integer("kernel_size"))
                                .stride(r.integer("stride", 1))
                                .padding(r.integer("padding", 0))
                                .groups(r.integer("groups", 1))
                                .bias(r.integer("bias", 1) != 0));
    layer->to(o.device(), o.dtype().toScalarType());
    auto x = input({r.integer("batch"), r.integer("in_channels"), r.integer("height"), r.integer("width")}, o);
    return {parameters_of(layer), [=]() mutable { return layer->forward(x); }};
}

// Recurrent layers take (seq_len, batch, input_size), PyTorch's default layout.
template <typename Layer, typename Options>
LayerBench recurrent(const Request& r, const torch::TensorOptions& o) {
    Layer layer(Options(r.integer("input_size"), r.integer("hidden_size"))
                    .num_layers(r.integer("num_layers", 1))
                    .bidirectional(r.integer("bidirectional", 0) != 0)
                    .bias(r.integer("bias", 1) != 0));
    layer->to(o.device(), o.dtype().toScalarType());
    auto x = input({r.integer("seq_len"), r.integer("batch"), r.integer("input_size")}, o);
    return {parameters_of(layer), [=]() mutable { return std::get<0>(layer->forward(x)); }};
}

// Self-attention on (seq_len, batch, embed_dim), without returning attention weights (as nn.Transformer does).
LayerBench multihead_attention(const Request& r, const torch::TensorOptions& o) {
    torch::nn::MultiheadAttention layer(
        torch::nn::MultiheadAttentionOptions(r.integer("embed_dim"), r.integer("num_heads"))
            .bias(r.integer("bias", 1) != 0));
    layer->to(o.device(), o.dtype().toScalarType());
    auto x = input({r.integer("seq_len"), r.integer("batch"), r.integer("embed_dim")}, o);
    return {parameters_of(layer),
            [=]() mutable { return std::get<0>(layer->forward(x, x, x, {}, /*need_weights=*/false)); }};
}

LayerBench embedding(const Request& r, const torch::TensorOptions& o) {
    torch::nn::Embedding layer(torch::nn::EmbeddingOptions(r.integer("num_embeddings"), r.integer("embedding_dim")));
    layer->to(o.device(), o.dtype().toScalarType());
    auto ids = torch::randint(r.integer("num_embeddings"), {r.integer("batch"), r.integer("seq_len")},
                              torch::TensorOptions().dtype(torch::kLong).device(o.device()));
    return {parameters_of(layer), [=]() mutable { return layer->forward(ids); }};
}

LayerBench layer_norm(const Request& r, const torch::TensorOptions& o) {
    torch::nn::LayerNorm layer(torch::nn::LayerNormOptions({r.integer("normalized_shape")})
                                   .elementwise_affine(r.integer("elementwise_affine", 1) != 0));
    layer->to(o.device(), o.dtype().toScalarType());
    auto x = input({r.integer("batch"), r.integer("seq_len", 1), r.integer("normalized_shape")}, o);
    return {parameters_of(layer), [=]() mutable { return layer->forward(x); }};
}

LayerBench batchnorm2d(const Request& r, const torch::TensorOptions& o) {
    torch::nn::BatchNorm2d layer(r.integer("channels"));
    layer->to(o.device(), o.dtype().toScalarType());
    layer->train();
    auto x = input({r.integer("batch"), r.integer("channels"), r.integer("height"), r.integer("width")}, o);
    return {parameters_of(layer), [=]() mutable { return layer->forward(x); }};
}

LayerBench pool2d(const Request& r, const torch::TensorOptions& o, bool max) {
    auto x = input({r.integer("batch"), r.integer("channels"), r.integer("height"), r.integer("width")}, o);
    const auto k = r.integer("kernel_size"), s = r.integer("stride", k), p = r.integer("padding", 0);
    if (2 * p > k) throw std::invalid_argument("pool padding must be at most half the kernel size");
    if (max) return {{}, [=]() { return torch::max_pool2d(x, k, s, p); }};
    return {{}, [=]() { return torch::avg_pool2d(x, k, s, p); }};
}

// Elementwise and row-wise operators on (batch, features), the layout of the NeuSight operator data.
LayerBench activation(const Request& r, const torch::TensorOptions& o) {
    auto x = input({r.integer("batch"), r.integer("features")}, o);
    const std::string op = r.text("op");
    activate(x, op);
    return {{}, [=]() { return activate(x, op); }};
}

LayerBench add(const Request& r, const torch::TensorOptions& o) {
    auto a = input({r.integer("batch"), r.integer("features")}, o);
    auto b = input({r.integer("batch"), r.integer("features")}, o);
    return {{}, [=]() { return torch::add(a, b); }};
}

LayerBench softmax(const Request& r, const torch::TensorOptions& o) {
    auto x = input({r.integer("batch"), r.integer("features")}, o);
    return {{}, [=]() { return torch::softmax(x, -1); }};
}

// Batched matrix product (batch, m, k) x (batch, k, n).
LayerBench bmm(const Request& r, const torch::TensorOptions& o) {
    auto a = input({r.integer("batch"), r.integer("m"), r.integer("k")}, o);
    auto b = input({r.integer("batch"), r.integer("k"), r.integer("n")}, o);
    return {{}, [=]() { return torch::bmm(a, b); }};
}

const std::vector<std::pair<std::string, Builder>>& table() {
    static const std::vector<std::pair<std::string, Builder>> kinds = {
        {"linear", linear},
        {"conv2d", conv2d},
        {"rnn", recurrent<torch::nn::RNN, torch::nn::RNNOptions>},
        {"lstm", recurrent<torch::nn::LSTM, torch::nn::LSTMOptions>},
        {"gru", recurrent<torch::nn::GRU, torch::nn::GRUOptions>},
        {"multihead_attention", multihead_attention},
        {"embedding", embedding},
        {"layer_norm", layer_norm},
        {"batchnorm2d", batchnorm2d},
        {"maxpool2d", [](const Request& r, const torch::TensorOptions& o) { return pool2d(r, o, true); }},
        {"avgpool2d", [](const Request& r, const torch::TensorOptions& o) { return pool2d(r, o, false); }},
        {"activation", activation},
        {"add", add},
        {"softmax", softmax},
        {"bmm", bmm},
    };
    return kinds;
}

}  // namespace

LayerBench build_layer(const Request& request, const torch::TensorOptions& options) {
    const std::string& kind = request.text("kind");
    for (const auto& [name, build] : table()) {
        if (name == kind) return build(request, options);
    }
    std::string known;
    for (const auto& entry : table()) known += " " + entry.first;
    throw std::invalid_argument("unknown harness kind '" + kind + "'; known:" + known);
}

std::vector<std::string> harness_kinds() {
    std::vector<std::string> names;
    for (const auto& entry : table()) names.push_back(entry.first);
    return names;
}

}  // namespace prenet::harness
