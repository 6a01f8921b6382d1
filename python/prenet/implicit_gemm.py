"""What cuDNN's implicit-GEMM convolution kernels take beyond the matrix product of the same shape, per GPU.

On tensor cores a convolution is costed as its implicit GEMM (rows: the batch's output pixels; inner dimension
c_in k^2; columns c_out) timed by the bundle's linear predictor and moved to the tensor-core rate
(cpp/src/kinds/conv2d.cpp), which alone would take cuDNN's convolution kernel to run as fast as cuBLAS's product.
No data here times a tensor-core convolution, but NeuSight's CUDA-core convolutions include rows where cuDNN
(benchmarking every algorithm) ran one of its implicit-GEMM kernels (`scudnn_<tile>_...`, not Winograd): each such
row's time over the bundle's linear prediction for its GEMM on the same GPU, in fp32 on CUDA cores, is what the
convolution's kernel costs beyond the product there, each row's time taken as at the start of its GPU's file
(NeuSight's process added a cost per call that grew with the shapes it had measured, prenet.measurement_order; as
measured, the medians were 11-28% higher). The median per GPU is recorded in the bundle's manifest
("implicit_gemm_overhead") and multiplies the implicit GEMM of a convolution on tensor cores: on a fitted GPU its
own, on any other the nearest fitted GPU's (PredictorBundle::implicit_gemm_overhead; nearest in the catalog's
specifications, as the estimate's "nearest fitted GPU"). The GPUs' medians lie far apart (0.63 on the P4 to 1.22-1.31
on the A100), so one figure for all would serve none; each GPU left out in turn (`leave_one_out`,
bench/conv_implicit_over_gemm.py), the nearest GPU's median came nearer its own than the others' median did for 4
of the 5 GPUs in either bundle (the A100, the fastest, left out gets the V100's, 23-26% below its own).

prenet.fit writes it into the manifest of a GPU bundle fitted on the NeuSight set as it writes the manifest;
`python -m prenet.implicit_gemm --bundle FOLDER` records it in such a bundle fitted before.
"""
import argparse
import functools
import json
import statistics
from pathlib import Path

from .atomic_file import write_json

# cuDNN's implicit-GEMM convolution kernels, as NeuSight recorded the longest kernel of a row: scudnn with a tile
# shape, without Winograd (the non-fused Winograd rows record an sgemm, the fused ones "winograd" in the name)
IMPLICIT_KERNEL = r"scudnn_\d+x\d+_"
MIN_MS = 0.05  # shorter rows are mostly launch and tail


@functools.lru_cache(maxsize=1)
def conv_rows():
    """NeuSight's conv2d rows as device time, each as at the start of its GPU's file (the cost per call that grew
    as NeuSight's process measured more shapes taken off: prenet.measurement_order). Cached: a model is fitted."""
    from .datasets import load_neusight
    from .measurement_order import at_first_position

    return at_first_position("conv2d", load_neusight(timing="device")["conv2d"])


def timed_by(folder):
    """(the native bundle in `folder`, whether it learned latencies, which hold the measuring host's launch gap):
    what implicit_rows times each GEMM with."""
    from .predictors import learned_timing, load_bundle

    return load_bundle(folder), learned_timing(folder) == "latency"


def implicit_rows(frame, bundle, holds_gap):
    """The conv2d rows of `frame` (conv_rows) whose kernel is an implicit GEMM and whose device time exceeds
    MIN_MS, with the GEMM's shape (m, k, n), the device time `bundle` gives it on the row's GPU in fp32 on CUDA cores
    (`gemm_ms`: its linear predictor's, less the launch gap where the bundle learned latencies, `holds_gap`, as the
    estimate takes it off), and `ratio`, the row's time over it."""
    from .catalog import native_catalog
    from .launch_gap import kind_gaps_ms

    kernel = frame["kernel"]
    rows = frame[kernel.str.contains(IMPLICIT_KERNEL) & ~kernel.str.contains("winograd") &
                 (frame["forward_ms"] > MIN_MS)].copy()
    out = (rows["height"] + 2 * rows["padding"] - rows["kernel_size"]) // rows["stride"] + 1
    rows["m"] = rows["batch"] * out * out
    rows["k"] = rows["in_channels"] * rows["kernel_size"] ** 2
    rows["n"] = rows["out_channels"]
    gemm_ms = {}
    for gpu, group in rows.groupby("gpu"):
        configs = [{"batch": 1, "seq_len": int(m), "in_features": int(k), "out_features": int(n), "bias": 0}
                   for m, k, n in zip(group["m"], group["k"], group["n"])]
        gaps = kind_gaps_ms(gpu) if holds_gap else {}
        times = bundle.estimate("linear", configs, native_catalog(), gpu, "sgd", "fp32_strict", gaps)
        gemm_ms.update(zip(group.index, (t["forward_ms"] for t in times)))
    rows["gemm_ms"] = rows.index.map(gemm_ms)
    rows["ratio"] = rows["forward_ms"] / rows["gemm_ms"]
    return rows


def overhead_per_gpu(rows):
    """{GPU: median ratio} of implicit_rows."""
    return {gpu: float(ratios.median()) for gpu, ratios in rows.groupby("gpu")["ratio"]}


def leave_one_out(per_gpu):
    """{GPU: (its median, the nearest other GPU, that GPU's median, the median of the others')}: how well each
    rule for a GPU without convolution data would have served each fitted GPU."""
    from .uncertainty import extrapolation

    out = {}
    for gpu, own in per_gpu.items():
        others = {name: ratio for name, ratio in per_gpu.items() if name != gpu}
        nearest = extrapolation(gpu, list(others))["nearest"]
        out[gpu] = (own, nearest, others[nearest], statistics.median(others.values()))
    return out


def manifest_entry(bundle, holds_gap):
    """The manifest's "implicit_gemm_overhead" of a GPU bundle fitted on the NeuSight set (`bundle`, `holds_gap`:
    as implicit_rows's): the median per GPU, the rows behind each and how it was found."""
    rows = implicit_rows(conv_rows(), bundle, holds_gap)
    return {"per_gpu": overhead_per_gpu(rows),
            "rows": {gpu: int(count) for gpu, count in rows["gpu"].value_counts().sort_index().items()},
            "method": f"median over the GPU's NeuSight conv2d rows whose kernel matches {IMPLICIT_KERNEL} (not "
                      f"Winograd) and whose device time, as at the start of its GPU's file (the cost per call that "
                      "grew with the shapes measured before it taken off, prenet/measurement_order.py), exceeds "
                      f"{MIN_MS} ms, of that time over this bundle's linear prediction for its implicit GEMM (m = "
                      "batch x output pixels, k = c_in x kernel^2, n = c_out) in fp32_strict as device time; "
                      "prenet/implicit_gemm.py"}


def record(folder):
    """Writes the overhead per GPU into the manifest of the NeuSight-fitted GPU bundle in `folder` (prenet.fit
    writes it with the manifest; this, for a bundle fitted before); returns it."""
    entry = manifest_entry(*timed_by(folder))
    manifest_path = Path(folder) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["implicit_gemm_overhead"] = entry
    write_json(manifest_path, manifest, indent=1)
    return entry["per_gpu"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a GPU bundle folder fitted on the NeuSight set")
    args = parser.parse_args(argv)
    for gpu, ratio in record(args.bundle).items():
        print(f"{gpu}: {ratio:.3f}")


if __name__ == "__main__":
    main()
