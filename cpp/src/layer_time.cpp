#include "prenet/layer_time.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "prenet/features.hpp"
#include "prenet/optimizer.hpp"
#include "kinds/kinds.hpp"
#include "prenet/precision.hpp"

namespace prenet {

const char* to_string(TimeBasis basis) {
    switch (basis) {
        case TimeBasis::exact: return "exact";
        case TimeBasis::predicted: return "predicted";
        case TimeBasis::kernels: return "kernels";
        case TimeBasis::roofline: return "roofline";
    }
    return "unknown";
}

namespace {

enum Part { kForward, kStepForward, kBackward, kOptimizer };

// Where a partial time goes: which layer, which part, with what weight, and the weakest basis on the way; a
// scratch row holds one alternative of a choice (see Planner::leaf) until the choice is made.
struct Destination {
    std::size_t row;
    Part part;
    double weight;
    TimeBasis basis;
    bool scratch = false;
};

// Two scratch rows' forward times made one, sent to `to`: the faster of a kernel timed two ways (a choice), a
// predictor's ratio times the composition it is over (a product), or the slower of a composition and a bound
// below which no kernel can run (a floor).
enum class Combine { faster, product, slower };
struct Combination {
    Destination to;
    std::size_t first, second;  // scratch rows
    Combine how;
};

// Guards against a kind table whose kernels refer back to themselves.
constexpr int kMaxDepth = 8;
// The catalog's l2_cache_mb in bytes (MiB, as NVIDIA's datasheets count cache).
constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// The bundle's mode of a layer's forward pass timed inside training steps (prenet.training.MODES).
const std::string kTrainForward = "train_forward";

class Planner {
public:
    Planner(const PredictorBundle& bundle, const GpuSpec& gpu, const std::string& optimizer,
            std::vector<LayerTime>& out, const IssueGaps& issue_gap_ms, double implicit_gemm_overhead = 1.0)
        : bundle_(bundle),
          gpu_(gpu),
          optimizer_(optimizer),
          out_(out),
          issue_gap_ms_(issue_gap_ms),
          implicit_gemm_overhead_(implicit_gemm_overhead) {}

    // A composite kind without a predictor of its own runs its forward_kernels; any other is a leaf, timed in the
    // step's precision: a memory-bound kind as its narrowed configuration, a tensor-core kind on its roofline's
    // share at the precision's rate (prenet/precision.hpp).
    // On a GPU, a layer whose bias a kernel of its own adds (gpu_bias_kernels) is timed without it, then that kernel.
    void forward(const LayerConfig& c, Destination d, Precision precision) {
        const auto bias_kernels = c.kind().gpu_bias_kernels && !is_host_cpu(gpu_) ? c.kind().gpu_bias_kernels(c)
                                                                                  : std::vector<KernelWork>{};
        forward_in(bias_kernels.empty() ? c : without_bias(c), d, 0, precision);
        for (const auto& k : bias_kernels) forward_in(configure(k), scaled(d, k.count), 1, precision);
    }

    void backward(const LayerConfig& c, Destination d, Precision precision) { backward_in(c, d, 0, precision); }

    // The forward pass inside a training step, where the bundle has a predictor of it for `c` (its kind's
    // "train_forward", `c` within the fitted range); false where it has none, the step's forward then being the
    // forward alone.
    bool step_forward(const LayerConfig& c, Destination d, Precision precision) {
        const Predictor* predictor = own(c.kind(), kTrainForward);
        if (!predictor || unfitted(c)) return false;
        if (predictor->over_kernels()) {
            over_composition(c, kTrainForward, d, precision);
            return true;
        }
        const LayerConfig kernel = narrowed(c, precision);
        d.weight *= tensor_core_factor(kernel, gpu_, precision);
        queue(kernel, kTrainForward, d);
        return true;
    }

    void optimizer_step(const LayerConfig& c, Destination d) {
        if (const Predictor* predictor = own(c.kind(), "optimizer")) {
            return predictor->over_kernels() ? over_composition(c, "optimizer", d, Precision::fp32)
                                             : queue(c, "optimizer", d);
        }
        const LayerCost cost = c.kind().cost(c, kFp32Bytes);
        if (cost.parameters <= 0 || cost.parameter_tensors <= 0) return;
        update(cost.parameters / cost.parameter_tensors, scaled(d, cost.parameter_tensors));
    }

    // One tensor's update runs kernels_per_tensor kernels that together make element_passes passes over it: as
    // many add-shaped kernels, each sized to its share of the traffic (an add makes 3 passes). Parameters, their
    // gradients and the optimizer's state stay in fp32 under autocast.
    void update(double elements, Destination d) {
        const OptimizerSpec& spec = find_optimizer(optimizer_);
        const double share = elements * spec.element_passes / (kinds::kBinaryElementPasses * spec.kernels_per_tensor);
        const LayerConfig kernel = configure(kinds::streaming_add(share));
        forward_in(kernel, scaled(d, spec.kernels_per_tensor), 1, Precision::fp32);
    }

    // A kind whose predictor in `mode` learned its time over the composition of its kernels (kOverKernels): that
    // ratio, predicted for `c` as measured, times the composition in `precision`, planned as though the bundle had
    // no predictor of the kind (as prenet.fit composed it). "train" composes the step: forward, backward, update.
    void over_composition(const LayerConfig& c, const std::string& mode, Destination d, Precision precision) {
        const std::size_t ratio = scratch_.size(), composition = ratio + 1;
        scratch_.resize(ratio + 2);
        queue(c, mode, {ratio, kForward, 1.0, TimeBasis::predicted, true});
        const Destination to{composition, kForward, 1.0, TimeBasis::predicted, true};
        hidden_.push_back(&c.kind());
        if (mode == "forward" || mode == kTrainForward || mode == "train") forward(c, to, precision);
        if (mode == "backward" || mode == "train") backward_in(c, to, 0, precision);
        if (mode == "optimizer" || mode == "train") optimizer_step(c, to);
        hidden_.pop_back();
        combinations_.push_back({d, ratio, composition, Combine::product});
    }

    // Runs the queued predictions, one batch per (kind, mode), then makes the combinations, the latest first (a
    // combination's rows may hold later ones: a kernel of a composition timed two ways).
    void flush() {
        for (auto& [key, batch] : batches_) {
            if (bundle_.predictor(key.first, key.second).over_kernels()) {  // ratios, for products
                const auto ratios = bundle_.predict_ratio(key.first, key.second, batch.configs, gpu_, optimizer_);
                for (std::size_t i = 0; i < ratios.size(); ++i) {
                    for (const Destination& d : batch.destinations[i]) {
                        if (!d.scratch) throw std::logic_error("a ratio over kernels queued as a time: " + key.first);
                        add(d, TimeBasis::predicted, ratios[i]);
                    }
                }
                continue;
            }
            const std::size_t queued = batch.configs.size();
            // each streaming kernel below one wave, then its bound: the same kernel filling the wave (one_wave)
            std::vector<std::optional<std::size_t>> wave_row(queued);
            if (key.second == "forward") {
                for (std::size_t i = 0; i < queued; ++i) {
                    if (auto wave = one_wave(batch.configs[i])) {
                        const auto [at, added] = batch.row_of.try_emplace(wave->values(), batch.configs.size());
                        if (added) batch.configs.push_back(std::move(*wave));
                        wave_row[i] = at->second;
                    }
                }
            }
            const auto ms = bundle_.predict_ms(key.first, key.second, batch.configs, gpu_, optimizer_);
            const auto gap = issue_gap_ms_.find(key.first);
            const double gap_ms = gap == issue_gap_ms_.end() ? 0.0 : gap->second;
            for (std::size_t i = 0; i < queued; ++i) {
                const double own = wave_row[i] ? std::min(ms[i], ms[*wave_row[i]]) : ms[i];
                const double predicted = std::max(own, least_ms(batch.configs[i], key.second));
                const double device_ms = std::max(predicted - gap_ms, floor_ms(batch.configs[i]));
                for (const Destination& d : batch.destinations[i]) {
                    add(d, TimeBasis::predicted, std::min(predicted, device_ms));
                }
            }
        }
        batches_.clear();
        for (auto c = combinations_.rbegin(); c != combinations_.rend(); ++c) {
            const LayerTime& a = scratch_[c->first];
            const LayerTime& b = scratch_[c->second];
            if (c->how == Combine::product) {
                add(c->to, TimeBasis::predicted, a.forward_ms * b.forward_ms);
                continue;
            }
            const bool first = c->how == Combine::faster ? a.forward_ms <= b.forward_ms : a.forward_ms >= b.forward_ms;
            const LayerTime& chosen = first ? a : b;
            add(c->to, chosen.forward_basis, chosen.forward_ms);
        }
        combinations_.clear();
        scratch_.clear();
    }

private:
    static LayerConfig configure(const KernelWork& k) { return find_layer_kind(k.kind).configure(k.config); }
    static LayerConfig without_bias(const LayerConfig& c) {
        std::vector<std::int64_t> values = c.values();
        values[c.kind().parameter_index("bias")] = 0;
        return LayerConfig(c.kind(), std::move(values));
    }
    // The precision a kernel's traffic is timed in: fp32 for integer traffic a 2-byte step does not narrow.
    static Precision width(const KernelWork& k, Precision precision) {
        return k.full_width ? Precision::fp32 : precision;
    }

    // A kind without a predictor that has kernels of its own for tensor cores (a convolution as its implicit
    // GEMM) is a leaf there, so that the faster of those and its CUDA-core kernels is taken.
    void forward_in(const LayerConfig& c, Destination d, int depth, Precision precision) {
        const LayerKind& kind = c.kind();
        const Predictor* predictor = own(kind, "forward");
        if (predictor && predictor->over_kernels()) return over_composition(c, "forward", d, precision);
        if (!predictor && kind.forward_kernels && depth < kMaxDepth &&
            !(kind.tensor_core_kernels && on_tensor_cores(kind, gpu_, precision))) {
            expand(c, d, depth, precision);
            return;
        }
        leaf(c, "forward", d, precision);
    }

    void backward_in(const LayerConfig& c, Destination d, int depth, Precision precision) {
        const LayerKind& kind = c.kind();
        if (const Predictor* predictor = own(kind, "backward")) {
            return predictor->over_kernels() ? over_composition(c, "backward", d, precision)
                                             : leaf(c, "backward", d, precision);
        }
        if (kind.backward_kernels) {
            for (const auto& k : kind.backward_kernels(c)) {
                forward_in(configure(k), scaled(d, k.count), depth + 1, width(k, precision_within(kind, precision)));
            }
        } else if (kind.forward_kernels && depth < kMaxDepth) {
            for (const auto& k : kind.forward_kernels(c)) {
                backward_in(configure(k), scaled(d, k.count), depth + 1, width(k, precision_within(kind, precision)));
            }
        } else {
            // A memory-bound kind: its backward moves backward_bytes where its forward moves forward_bytes.
            const LayerCost cost = kind.cost(c, kFp32Bytes);
            if (cost.forward_bytes > 0 && cost.backward_bytes > 0) {
                forward_in(c, scaled(d, cost.backward_bytes / cost.forward_bytes), depth + 1, precision);
            }
        }
    }

    void expand(const LayerConfig& c, Destination d, int depth, Precision precision) {
        for (const auto& k : c.kind().forward_kernels(c)) {
            forward_in(configure(k), scaled(d, k.count), depth + 1, width(k, precision_within(c.kind(), precision)));
        }
    }

    // On a GPU, a streaming kernel (LayerKind::streaming_rows) with fewer elements than one wave of the device's
    // resident threads, with its batch raised to fill that wave; else nothing.
    std::optional<LayerConfig> one_wave(const LayerConfig& c) const {
        const LayerKind& kind = c.kind();
        if (!kind.streaming_rows || is_host_cpu(gpu_)) return std::nullopt;
        const double elements = kind.cost(c, kFp32Bytes).memory_output;
        const double wave = kElementsPerWaveSm * gpu_.sm_count;
        if (elements <= 0 || elements >= wave) return std::nullopt;
        std::vector<std::int64_t> values = c.values();
        const std::size_t batch = kind.parameter_index("batch");
        const double per_sample = elements / static_cast<double>(values[batch]);
        values[batch] = std::min(static_cast<std::int64_t>(std::ceil(wave / per_sample)),
                                 kind.parameters[batch].max_value);
        if (values[batch] <= c.values()[batch]) return std::nullopt;
        return LayerConfig(kind, std::move(values));
    }

    // The least a predicted mode of a kind whose FLOPs no algorithm undercuts can take: those FLOPs at the
    // device's fp32 peak (the compute side of the roofline, Williams et al., 2009); 0 for any other.
    double least_ms(const LayerConfig& c, const std::string& mode) const {
        if (!c.kind().flops_bound_time) return 0.0;
        const LayerCost cost = c.kind().cost(c, kFp32Bytes);
        const double flops = mode == "forward" || mode == kTrainForward ? cost.forward_flops
                             : mode == "backward" ? cost.backward_flops
                             : mode == "train" ? cost.forward_flops + cost.backward_flops : 0.0;
        return roofline_ms(flops, 0.0, gpu_);
    }

    // The least a kernel can take on the device: its roofline bound (Williams et al., 2009).
    double floor_ms(const LayerConfig& c) const {
        const LayerCost cost = c.kind().cost(c, kFp32Bytes);
        return roofline_ms(cost.forward_flops, cost.forward_bytes, gpu_);
    }

    // A leaf kernel in the step's precision. On tensor cores, a kind with tensor_core_kernels runs the faster of
    // those and its CUDA-core kernel as predicted (cuDNN's heuristics pick among the algorithms the precision
    // allows, and TF32 allows both; a tensor-core kernel's transposes can outweigh its faster rate). A layer its
    // predictor meets beyond its data in a parameter it has other kernels for runs those (unfitted).
    void leaf(const LayerConfig& c, const std::string& mode, Destination d, Precision precision) {
        if (mode == "forward" && unfitted(c)) {
            if (is_host_cpu(gpu_)) return unfitted_kernels(c, d, precision);
            // On a GPU, no faster than the layer's own tensors moving through DRAM (dram_floor_ms): the kernels
            // it is timed as (a grouped convolution's block-diagonal implicit GEMM) count other bytes.
            const std::size_t first = scratch_.size();
            scratch_.resize(first + 2);
            unfitted_kernels(c, {first, kForward, 1.0, TimeBasis::predicted, true}, precision);
            add({first + 1, kForward, 1.0, TimeBasis::roofline, true}, TimeBasis::roofline,
                dram_floor_ms(c, precision));
            combinations_.push_back({d, first, first + 1, Combine::slower});
            return;
        }
        const LayerConfig kernel = narrowed(c, precision);
        const double factor = tensor_core_factor(kernel, gpu_, precision);
        if (mode == "forward" && kernel.kind().tensor_core_kernels &&
            on_tensor_cores(kernel.kind(), gpu_, precision)) {
            const auto works = kernel.kind().tensor_core_kernels(kernel);
            if (!works.empty()) {
                const std::size_t first = scratch_.size();
                scratch_.resize(first + 2);
                tensor_core_work(works, {first, kForward, 1.0, TimeBasis::predicted, true}, factor, precision);
                timed(kernel, mode, {first + 1, kForward, 1.0, TimeBasis::predicted, true});
                combinations_.push_back({d, first, first + 1, Combine::faster});
                return;
            }
        }
        d.weight *= factor;
        timed(kernel, mode, d);
    }

    void unfitted_kernels(const LayerConfig& c, Destination d, Precision precision) {
        for (const auto& k : c.kind().unfitted_kernels(c)) forward_in(configure(k), scaled(d, k.count), 1, precision);
    }

    // The least time a GPU kernel moving the forward bytes of `c`'s tensors in `precision` can take: the part no L2
    // cache can hold read or written at the memory's peak bandwidth (the roofline's memory side, Williams et al.,
    // 2009, with what the last-level cache may keep from the kernels before taken off).
    double dram_floor_ms(const LayerConfig& c, Precision precision) const {
        const double bytes = c.kind().cost(c, element_bytes(precision)).forward_bytes;
        return roofline_ms(0.0, std::max(0.0, bytes - gpu_.l2_cache_mb * kBytesPerMiB), gpu_);
    }

    // Whether the bundle's predictor of `c`'s kind was fitted on a range of one of its unfitted_parameters that
    // `c` lies beyond (LayerKind::unfitted_kernels).
    bool unfitted(const LayerConfig& c) const {
        return c.kind().unfitted_kernels &&
               beyond_fitted(c, bundle_.fitted_ranges(c.kind().name), c.kind().unfitted_parameters);
    }

    // Products at their CUDA-core time moved to the layer's tensor-core rate (`factor`), and by what cuDNN's
    // implicit GEMM takes over the product on this GPU (PredictorBundle::implicit_gemm_overhead); the rest is traffic.
    void tensor_core_work(const std::vector<KernelWork>& works, Destination d, double factor, Precision precision) {
        for (const auto& k : works) {
            const LayerConfig kernel = configure(k);
            Destination part = scaled(d, k.count);
            if (kernel.kind().tensor_cores == TensorCores::none) {
                forward_in(kernel, part, kMaxDepth, precision);
                continue;
            }
            part.weight *= factor * implicit_gemm_overhead_;
            timed(kernel, "forward", part);
        }
    }

    // Predicted where the bundle has the mode; else, forward, its CUDA-core kernels; else its roofline bound.
    void timed(const LayerConfig& kernel, const std::string& mode, Destination d) {
        if (own(kernel.kind(), mode)) return queue(kernel, mode, d);
        if (mode == "forward" && kernel.kind().forward_kernels) return expand(kernel, d, 1, Precision::fp32_strict);
        const LayerCost cost = kernel.kind().cost(kernel, kFp32Bytes);
        add(d, TimeBasis::roofline, roofline_ms(cost.forward_flops, cost.forward_bytes, gpu_));
    }

    // The bundle's predictor of the kind in `mode`, nullptr where it has none or the kind is hidden
    // (over_composition).
    const Predictor* own(const LayerKind& kind, const std::string& mode) const {
        if (std::find(hidden_.begin(), hidden_.end(), &kind) != hidden_.end()) return nullptr;
        return bundle_.find(kind.name, mode);
    }

    static Destination scaled(Destination d, double factor) {
        d.weight *= factor;
        d.basis = std::max(d.basis, TimeBasis::kernels);
        return d;
    }

    // A configuration queued again (a model repeats its blocks; backward kernels and transposes repeat shapes)
    // is predicted once, its time going to every destination.
    void queue(const LayerConfig& c, const std::string& mode, const Destination& d) {
        Batch& batch = batches_[{c.kind().name, mode}];
        const auto [at, added] = batch.row_of.try_emplace(c.values(), batch.configs.size());
        if (added) {
            batch.configs.push_back(c);
            batch.destinations.emplace_back();
        }
        batch.destinations[at->second].push_back(d);
    }

    void add(const Destination& d, TimeBasis basis, double ms) {
        LayerTime& t = d.scratch ? scratch_[d.row] : out_[d.row];
        const TimeBasis b = std::max(d.basis, basis);
        switch (d.part) {
            case kForward: t.forward_ms += d.weight * ms; t.forward_basis = std::max(t.forward_basis, b); break;
            case kStepForward:
                t.step_forward_ms += d.weight * ms;
                t.step_forward_basis = std::max(t.step_forward_basis, b);
                break;
            case kBackward: t.backward_ms += d.weight * ms; t.backward_basis = std::max(t.backward_basis, b); break;
            case kOptimizer: t.optimizer_ms += d.weight * ms; t.optimizer_basis = std::max(t.optimizer_basis, b); break;
        }
    }

    const PredictorBundle& bundle_;
    const GpuSpec& gpu_;
    const std::string& optimizer_;
    std::vector<LayerTime>& out_;
    const IssueGaps& issue_gap_ms_;
    const double implicit_gemm_overhead_;
    // The distinct configurations of one (kind, mode) to predict, and where each one's time goes.
    struct Batch {
        std::vector<LayerConfig> configs;
        std::vector<std::vector<Destination>> destinations;
        std::map<std::vector<std::int64_t>, std::size_t> row_of;
    };
    std::map<std::pair<std::string, std::string>, Batch> batches_;
    std::vector<LayerTime> scratch_;
    std::vector<Combination> combinations_;
    std::vector<const LayerKind*> hidden_;  // kinds whose predictors a composition is planned without
};

}  // namespace

std::vector<LayerTime> estimate_layer_times(const PredictorBundle& bundle, const std::vector<LayerConfig>& configs,
                                            const GpuSpec& gpu, const std::string& optimizer,
                                            Precision precision, const IssueGaps& issue_gap_ms,
                                            double implicit_gemm_overhead) {
    return estimate_layer_times_with_cuda_core(bundle, configs, gpu, optimizer, precision, issue_gap_ms, false,
                                               implicit_gemm_overhead)
        .first;
}

std::pair<std::vector<LayerTime>, std::vector<LayerTime>> estimate_layer_times_with_cuda_core(
    const PredictorBundle& bundle, const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
    const std::string& optimizer, Precision precision, const IssueGaps& issue_gap_ms, bool with_cuda_core,
    double implicit_gemm_overhead) {
    find_optimizer(optimizer);  // an unknown name fails before any work
    const std::size_t n = configs.size();
    // rows [0, n): in `precision`; rows [n, 2n): on CUDA cores, planned where `precision` puts the layer on
    // tensor cores
    std::vector<LayerTime> out(with_cuda_core ? 2 * n : n);
    std::vector<bool> on_cuda_cores(n, true);
    std::vector<bool> own_step_forward(out.size(), false);  // rows whose step forward has a predictor of its own
    Planner planner(bundle, gpu, optimizer, out, issue_gap_ms, implicit_gemm_overhead);
    const auto plan = [&](const LayerConfig& c, std::size_t row, Precision p) {
        planner.forward(c, {row, kForward, 1.0, TimeBasis::predicted}, p);
        own_step_forward[row] = planner.step_forward(c, {row, kStepForward, 1.0, TimeBasis::predicted}, p);
        planner.backward(c, {row, kBackward, 1.0, TimeBasis::predicted}, p);
        planner.optimizer_step(c, {row, kOptimizer, 1.0, TimeBasis::predicted});
    };
    for (std::size_t row = 0; row < n; ++row) {
        plan(configs[row], row, precision);
        if (with_cuda_core && tensor_core_factor(configs[row], gpu, precision) < 1.0) {
            on_cuda_cores[row] = false;
            plan(configs[row], n + row, Precision::fp32_strict);
        }
    }
    planner.flush();
    for (std::size_t row = 0; row < out.size(); ++row) {
        if (!own_step_forward[row]) {
            out[row].step_forward_ms = out[row].forward_ms;
            out[row].step_forward_basis = out[row].forward_basis;
        }
    }
    std::vector<LayerTime> cuda_core;
    if (with_cuda_core) {
        cuda_core.assign(out.begin() + static_cast<std::ptrdiff_t>(n), out.end());
        out.resize(n);
        for (std::size_t row = 0; row < n; ++row) {
            if (on_cuda_cores[row]) cuda_core[row] = out[row];
        }
    }
    return {std::move(out), std::move(cuda_core)};
}

std::vector<double> predict_mode_ms(const PredictorBundle& bundle, const std::string& mode,
                                    const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                    const std::string& optimizer) {
    if (configs.empty()) return {};
    const std::string& kind = configs.front().kind().name;
    if (!bundle.predictor(kind, mode).over_kernels()) return bundle.predict_ms(kind, mode, configs, gpu, optimizer);
    find_optimizer(optimizer);
    std::vector<LayerTime> out(configs.size());
    const IssueGaps none;
    Planner planner(bundle, gpu, optimizer, out, none);
    for (std::size_t row = 0; row < configs.size(); ++row) {
        if (&configs[row].kind() != &configs.front().kind()) {
            throw std::invalid_argument("predict_mode_ms: configurations of different kinds in one call");
        }
        planner.over_composition(configs[row], mode, {row, kForward, 1.0, TimeBasis::predicted}, Precision::fp32);
    }
    planner.flush();
    std::vector<double> ms;
    for (const auto& t : out) ms.push_back(t.forward_ms);
    return ms;
}

std::vector<LayerTime> estimate_update_times(const PredictorBundle& bundle, const std::vector<double>& tensor_elements,
                                             const GpuSpec& gpu, const std::string& optimizer,
                                             const IssueGaps& issue_gap_ms) {
    find_optimizer(optimizer);
    std::vector<LayerTime> out(tensor_elements.size());
    Planner planner(bundle, gpu, optimizer, out, issue_gap_ms);
    for (std::size_t row = 0; row < tensor_elements.size(); ++row) {
        if (tensor_elements[row] > 0) {
            planner.update(tensor_elements[row], {row, kOptimizer, 1.0, TimeBasis::predicted});
        }
    }
    planner.flush();
    return out;
}

}  // namespace prenet
