"""How much longer cuDNN's implicit-GEMM convolution kernels take than the matrix product of the same shape, on the
five GPUs of the NeuSight set, as each packaged GPU bundle records it (prenet.implicit_gemm: each implicit-GEMM
row's time over the bundle's linear prediction for its GEMM, in the timing the bundle learned), and how well a GPU
without convolution data is served by the nearest fitted GPU's figure, which the estimate uses, against the median
of the others' (each fitted GPU left out in turn). One factor for every GPU, the median of the five GPUs' medians,
had been the rule chosen before any H100 figure was looked at; the nearest GPU's was chosen after the H100's
convolutional models were seen under-predicted with the first, and the leave-one-out table is the evidence for it
from the fitting data alone (docs/validation.md, "On TF32"). Each row's time is taken as at the start of its GPU's
file (prenet.measurement_order: NeuSight's process added a cost per call that grew with the shapes it had measured,
bench/conv_measurement_order.py); the rows as measured are shown beside them.

Run:  .venv/bin/python bench/conv_implicit_over_gemm.py [--out FILE]   (about 20 s). Writes
bench/results/conv_implicit_over_gemm.md.
"""
import argparse
import time

import numpy as np
import pandas as pd

from prenet import implicit_gemm
from prenet.datasets import load_neusight
from prenet.predictors import PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE, learned_timing
from report import RESULTS, write_report

IMPLICIT_KERNEL, MIN_MS = implicit_gemm.IMPLICIT_KERNEL, implicit_gemm.MIN_MS


def binned_medians(rows, column, edges, labels):
    """Per GPU, the median ratio (and rows) within each bin of `column`."""
    bins = pd.cut(rows[column], edges, labels=labels)
    table = rows.groupby(["gpu", bins], observed=False)["ratio"].agg(["median", "count"])
    return {(gpu, label): (median, count) for (gpu, label), (median, count) in table.iterrows()}


def cell(found):
    """A table cell of a (median, rows) pair."""
    median, count = found
    return "-" if not count else f"{median:.2f} ({int(count)})"


def bundle_section(folder, measured):
    """The report's lines for the packaged bundle in `folder`: the ratios per GPU, binned, and the leave-one-out
    table; `measured`: NeuSight's conv2d rows as measured (device time), for the medians without the correction."""
    timed_by = implicit_gemm.timed_by(folder)
    rows = implicit_gemm.implicit_rows(implicit_gemm.conv_rows(), *timed_by)
    as_measured = implicit_gemm.overhead_per_gpu(implicit_gemm.implicit_rows(measured, *timed_by))
    per_gpu = rows.groupby("gpu")["ratio"]
    time_labels = ["0.05-0.3 ms", "0.3-1 ms", "1-3 ms", "over 3 ms"]
    row_labels = ["m <= 8192", "8192 < m <= 65536", "m > 65536"]
    by_time = binned_medians(rows, "forward_ms", [MIN_MS, 0.3, 1, 3, np.inf], time_labels)
    by_rows = binned_medians(rows, "m", [0, 8192, 65536, np.inf], row_labels)
    lines = [
        f"## {folder.name}/ (learned on {learned_timing(folder)})", "",
        "| GPU | rows | median | as measured | 10th-90th percentile | " + " | ".join(time_labels) + " | " +
        " | ".join(row_labels) + " |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in time_labels + row_labels) + " |",
    ]
    for gpu, ratios in per_gpu:
        lines.append(f"| {gpu} | {len(ratios)} | {ratios.median():.2f} | {as_measured[gpu]:.2f} | "
                     f"{ratios.quantile(0.1):.2f}-"
                     f"{ratios.quantile(0.9):.2f} | " +
                     " | ".join(cell(by_time[gpu, label]) for label in time_labels) + " | " +
                     " | ".join(cell(by_rows[gpu, label]) for label in row_labels) + " |")
    left_out = implicit_gemm.leave_one_out(implicit_gemm.overhead_per_gpu(rows))
    medians = [own for own, _, _, _ in left_out.values()]
    lines += [
        "", f"Median of the GPUs' medians: {np.median(medians):.2f} (all rows pooled: {rows['ratio'].median():.2f}; "
        f"the GPUs' medians {min(medians):.2f}-{max(medians):.2f}).", "",
        "Each GPU left out: its own median against the nearest other GPU's and the median of the others'.", "",
        "| left out | own | nearest other | its figure | off by | median of the others | off by |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    nearest_off, median_off = [], []
    for gpu, (own, name, nearest, pooled) in left_out.items():
        nearest_off.append(abs(nearest / own - 1))
        median_off.append(abs(pooled / own - 1))
        lines.append(f"| {gpu} | {own:.2f} | {name} | {nearest:.2f} | {nearest_off[-1]:.0%} | {pooled:.2f} | "
                     f"{median_off[-1]:.0%} |")
    nearer = sum(round(n, 2) < round(m, 2) for n, m in zip(nearest_off, median_off))
    ties = sum(round(n, 2) == round(m, 2) for n, m in zip(nearest_off, median_off))
    lines += ["", f"The nearest GPU's figure nearer the left-out GPU's own than the others' median for {nearer} of "
              f"{len(left_out)} GPUs ({ties} within a point, tied); median miss {np.median(nearest_off):.0%} by the "
              f"nearest GPU's, {np.median(median_off):.0%} by the others' median.", ""]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "conv_implicit_over_gemm.md")
    args = parser.parse_args()
    started = time.time()
    measured = load_neusight(timing="device")["conv2d"]
    sections = [line for folder in (PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE)
                for line in bundle_section(folder, measured)]
    lines = [
        "# cuDNN's implicit-GEMM convolutions against the same matrix product",
        "",
        f"`.venv/bin/python bench/conv_implicit_over_gemm.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.time() - started:.0f} s). NeuSight's conv2d rows (3x3, CUDA cores, fp32, cuDNN benchmarking "
        f"its algorithms) whose kernel is an implicit GEMM (`{IMPLICIT_KERNEL}`, not Winograd) and whose time "
        f"exceeds {MIN_MS} ms; each row's time over the bundle's linear predictor's for its GEMM (m = batch x "
        "output pixels, k = c_in x 9, n = c_out) on the same GPU in fp32_strict, each bundle in the timing it "
        "learned (prenet.implicit_gemm, whose medians per GPU the bundle's manifest records), each row's time as at "
        "the start of its GPU's file (prenet.measurement_order; 'as measured': the median without that correction, "
        "which the manifests recorded before this correction, 2026-11-28). Cells: median ratio (rows).",
        "",
    ] + sections
    write_report(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
