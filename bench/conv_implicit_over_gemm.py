"""How much longer cuDNN's implicit-GEMM convolution kernels take than the matrix product of the same shape, on the
five GPUs of the NeuSight set. On tensor cores a convolution is costed as its implicit GEMM (rows: the batch's
output pixels; inner dimension c_in k^2; columns c_out) timed by the linear predictor (cpp/src/kinds/conv2d.cpp),
as if cuDNN's convolution kernel ran as fast as cuBLAS's product. No data here times a tensor-core convolution, but
NeuSight's CUDA-core convolutions include rows where cuDNN (benchmarking every algorithm) ran one of its
implicit-GEMM kernels (`scudnn_<tile>_...`, not Winograd): each such row's device time over the linear predictor's
time for its GEMM, on the same GPU, in fp32 on CUDA cores, is what the convolution's kernel costs beyond the product.
One factor for every GPU would be the median of the five GPUs' medians (chosen so before any H100 figure was looked
at); the report shows how far apart the GPUs are (docs/targets_in_detail.md, "Not yet built, in full").

Run:  .venv/bin/python bench/conv_implicit_over_gemm.py [--out FILE]   (about 10 s). Writes
bench/results/conv_implicit_over_gemm.md.
"""
import argparse
import time

import numpy as np
import pandas as pd

import prenet
from prenet.datasets import load_neusight
from report import RESULTS, write_report

# cuDNN's implicit-GEMM convolution kernels, as NeuSight recorded the longest kernel of a row: scudnn with a tile
# shape, without Winograd (the non-fused Winograd rows record an sgemm, the fused ones "winograd" in the name)
IMPLICIT_KERNEL = r"scudnn_\d+x\d+_"
MIN_MS = 0.05  # shorter rows are mostly launch and tail


def implicit_rows(frame):
    """The conv2d rows of `frame` whose kernel is an implicit GEMM, with its shape (m, k, n) and the GEMM's
    predicted device time (`gemm_ms`) on the row's GPU."""
    kernel = frame["kernel"]
    rows = frame[kernel.str.contains(IMPLICIT_KERNEL) & ~kernel.str.contains("winograd") &
                 (frame["forward_ms"] > MIN_MS)].copy()
    out = (rows["height"] + 2 * rows["padding"] - rows["kernel_size"]) // rows["stride"] + 1
    rows["m"] = rows["batch"] * out * out
    rows["k"] = rows["in_channels"] * rows["kernel_size"] ** 2
    rows["n"] = rows["out_channels"]
    rows["gemm_ms"] = [prenet.predict_layer("linear", gpu=gpu, mode="forward", precision="fp32_strict", batch=1,
                                            seq_len=int(m), in_features=int(k), out_features=int(n), bias=0)
                       for gpu, m, k, n in zip(rows["gpu"], rows["m"], rows["k"], rows["n"])]
    rows["ratio"] = rows["forward_ms"] / rows["gemm_ms"]
    return rows


def binned_medians(rows, column, edges, labels):
    """Per GPU, the median ratio (and rows) within each bin of `column`."""
    bins = pd.cut(rows[column], edges, labels=labels)
    table = rows.groupby(["gpu", bins], observed=False)["ratio"].agg(["median", "count"])
    return {(gpu, label): (median, count) for (gpu, label), (median, count) in table.iterrows()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "conv_implicit_over_gemm.md")
    args = parser.parse_args()
    started = time.time()
    rows = implicit_rows(load_neusight(timing="device")["conv2d"])
    per_gpu = rows.groupby("gpu")["ratio"]
    medians = per_gpu.median()
    factor = float(np.median(medians))
    time_labels = ["0.05-0.3 ms", "0.3-1 ms", "1-3 ms", "over 3 ms"]
    row_labels = ["m <= 8192", "8192 < m <= 65536", "m > 65536"]
    by_time = binned_medians(rows, "forward_ms", [MIN_MS, 0.3, 1, 3, np.inf], time_labels)
    by_rows = binned_medians(rows, "m", [0, 8192, 65536, np.inf], row_labels)

    def cell(found):
        median, count = found
        return "-" if not count else f"{median:.2f} ({int(count)})"

    lines = [
        "# cuDNN's implicit-GEMM convolutions against the same matrix product",
        "",
        f"`.venv/bin/python bench/conv_implicit_over_gemm.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.time() - started:.0f} s). NeuSight's conv2d rows (3x3, CUDA cores, fp32, cuDNN benchmarking "
        f"its algorithms) whose kernel is an implicit GEMM (`{IMPLICIT_KERNEL}`, not Winograd) and whose device "
        f"time exceeds {MIN_MS} ms; each row's device time over the packaged linear predictor's for its GEMM (m = "
        "batch x output pixels, k = c_in x 9, n = c_out) on the same GPU in fp32_strict. Cells: median ratio "
        "(rows).",
        "",
        "| GPU | rows | median | 10th-90th percentile | " + " | ".join(time_labels) + " | " +
        " | ".join(row_labels) + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in time_labels + row_labels) + " |",
    ]
    for gpu, ratios in per_gpu:
        lines.append(f"| {gpu} | {len(ratios)} | {ratios.median():.2f} | {ratios.quantile(0.1):.2f}-"
                     f"{ratios.quantile(0.9):.2f} | " +
                     " | ".join(cell(by_time[gpu, label]) for label in time_labels) + " | " +
                     " | ".join(cell(by_rows[gpu, label]) for label in row_labels) + " |")
    lines += [
        "",
        f"Median of the five GPUs' medians: **{factor:.2f}** (all rows pooled: {rows['ratio'].median():.2f}; the "
        f"GPUs' medians {medians.min():.2f}-{medians.max():.2f}).",
        "",
    ]
    write_report(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
