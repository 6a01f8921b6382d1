// Training-step time of layers on one device: forward pass, backward pass and optimizer update, each predicted
// directly where the bundle has a predictor for it and composed from kernels of known shapes where it has not.
#pragma once

#include <string>
#include <vector>

#include "prenet/gpu_catalog.hpp"
#include "prenet/layer_kind.hpp"
#include "prenet/predictor_bundle.hpp"

namespace prenet {

// How a time was obtained, from the most to the least direct; a sum is as direct as its weakest term.
// exact: no work at all (a kind without parameters has no update; an add has no backward kernel).
enum class TimeBasis { exact, predicted, kernels, roofline };
const char* to_string(TimeBasis basis);

struct LayerTime {
    double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
    TimeBasis forward_basis = TimeBasis::exact, backward_basis = TimeBasis::exact,
              optimizer_basis = TimeBasis::exact;
    double step_ms() const { return forward_ms + backward_ms + optimizer_ms; }
};

// Times of `configs` (any kinds) on `gpu` with `optimizer` (see prenet/optimizer.hpp). Rules, per part:
//  forward    the bundle's (kind, "forward") predictor; else the kind's forward_kernels; else its roofline bound.
//  backward   the bundle's (kind, "backward") predictor; else the forward times of the kind's backward_kernels;
//             else the backward of its forward_kernels; else (a memory-bound kind) its forward time scaled by
//             backward_bytes / forward_bytes.
//  optimizer  the bundle's (kind, "optimizer") predictor; else, per parameter tensor, the optimizer's kernels as
//             add-shaped kernels sharing its element passes (an add moves 3 elements per element).
// Kernels of cudnn_convolution kinds on a GPU with a TF32 rate, when tf32_convolutions is set (PyTorch's fp32
// default), keep the efficiency predicted for them in fp32 but on the TF32 roofline: their fp32 time times
// tf32_convolution_factor (the predictors learned from fp32 CUDA-core kernels only).
// Predictions are batched per (kind, mode). Throws std::invalid_argument for an unknown optimizer.
std::vector<LayerTime> estimate_layer_times(const PredictorBundle& bundle, const std::vector<LayerConfig>& configs,
                                            const GpuSpec& gpu, const std::string& optimizer,
                                            bool tf32_convolutions = true);
// Roofline bound at the TF32 tensor-core rate over the bound at the fp32 rate, both with fp32 traffic
// (Williams et al., 2009; rates from the catalog's datasheets); 1 on a GPU without TF32.
double tf32_convolution_factor(const LayerCost& cost, const GpuSpec& gpu);

// The optimizer's update of parameter tensors of the given element counts, one time per tensor, composed by the
// optimizer rule above.
std::vector<LayerTime> estimate_update_times(const PredictorBundle& bundle, const std::vector<double>& tensor_elements,
                                             const GpuSpec& gpu, const std::string& optimizer);

}  // namespace prenet
