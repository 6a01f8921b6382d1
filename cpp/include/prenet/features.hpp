// Feature extraction: the paper's layer-specific, computational (CO, CM, CT) and hardware features of one
// layer on one GPU, beside exact training-step FLOPs, bytes and roofline bounds.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "prenet/gpu_catalog.hpp"
#include "prenet/layer_kind.hpp"

namespace prenet {

// Bytes of one fp32 element.
inline constexpr double kFp32Bytes = 4.0;
// The least time a kernel holds the device, in ms: the median over NeuSight's five hosts and three streaming kinds
// (add, relu, gelu) of the least latency less the host's launch gap (data/gpu_launch_gaps.json): 3-29 us, median
// 10.7 us, taken as 10 (tests/test_predictors.py re-derives it). The feature forward_kernel_bound_ms is the forward
// roofline bound plus this; learned targets are time over it, a ratio that stays near the least latency over the
// startup for the smallest kernels instead of growing without limit as their roofline bound shrinks to nothing.
// train_kernel_bound_ms and backward_kernel_bound_ms are the training step's (forward and backward) and the backward
// pass's roofline bounds plus the same: on the CPU set a layer's least training step is 5-20 us (elementwise kinds
// 5, those with weights 12-20), and targets over them beat those over the bare bound (the step) and plain log time
// (the backward pass) on validation for most kinds (docs/predictors.md).
inline constexpr double kKernelStartupMs = 0.010;

using FeatureVector = std::vector<std::pair<std::string, double>>;

// Roofline bound in ms: the slower of `flops` at the GPU's FP32 peak and `bytes` at its memory bandwidth.
double roofline_ms(double flops, double bytes, const GpuSpec& gpu);
// The same bound at a given compute rate (TFLOP/s) and bandwidth (GB/s).
double roofline_ms(double flops, double bytes, double tflops, double bandwidth_gbs);

// A kind with a gemm_shape also has tile features: the product's m, n and k, and for each of cuBLAS's FP32 tile
// shapes how many waves of thread blocks it runs on the GPU's SMs, how full those waves are (wave quantization)
// and the share of the tiles' outputs that are the product's (tile quantization; both NVIDIA's "Matrix
// Multiplication Background User's Guide"), what cuBLAS's choice of kernel and its time turn on. Their names,
// empty for a kind without a gemm_shape.
std::vector<std::string> gemm_feature_names(const LayerKind& kind);

// ATen's Vectorized<float> under its AVX2 kernels, those PyTorch 1.13 runs on the CPU hosts measured here
// (torch.__config__.show(): "CPU capability usage: AVX2"): 8 fp32 lanes; a row's last n mod 8 elements take a
// partial vector (GPUs' vectorised loads of 4 floats divide it).
inline constexpr int kSimdFloatLanes = 8;

// A kind with a vectorised_axis also has SIMD features: that axis's full vectors of kSimdFloatLanes elements and its
// tail (the elements after them), which set a row reduction's time beyond its bytes. Their names, empty otherwise.
std::vector<std::string> simd_feature_names(const LayerKind& kind);

// Names of the features of `kind`, in the order layer_features returns them.
std::vector<std::string> feature_names(const LayerKind& kind);

// Features of one configured layer on one GPU.
FeatureVector layer_features(const LayerConfig& config, const GpuSpec& gpu, double bytes_per_element = kFp32Bytes);
// The same values without their names, in feature_names order (the predictors' hot path).
std::vector<double> layer_feature_values(const LayerConfig& config, const GpuSpec& gpu,
                                         double bytes_per_element = kFp32Bytes);

}  // namespace prenet
