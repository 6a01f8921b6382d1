"""Renders docs/layer_kinds.md from the native table of layer kinds: `python -m prenet.docs > docs/layer_kinds.md`."""
from .layers import layer_kinds

# What each feature shared by all kinds means, and where its formula comes from.
COMMON_FEATURES = {
    "co": "computational operations CO (PreNeT eqs. 2-8)",
    "mem_weights": "weight memory in elements (PreNeT eq. 10)",
    "mem_input": "input memory in elements (PreNeT eq. 11)",
    "mem_output": "output memory in elements (PreNeT eq. 12)",
    "ct_ms": "computational time CT = CO / peak FP32 rate, in ms (PreNeT eq. 9)",
    "params": "trainable parameters",
    "param_tensors": "trainable tensors (weight, bias, ...); the optimizer updates each",
    "forward_flops": "exact floating-point operations of the forward pass",
    "backward_flops": "exact floating-point operations of the input and weight gradients",
    "forward_bytes": "bytes read and written by the forward kernels (fp32)",
    "backward_bytes": "bytes read and written by the backward kernels (fp32)",
    "forward_roofline_ms": "max(FLOPs / peak FP32, bytes / bandwidth) of the forward pass, in ms",
    "train_roofline_ms": "forward plus backward roofline bounds, in ms",
    "forward_kernel_bound_ms": "forward_roofline_ms plus a kernel's least time on the device (10 us), in ms",
    "train_kernel_bound_ms": "train_roofline_ms plus the same 10 us, in ms",
    "backward_kernel_bound_ms": "the backward pass's roofline bound plus the same 10 us, in ms",
    "gpu_fp32_tflops": "peak FP32 rate of the GPU (catalog)",
    "gpu_memory_bandwidth_gbs": "memory bandwidth of the GPU (catalog)",
    "gpu_boost_clock_mhz": "boost clock of the GPU (catalog)",
    "gpu_cuda_cores": "FP32 lanes of the GPU (catalog)",
    "gpu_sm_count": "streaming multiprocessors of the GPU (catalog)",
    "gpu_memory_gb": "memory size of the GPU (catalog)",
    "gpu_l2_cache_mb": "L2 cache of the GPU (catalog)",
}


def render_layer_kinds_markdown():
    lines = ["# Layer kinds", "",
             "Generated from the native table (`cpp/src/layer_kind.cpp`) by `python -m prenet.docs`; "
             "a test keeps it in step. Formulas and their sources are in `cpp/src/kinds/`.", ""]
    for kind in layer_kinds():
        lines += [f"## `{kind['name']}` ({kind['paper_name']})", "", kind["description"] + ".", "",
                  "| key | default | range | meaning |", "| --- | --- | --- | --- |"]
        for p in kind["parameters"]:
            default = "required" if p["default"] is None else str(p["default"])
            lines.append(f"| `{p['name']}` | {default} | {p['min']} to {p['max']} | {p['description']} |")
        derived = ", ".join(f"`{name}`" for name in kind["derived_features"]) or "none"
        lines += ["", f"Derived layer-specific features: {derived}.", ""]
        if kind["gemm_features"]:
            lines += ["Tile features (one matrix product that cuBLAS tiles; `cpp/src/features.cpp`): "
                      + ", ".join(f"`{name}`" for name in kind["gemm_features"]) + ": the product's m, n and k in "
                      "cuBLAS's column-major terms, and per FP32 tile shape the waves of thread blocks over the "
                      "GPU's SMs, the share of those waves' slots that work, and the share of the tiles' outputs that "
                      "are the product's (tile quantization).", ""]
        if kind["simd_features"]:
            lines += ["SIMD features (a row reduction along its last axis; `cpp/src/features.cpp`): "
                      + ", ".join(f"`{name}`" for name in kind["simd_features"]) + ": that axis's full vectors of "
                      "8 floats (ATen's AVX2 vectors) and the elements after them, which take a partial vector.", ""]
        if kind["row_parameters"]:
            first, second = kind["row_parameters"]
            lines += [f"Its work depends on `{first}` x `{second}` alone: a predictor bundle sees that product "
                      "split within the ranges it was fitted on (`cpp/src/fitted_range.cpp`).", ""]
    lines += ["## Features shared by every kind", "", "| feature | meaning |", "| --- | --- |"]
    lines += [f"| `{name}` | {meaning} |" for name, meaning in COMMON_FEATURES.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_layer_kinds_markdown(), end="")
