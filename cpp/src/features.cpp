#include "prenet/features.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace prenet {

namespace {

// Features shared by every kind, after the kind's own parameters and derived features.
const std::vector<std::string> kCommonFeatures = {
    "co", "mem_weights", "mem_input", "mem_output", "ct_ms",
    "params", "param_tensors", "forward_flops", "backward_flops", "forward_bytes", "backward_bytes",
    "forward_roofline_ms", "train_roofline_ms", "forward_kernel_bound_ms", "train_kernel_bound_ms",
    "backward_kernel_bound_ms",
    "gpu_fp32_tflops", "gpu_memory_bandwidth_gbs", "gpu_boost_clock_mhz", "gpu_cuda_cores",
    "gpu_sm_count", "gpu_memory_gb", "gpu_l2_cache_mb",
};

// cuBLAS's FP32 GEMM tiles (m x n), as its kernels' names give them (volta_sgemm_128x64_tn, ...): those NeuSight's
// linear layers ran on Pascal, Volta, Turing and Ampere.
constexpr std::array<std::array<int, 2>, 7> kSgemmTiles = {{{128, 128}, {128, 64}, {128, 32}, {64, 64}, {64, 32},
                                                            {32, 128}, {32, 32}}};

std::vector<double> gemm_feature_values(const GemmShape& g, const GpuSpec& gpu) {
    std::vector<double> values = {g.m, g.n, g.k};
    const double sms = static_cast<double>(gpu.sm_count);
    for (const auto& [tile_m, tile_n] : kSgemmTiles) {
        // thread blocks: one per output tile (tile quantization), run sms at a time (wave quantization)
        const double tiles_m = std::ceil(g.m / tile_m), tiles_n = std::ceil(g.n / tile_n);
        const double blocks = g.count * tiles_m * tiles_n;
        const double waves = blocks / sms;
        values.push_back(waves);
        values.push_back(blocks / (std::ceil(waves) * sms));  // the share of the waves' slots that work
        // tile quantization (NVIDIA's "Matrix Multiplication Background User's Guide"): the share of the tiles'
        // outputs that are the product's, the rest computed and thrown away at the edges
        values.push_back(g.m * g.n / (tiles_m * tile_m * tiles_n * tile_n));
    }
    return values;
}

}  // namespace

std::vector<std::string> gemm_feature_names(const LayerKind& kind) {
    if (!kind.gemm_shape) return {};
    std::vector<std::string> names = {"gemm_m", "gemm_n", "gemm_k"};
    for (const auto& [tile_m, tile_n] : kSgemmTiles) {
        const std::string tile = "tiles_" + std::to_string(tile_m) + "x" + std::to_string(tile_n);
        names.push_back(tile + "_waves");
        names.push_back(tile + "_filled");
        names.push_back(tile + "_useful");
    }
    return names;
}

std::vector<std::string> simd_feature_names(const LayerKind& kind) {
    if (!kind.vectorised_axis) return {};
    return {"simd_vectors", "simd_tail"};
}

// Roofline bound (Williams et al., 2009): the slower of compute at peak rate and traffic at peak bandwidth, in ms.
double roofline_ms(double flops, double bytes, double tflops, double bandwidth_gbs) {
    return 1e3 * std::max(flops / (tflops * 1e12), bytes / (bandwidth_gbs * 1e9));
}

double roofline_ms(double flops, double bytes, const GpuSpec& gpu) {
    return roofline_ms(flops, bytes, gpu.fp32_tflops, gpu.memory_bandwidth_gbs);
}

std::vector<std::string> feature_names(const LayerKind& kind) {
    std::vector<std::string> names;
    for (const auto& p : kind.parameters) names.push_back(p.name);
    names.insert(names.end(), kind.derived_names.begin(), kind.derived_names.end());
    names.insert(names.end(), kCommonFeatures.begin(), kCommonFeatures.end());
    const auto gemm = gemm_feature_names(kind);
    names.insert(names.end(), gemm.begin(), gemm.end());
    const auto simd = simd_feature_names(kind);
    names.insert(names.end(), simd.begin(), simd.end());
    return names;
}

std::vector<double> layer_feature_values(const LayerConfig& config, const GpuSpec& gpu, double bytes_per_element) {
    const LayerKind& kind = config.kind();
    std::vector<double> values(config.values().begin(), config.values().end());
    if (kind.derived_values) {
        const auto derived = kind.derived_values(config);
        values.insert(values.end(), derived.begin(), derived.end());
    }
    const LayerCost c = kind.cost(config, bytes_per_element);
    const double forward_roofline = roofline_ms(c.forward_flops, c.forward_bytes, gpu);
    const double backward_roofline = roofline_ms(c.backward_flops, c.backward_bytes, gpu);
    const double train_roofline = forward_roofline + backward_roofline;
    values.insert(values.end(), {
        c.paper_operations, c.memory_weights, c.memory_input, c.memory_output,
        1e3 * c.paper_operations / (gpu.fp32_tflops * 1e12),  // PreNeT eq. 9: CT = CO / GFLOPS(D), in ms
        c.parameters, c.parameter_tensors, c.forward_flops, c.backward_flops, c.forward_bytes, c.backward_bytes,
        forward_roofline,
        train_roofline,
        forward_roofline + kKernelStartupMs,
        train_roofline + kKernelStartupMs,
        backward_roofline + kKernelStartupMs,
        gpu.fp32_tflops, gpu.memory_bandwidth_gbs, gpu.boost_clock_mhz, static_cast<double>(gpu.cuda_cores),
        static_cast<double>(gpu.sm_count), gpu.memory_gb, gpu.l2_cache_mb,
    });
    if (kind.gemm_shape) {
        const auto gemm = gemm_feature_values(kind.gemm_shape(config), gpu);
        values.insert(values.end(), gemm.begin(), gemm.end());
    }
    if (kind.vectorised_axis) {
        const std::int64_t axis = config[*kind.vectorised_axis];
        values.push_back(static_cast<double>((axis + kSimdFloatLanes - 1) / kSimdFloatLanes));  // ceil(n / 8)
        values.push_back(static_cast<double>(axis % kSimdFloatLanes));
    }
    return values;
}

FeatureVector layer_features(const LayerConfig& config, const GpuSpec& gpu, double bytes_per_element) {
    const auto values = layer_feature_values(config, gpu, bytes_per_element);
    const auto names = feature_names(config.kind());
    FeatureVector features;
    features.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) features.emplace_back(names[i], values[i]);
    return features;
}

}  // namespace prenet
