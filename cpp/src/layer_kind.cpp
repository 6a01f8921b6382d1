#include "prenet/layer_kind.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "kinds/kinds.hpp"

namespace prenet {

LayerConfig::LayerConfig(const LayerKind& kind, std::vector<std::int64_t> values)
    : kind_(&kind), values_(std::move(values)) {
    if (values_.size() != kind.parameters.size()) {
        throw std::logic_error("LayerConfig for '" + kind.name + "' has the wrong number of values");
    }
}

std::int64_t LayerConfig::operator[](std::string_view name) const {
    return values_[kind_->parameter_index(name)];
}

std::size_t LayerKind::parameter_index(std::string_view key) const {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
        if (parameters[i].name == key) return i;
    }
    throw std::logic_error("layer kind '" + name + "' has no parameter '" + std::string(key) + "'");
}

LayerConfig LayerKind::configure(const std::map<std::string, std::int64_t>& given) const {
    for (const auto& [key, value] : given) {
        bool known = std::any_of(parameters.begin(), parameters.end(),
                                 [&](const ParameterSpec& p) { return p.name == key; });
        if (!known) {
            std::string msg = "unknown key '" + key + "' for layer kind '" + name + "'; accepted keys:";
            for (const auto& p : parameters) msg += " " + p.name;
            throw std::invalid_argument(msg);
        }
    }
    std::vector<std::int64_t> values;
    values.reserve(parameters.size());
    for (const auto& p : parameters) {
        auto it = given.find(p.name);
        if (it == given.end()) {
            if (!p.default_value) {
                throw std::invalid_argument("layer kind '" + name + "' needs '" + p.name + "' (" +
                                            p.description + ")");
            }
            values.push_back(*p.default_value);
            continue;
        }
        if (it->second < p.min_value || it->second > p.max_value) {
            throw std::invalid_argument(name + ": " + p.name + " = " + std::to_string(it->second) +
                                        " is out of range; accepted: " + std::to_string(p.min_value) + " to " +
                                        std::to_string(p.max_value));
        }
        values.push_back(it->second);
    }
    LayerConfig config(*this, std::move(values));
    if (validate) validate(config);
    return config;
}

const std::vector<LayerKind>& layer_kinds() {
    static const std::vector<LayerKind> table = {
        kinds::make_linear(),
        kinds::make_conv2d(),
        kinds::make_convolution(),
        kinds::make_recurrent(kinds::Recurrence::rnn),
        kinds::make_recurrent(kinds::Recurrence::lstm),
        kinds::make_recurrent(kinds::Recurrence::gru),
        kinds::make_multihead_attention(),
        kinds::make_embedding(),
        kinds::make_layer_norm(),
        kinds::make_batchnorm2d(),
        kinds::make_maxpool2d(),
        kinds::make_avgpool2d(),
        kinds::make_pointwise(kinds::Pointwise::relu),
        kinds::make_pointwise(kinds::Pointwise::gelu),
        kinds::make_pointwise(kinds::Pointwise::tanh),
        kinds::make_pointwise(kinds::Pointwise::sigmoid),
        kinds::make_pointwise(kinds::Pointwise::silu),
        kinds::make_pointwise(kinds::Pointwise::softmax),
        kinds::make_pointwise(kinds::Pointwise::add),
        kinds::make_bmm(),
    };
    return table;
}

const LayerKind& find_layer_kind(std::string_view name) {
    std::string lowered(name);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& kind : layer_kinds()) {
        if (kind.name == lowered) return kind;
    }
    std::string msg = "unknown layer kind '" + std::string(name) + "'; known kinds:";
    for (const auto& kind : layer_kinds()) msg += " " + kind.name;
    throw std::invalid_argument(msg);
}

}  // namespace prenet
