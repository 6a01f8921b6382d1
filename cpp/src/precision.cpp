#include "prenet/precision.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

#include "prenet/features.hpp"

namespace prenet {

namespace {

struct PrecisionName {
    Precision precision;
    const char* name;
};

constexpr PrecisionName kPrecisions[] = {
    {Precision::fp32, "fp32"}, {Precision::fp32_strict, "fp32_strict"}, {Precision::tf32, "tf32"},
    {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}};

// Parameters that a memory-bound kind's traffic grows in proportion to, whatever the others are.
const std::set<std::string> kTrafficSizes = {"batch", "seq_len", "channels", "features", "normalized_shape"};

bool two_byte(Precision precision) { return precision == Precision::bf16 || precision == Precision::fp16; }

}  // namespace

Precision parse_precision(std::string_view name) {
    std::string known;
    for (const auto& p : kPrecisions) {
        if (name == p.name) return p.precision;
        known += known.empty() ? p.name : std::string(", ") + p.name;
    }
    throw std::invalid_argument("unknown precision '" + std::string(name) + "'; known: " + known);
}

const char* to_string(Precision precision) {
    for (const auto& p : kPrecisions) {
        if (p.precision == precision) return p.name;
    }
    return "unknown";
}

double element_bytes(Precision precision) { return two_byte(precision) ? 2.0 : kFp32Bytes; }

Precision precision_within(const LayerKind& kind, Precision precision) {
    return kind.tensor_cores == TensorCores::cudnn && precision == Precision::fp32 ? Precision::tf32 : precision;
}

double matrix_tflops(const LayerKind& kind, const GpuSpec& gpu, Precision precision) {
    if (kind.tensor_cores == TensorCores::none || precision == Precision::fp32_strict) return gpu.fp32_tflops;
    precision = precision_within(kind, precision);
    if (precision == Precision::fp32) return gpu.fp32_tflops;
    if (precision == Precision::tf32) {  // TF32 where the GPU has it
        return gpu.tf32_tflops && *gpu.tf32_tflops > gpu.fp32_tflops ? *gpu.tf32_tflops : gpu.fp32_tflops;
    }
    const auto& rate = precision == Precision::bf16 ? gpu.bf16_tflops : gpu.fp16_tflops;
    if (!rate) {
        throw std::invalid_argument(gpu.name + " has no " + to_string(precision) +
                                    " rate in the catalog (the GPU does not support it); use " +
                                    (precision == Precision::bf16 && gpu.fp16_tflops ? "fp16 or fp32" : "fp32"));
    }
    return *rate;
}

bool on_tensor_cores(const LayerKind& kind, const GpuSpec& gpu, Precision precision) {
    if (kind.tensor_cores == TensorCores::none || precision == Precision::fp32_strict) return false;
    precision = precision_within(kind, precision);
    if (precision == Precision::fp32) return false;
    if (precision == Precision::tf32) return gpu.tf32_tflops.has_value();
    matrix_tflops(kind, gpu, precision);  // a 2-byte type the GPU lacks is refused by name
    return true;
}

double tensor_core_factor(const LayerConfig& config, const GpuSpec& gpu, Precision precision) {
    const LayerKind& kind = config.kind();
    if (kind.tensor_cores == TensorCores::none) return 1.0;
    const double tflops = matrix_tflops(kind, gpu, precision);
    const LayerCost fp32 = kind.cost(config, kFp32Bytes);
    const double fp32_bound = roofline_ms(fp32.forward_flops, fp32.forward_bytes, gpu);
    if (fp32_bound <= 0) return 1.0;
    const LayerCost narrow = kind.cost(config, element_bytes(precision));
    return roofline_ms(narrow.forward_flops, narrow.forward_bytes, tflops, gpu.memory_bandwidth_gbs) / fp32_bound;
}

LayerConfig narrowed(const LayerConfig& config, Precision precision) {
    const LayerKind& kind = config.kind();
    if (!two_byte(precision) || kind.tensor_cores != TensorCores::none) return config;
    std::vector<std::int64_t> values = config.values();
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (kTrafficSizes.count(kind.parameters[i].name) && values[i] >= 2) {
            values[i] = static_cast<std::int64_t>(std::ceil(values[i] * element_bytes(precision) / kFp32Bytes));
            break;
        }
    }
    return LayerConfig(kind, std::move(values));
}

}  // namespace prenet
