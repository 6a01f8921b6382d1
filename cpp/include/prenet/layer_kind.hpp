// The table of layer kinds: one entry per kind drives validation, feature extraction,
// the Python API and the generated documentation (docs/layer_kinds.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prenet {

// One configuration key of a layer kind, named as PyTorch names it.
struct ParameterSpec {
    std::string name;
    std::int64_t min_value;
    std::int64_t max_value;
    std::optional<std::int64_t> default_value;  // absent: the key is required
    std::string description;
};

class LayerKind;

// Which tensor cores a kind's products may run on: none; cuBLAS's (matmul: full fp32 by PyTorch's default); cuDNN's
// (convolutions and recurrent layers: TF32 by PyTorch's default in fp32, torch.backends.cudnn.allow_tf32).
enum class TensorCores { none, matmul, cudnn };

// A kernel of some layer kind and configuration that stands for part of another layer's work, `count` times
// (the backward pass as forward kernels of known shapes; a composite layer as its parts).
struct KernelWork {
    std::string kind;
    std::map<std::string, std::int64_t> config;
    double count = 1;
    // Integer traffic (max pooling's int64 indices) that a 2-byte precision leaves at its width: timed in fp32.
    bool full_width = false;
};

// The resolved configuration of one layer: every parameter of its kind, in table order.
class LayerConfig {
public:
    LayerConfig(const LayerKind& kind, std::vector<std::int64_t> values);
    std::int64_t operator[](std::string_view name) const;  // throws std::logic_error on a name the kind lacks
    const LayerKind& kind() const { return *kind_; }
    const std::vector<std::int64_t>& values() const { return values_; }

private:
    const LayerKind* kind_;
    std::vector<std::int64_t> values_;
};

// What one layer costs: the paper's approximations beside exact counts for a training step.
// Counts of elements and operations; bytes assume `bytes_per_element` for floating tensors.
struct LayerCost {
    double paper_operations = 0;   // CO, PreNeT eqs. 2-8
    double memory_weights = 0;     // PreNeT eq. 10 (elements)
    double memory_input = 0;       // PreNeT eq. 11 (elements)
    double memory_output = 0;      // PreNeT eq. 12 (elements)
    double parameters = 0;         // trainable parameters (elements)
    double parameter_tensors = 0;  // trainable tensors (weight, bias, ...): the optimizer updates each one
    double forward_flops = 0;      // exact floating-point operations of the forward pass
    double backward_flops = 0;     // input and weight gradients
    double forward_bytes = 0;      // bytes read and written by the forward kernels
    double backward_bytes = 0;     // bytes read and written by the backward kernels
};

// A matrix product in cuBLAS's column-major terms: C (m x n) = A (m x k) B (k x n), `count` of them as a batched
// product runs them.
struct GemmShape {
    double m = 0, n = 0, k = 0, count = 1;
};

class LayerKind {
public:
    std::string name;          // PyTorch-style name: "conv2d", "lstm", ...
    std::string paper_name;    // the PreNeT paper's name for the kind
    std::string description;
    std::vector<ParameterSpec> parameters;
    // Two parameters whose product alone sets the layer's work (rows of a matrix or of a normalisation, however
    // they divide into samples and tokens): a predictor sees them re-split within the ranges it was fitted on
    // (prenet/fitted_range.hpp). Absent: every parameter counts on its own.
    std::optional<std::pair<std::string, std::string>> row_parameters;
    // The parameter that is the contiguous last axis its kernels reduce along in SIMD vectors (softmax's features,
    // layer norm's normalized_shape): its full vectors and its tail are features (prenet/features.hpp). Absent:
    // none.
    std::optional<std::string> vectorised_axis;
    // Whether its kernels stream rows that do not depend on one another (elementwise operators, softmax, layer
    // norm), with a "batch" parameter: fewer rows are no more work, so on a GPU a kernel smaller than one wave of
    // the device's resident threads is timed at most as the same kernel filling that wave (prenet/layer_time.hpp).
    bool streaming_rows = false;
    // Checks relations between parameters; throws std::invalid_argument naming the problem.
    std::function<void(const LayerConfig&)> validate;
    // Layer-specific features derived from the parameters (e.g. a convolution's output height).
    std::vector<std::string> derived_names;
    std::function<std::vector<double>(const LayerConfig&)> derived_values;
    std::function<LayerCost(const LayerConfig&, double bytes_per_element)> cost;
    // The forward pass as kernels of other kinds, used where no predictor covers this kind (attention as
    // projections, batched products and a softmax; an activation as one of the same memory traffic).
    // Empty function: a primitive kind, predicted directly or bounded by its roofline.
    std::function<std::vector<KernelWork>(const LayerConfig&)> forward_kernels;
    // The backward pass (input and weight gradients) as forward kernels of known shapes.
    // Empty function: the backward passes of forward_kernels.
    std::function<std::vector<KernelWork>(const LayerConfig&)> backward_kernels;
    // Whether its kernels are matrix products that tensor cores run (see prenet/precision.hpp): cuDNN's
    // convolutions and recurrent layers (TF32 by default in fp32) or matmuls (full fp32 by default); all of them
    // in bf16 and fp16.
    TensorCores tensor_cores = TensorCores::none;
    // Whether no algorithm does less arithmetic than the cost's FLOPs (plain matrix products), so that a predicted
    // time below them at the device's fp32 peak rate is impossible and is raised to that bound. Not a convolution:
    // cuDNN's Winograd and FFT algorithms multiply less (the NeuSight set times some at half the bound).
    bool flops_bound_time = false;
    // What the layer runs where it is on tensor cores, if that is not the CUDA-core work its predictor learned
    // (empty function or result: its own prediction moved to the tensor-core rate). Entries of a matrix kind are
    // timed at their CUDA-core efficiency and moved to this layer's tensor-core rate; the others are memory
    // traffic in the step's precision. A convolution: an implicit GEMM and layout transposes (conv2d.cpp).
    std::function<std::vector<KernelWork>(const LayerConfig&)> tensor_core_kernels;
    // Kernels a GPU runs after the layer's own in its forward pass: where cuDNN runs a convolution, PyTorch adds the
    // bias in a kernel of its own (aten/src/ATen/native/Convolution.cpp, the cuDNN backend: output.add_(bias)),
    // which the CPU's oneDNN fuses into the convolution and the GPU data timed none of (no bias). Where there are
    // any, a GPU's layer is timed with its "bias" parameter 0, then these. Empty function or result: none.
    std::function<std::vector<KernelWork>(const LayerConfig&)> gpu_bias_kernels;
    // Where a predictor meets the layer beyond the ranges it was fitted on in one of `unfitted_parameters`, the
    // layer is timed as `unfitted_kernels` instead of by extrapolating in them (a grouped convolution, which the
    // GPU data never times: the general convolution's block-diagonal implicit GEMM, conv2d.cpp).
    std::vector<std::string> unfitted_parameters;
    std::function<std::vector<KernelWork>(const LayerConfig&)> unfitted_kernels;
    // Where the layer is one matrix product that cuBLAS tiles: its shape, which gives the tile features
    // (prenet/features.hpp). Empty function: no such features.
    std::function<GemmShape(const LayerConfig&)> gemm_shape;

    // Fills defaults, rejects unknown or missing keys and out-of-range values, then validates.
    LayerConfig configure(const std::map<std::string, std::int64_t>& given) const;
    std::size_t parameter_index(std::string_view name) const;  // throws std::logic_error
};

// The table, in a fixed order.
const std::vector<LayerKind>& layer_kinds();
// Lookup by name (case-insensitive); throws std::invalid_argument listing the known kinds.
const LayerKind& find_layer_kind(std::string_view name);

}  // namespace prenet
