// The hardware catalog: accelerator specifications from datasheets (data/gpus.csv).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace prenet {

struct GpuSpec {
    std::string name;                  // as torch.cuda.get_device_name() reports it
    std::vector<std::string> aliases;  // short names a person types ("V100", "H100 SXM")
    std::string vendor;
    std::string architecture;
    int year = 0;
    int sm_count = 0;        // streaming multiprocessors (compute units on AMD)
    int cuda_cores = 0;      // FP32 lanes
    double boost_clock_mhz = 0;
    double fp32_tflops = 0;  // peak FP32 on CUDA cores
    std::optional<double> tf32_tflops;  // dense tensor-core TF32; absent without tensor cores
    std::optional<double> fp16_tflops;  // dense FP16 matrix rate (tensor cores where present)
    std::optional<double> bf16_tflops;  // dense BF16 matrix rate; absent where unsupported
    double memory_gb = 0;
    std::string memory_type;
    double memory_bandwidth_gbs = 0;
    double l2_cache_mb = 0;
    std::string bus;
    std::string source;
};

class GpuCatalog {
public:
    // Parses the catalog CSV; throws std::runtime_error naming the file, line and column at fault.
    static GpuCatalog load_csv(const std::string& path);
    explicit GpuCatalog(std::vector<GpuSpec> gpus);

    // Case-insensitive lookup by name, alias or torch's device name; throws std::invalid_argument
    // naming the closest known GPUs.
    const GpuSpec& find(std::string_view name) const;
    // The canonical names closest to `name`, nearest first.
    std::vector<std::string> closest(std::string_view name, std::size_t count) const;
    // Which of `candidates` (names find accepts) is the device nearest `gpu` in specifications (spec_distance; the
    // first of equals): its index, none where there are no candidates. Throws as find on a name it lacks.
    std::optional<std::size_t> nearest(const GpuSpec& gpu, const std::vector<std::string>& candidates) const;
    const std::vector<GpuSpec>& gpus() const { return gpus_; }

private:
    std::vector<GpuSpec> gpus_;
    std::unordered_map<std::string, std::size_t> keys_;  // normalised name or alias -> index in gpus_
};

// A specification two devices are compared in: its GpuSpec field's name and value.
struct DistanceSpec {
    std::string_view name;
    double (*value)(const GpuSpec&);
};
inline constexpr std::array<DistanceSpec, 4> kDistanceSpecs = {{
    {"fp32_tflops", [](const GpuSpec& g) { return g.fp32_tflops; }},
    {"memory_bandwidth_gbs", [](const GpuSpec& g) { return g.memory_bandwidth_gbs; }},
    {"sm_count", [](const GpuSpec& g) { return static_cast<double>(g.sm_count); }},
    {"l2_cache_mb", [](const GpuSpec& g) { return g.l2_cache_mb; }},
}};
// How far apart two devices are: the root-mean-square of the logarithms of their kDistanceSpecs' ratios (0: alike;
// 0.69: every one off by a factor 2; log scale, as ratios, not differences, set how a kernel's time moves).
double spec_distance(const GpuSpec& a, const GpuSpec& b);

// Whether `device` is a host CPU of data/hosts.csv (the CPUs our own layer data was measured on: bus "host"),
// not a GPU.
bool is_host_cpu(const GpuSpec& device);

// Lower-case letters and digits of a GPU name with vendor words ("NVIDIA", "Tesla", "GeForce", ...) removed.
std::string normalise_gpu_name(std::string_view name);

}  // namespace prenet
