// The arithmetic a layer's kernels run in, and what it changes against the fp32 kernels the predictors learned.
#pragma once

#include <string>
#include <string_view>

#include "prenet/gpu_catalog.hpp"
#include "prenet/layer_kind.hpp"

namespace prenet {

// fp32:        PyTorch's defaults: cuDNN convolutions on TF32 tensor cores where the GPU has them, matmuls in full
//              fp32 (torch.backends.cudnn.allow_tf32 = True, torch.backends.cuda.matmul.allow_tf32 = False).
// fp32_strict: no TF32 anywhere.
// tf32:        TF32 for matmuls too (torch.backends.cuda.matmul.allow_tf32 = True, as
//              torch.set_float32_matmul_precision("high") sets it): every matrix kind at the TF32 rate where the GPU
//              has one, on 4-byte tensors.
// bf16, fp16:  kernels on 2-byte tensors (as autocast runs them): matrix kinds at the catalog's bf16/fp16 rate,
//              memory-bound kinds moving half the bytes.
enum class Precision { fp32, fp32_strict, tf32, bf16, fp16 };

// Throws std::invalid_argument naming the accepted names.
Precision parse_precision(std::string_view name);
const char* to_string(Precision precision);
double element_bytes(Precision precision);  // 4 or 2

// The precision a kind's products (and the kernels it is composed of) run in within a step of `precision`: cuDNN's
// layers (TensorCores::cudnn) take TF32 in fp32, torch.backends.cudnn.allow_tf32 being on by default, as the tf32
// precision gives matmuls; on a GPU without TF32 that is fp32 again. Any other kind: `precision`.
Precision precision_within(const LayerKind& kind, Precision precision);

// Dense matrix rate (TFLOPS) of `gpu` for a kind under `precision`; throws std::invalid_argument where the catalog
// has no rate for a 2-byte type on this GPU (the GPU does not support it).
double matrix_tflops(const LayerKind& kind, const GpuSpec& gpu, Precision precision);

// Whether `precision` lets a kind's kernels run on tensor cores of `gpu`: the type is one they take (TF32, where the
// kind's library allows it, bf16, fp16) and the GPU has a rate for it, even one no faster than its CUDA cores' (TF32
// on GeForce Ampere and Ada, the L40), where the library still picks among both kinds of kernel.
bool on_tensor_cores(const LayerKind& kind, const GpuSpec& gpu, Precision precision);

// Time of a tensor-core kind under `precision` over its fp32 time: the roofline bound with the precision's rate and
// element size over the bound at the fp32 rate with 4-byte elements (Williams et al., 2009; rates from the
// catalog's datasheets), i.e. the efficiency predicted for fp32 kept on the faster roofline. 1 for other kinds.
double tensor_core_factor(const LayerConfig& config, const GpuSpec& gpu, Precision precision);

// A memory-bound kind's configuration moving, with 4-byte elements, the bytes it moves in `precision`: its first
// parameter in table order that its traffic is proportional to (batch, seq_len, channels, features,
// normalized_shape) and that is at least 2, scaled by element_bytes / 4 and rounded up. The configuration itself
// where nothing changes (fp32, or a tensor-core kind).
LayerConfig narrowed(const LayerConfig& config, Precision precision);

}  // namespace prenet
