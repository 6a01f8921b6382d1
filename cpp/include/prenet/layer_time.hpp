// Training-step time of layers on one device: forward pass, backward pass and optimizer update, each predicted
// directly where the bundle has a predictor for it and composed from kernels of known shapes where it has not.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "prenet/gpu_catalog.hpp"
#include "prenet/layer_kind.hpp"
#include "prenet/precision.hpp"
#include "prenet/predictor_bundle.hpp"

namespace prenet {

// How a time was obtained, from the most to the least direct; a sum is as direct as its weakest term.
// exact: no work at all (a kind without parameters has no update; an add has no backward kernel).
enum class TimeBasis { exact, predicted, kernels, roofline };
const char* to_string(TimeBasis basis);

// forward_ms: the forward pass alone (no autograd); step_forward_ms: the same pass inside a training step, where
// autograd records what the backward pass needs (on a CPU a tenth to a half longer for small layers, data/cpu).
struct LayerTime {
    double forward_ms = 0, step_forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
    TimeBasis forward_basis = TimeBasis::exact, step_forward_basis = TimeBasis::exact,
              backward_basis = TimeBasis::exact, optimizer_basis = TimeBasis::exact;
};

// Times of `configs` (any kinds) on `gpu` with `optimizer` (see prenet/optimizer.hpp). Rules, per part:
// (a predicted time of a kind whose FLOPs no algorithm undercuts, LayerKind::flops_bound_time, is never below
// those FLOPs at the GPU's fp32 peak)
//  forward    the bundle's (kind, "forward") predictor; else the kind's forward_kernels; else its roofline bound.
//             A layer beyond its predictor's data in one of its kind's unfitted_parameters runs its
//             unfitted_kernels, on a GPU never faster than its own forward bytes beyond the L2 cache at the
//             memory's peak bandwidth (those kernels, a grouped convolution's implicit GEMM, count other bytes).
//  step forward  the bundle's (kind, "train_forward") predictor (the forward timed inside training steps); else
//             the forward.
//  backward   the bundle's (kind, "backward") predictor; else the forward times of the kind's backward_kernels;
//             else the backward of its forward_kernels; else (a memory-bound kind) its forward time scaled by
//             backward_bytes / forward_bytes.
//  optimizer  the bundle's (kind, "optimizer") predictor; else, per parameter tensor, the optimizer's kernels as
//             add-shaped kernels sharing its element passes (an add moves 3 elements per element).
// A predictor of time over its kernels' composition (kOverKernels) gives its part as its ratio times that
// composition, planned by these rules with the kind's own predictors left out.
// Every leaf kernel runs in `precision` (prenet/precision.hpp; the predictors learned from fp32 CUDA-core kernels
// only): tensor-core kinds keep the efficiency predicted for fp32 on the precision's roofline (their fp32 time times
// tensor_core_factor; a kind with tensor_core_kernels, a convolution, as those kernels: its implicit GEMM so moved,
// times `implicit_gemm_overhead` (PredictorBundle::implicit_gemm_overhead for the GPU), and its layout transposes),
// memory-bound kinds are timed as their narrowed configuration. The optimizer's update runs in fp32 whatever the
// precision. `issue_gap_ms`: per kernel kind, the host time that every latency the bundle learned for it includes (the
// measurement's time to issue the operator, see prenet/launch_gap.py); taken off each predicted kernel of that kind (a
// composite layer's kernels each by their own kind's) to leave its device time, never below the kernel's roofline bound
// (nor above its prediction); a kind not listed keeps its latencies as measured. Predictions are batched per (kind,
// mode). On a GPU, a streaming kind's forward kernel (LayerKind::streaming_rows) with fewer elements than one wave of
// the device's resident threads (kElementsPerWaveSm per SM) is predicted as the faster of itself and the same kernel
// with its batch raised to fill that wave: it does no more work than the full wave, and a predictor's noise on tiny
// kernels (host-paced in the data) is not taken for a cost that shrinks with size. Throws std::invalid_argument for an
// unknown optimizer or a precision the GPU lacks.
using IssueGaps = std::map<std::string, double>;
// Elements one SM's resident threads take in one wave of an elementwise kernel: 2048 resident threads per SM
// (CUDA C Programming Guide, compute capabilities 6.0-9.0 but 7.5 and 8.6-8.9, which hold fewer) x 4 elements per
// thread (PyTorch's elementwise loops, aten/src/ATen/native/cuda/Loops.cuh, thread_work_size 4).
inline constexpr double kElementsPerWaveSm = 2048.0 * 4.0;
std::vector<LayerTime> estimate_layer_times(const PredictorBundle& bundle, const std::vector<LayerConfig>& configs,
                                            const GpuSpec& gpu, const std::string& optimizer,
                                            Precision precision = Precision::fp32, const IssueGaps& issue_gap_ms = {},
                                            double implicit_gemm_overhead = 1.0);

// estimate_layer_times, and with `with_cuda_core` each layer's time on CUDA cores beside it (else empty): for a
// configuration that `precision` puts on tensor cores (tensor_core_factor < 1) its time in fp32_strict, for any
// other its time in `precision`. Both are planned together, so a kernel both time (a convolution's CUDA-core
// kernel, one of the two it is timed as on tensor cores) is predicted once.
std::pair<std::vector<LayerTime>, std::vector<LayerTime>> estimate_layer_times_with_cuda_core(
    const PredictorBundle& bundle, const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
    const std::string& optimizer, Precision precision, const IssueGaps& issue_gap_ms, bool with_cuda_core,
    double implicit_gemm_overhead = 1.0);

// Milliseconds of `configs` (all of one kind) in `mode` by the bundle's predictor of (kind, mode) alone, as it was
// fitted: its prediction, or for a predictor of time over its kernels' composition (kOverKernels) that ratio times
// the composition by the rules above in fp32, the kind's own predictors left out ("train" composes the step forward,
// backward and update; no issue gaps). Throws std::invalid_argument where the bundle has no such predictor.
std::vector<double> predict_mode_ms(const PredictorBundle& bundle, const std::string& mode,
                                    const std::vector<LayerConfig>& configs, const GpuSpec& gpu,
                                    const std::string& optimizer);

// The optimizer's update of parameter tensors of the given element counts, one time per tensor, composed by the
// optimizer rule above (issue_gap_ms as above).
std::vector<LayerTime> estimate_update_times(const PredictorBundle& bundle, const std::vector<double>& tensor_elements,
                                             const GpuSpec& gpu, const std::string& optimizer,
                                             const IssueGaps& issue_gap_ms = {});

}  // namespace prenet
