"""How much of the GPU predictors' held-out error the library's choice of kernel explains: the seen-GPU predictor of
a kind (xgboost on our features, the bundle's family, target and 80/10/10 split by configuration) refitted with, as
extra inputs, what NeuSight recorded of the kernel each row ran: (a) its algorithm family (for convolutions:
Winograd, FFT, GEMM, cuDNN's implicit kernels; for matrix products the family is the kernel), (b) the kernel's exact
name (one input per name run by at least training.KERNEL_MIN_ROWS rows, the rest as one). Neither is known when a
user's layer is predicted, so these are oracles: an upper bound on what predicting the kernel choice could give. If
knowing the very kernel leaves the error where it was, the error is not the kernel choice. Then (c) what can be had
without the record: the kernel's name predicted by a classifier from our features and the kind's tile features
(training.kernel_set), its choice an input of the regressor, as the packaged linear predictor does
(training.KernelChoiceModel, fitted on the training part), and (d), for a kind with tile features, those inputs with
the exact name in place of the predicted one: the ceiling of (c).

Run:  .venv/bin/python bench/kernel_choice_ceiling.py [--kinds conv2d linear bmm] [--out FILE]
(about two minutes). Writes bench/results/kernel_choice_ceiling.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prenet import training
from prenet.datasets import load_neusight
from report import RESULTS, write_report

# Substrings of a kernel's name -> its algorithm family, the first match wins (cuDNN and cuBLAS names).
FAMILIES = (("winograd", "winograd"), ("fft", "fft"), ("gemv", "gemv"), ("splitk", "split-K GEMM"),
            ("sgemm", "GEMM"), ("gemm", "GEMM"), ("scudnn", "cuDNN implicit"), ("convolve", "cuDNN implicit"))


def family(kernel_name):
    name = str(kernel_name).lower()
    return next((label for key, label in FAMILIES if key in name), "other")


def one_hot(labels):
    values, codes = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
    return np.eye(len(values))[codes]


def fit_and_score(kind, frame, x, y, target, part, kernels=None):
    """Test scores overall and the test median and 90th percentile per GPU (a frame, rows the GPUs) of xgboost
    fitted on the training part; with `kernels`
    (each row's recorded kernel), the bundle's two-stage predictor (training.KernelChoiceModel), and the share of
    test rows whose kernel its classifier picks (rare kernels as one class, as it learns them)."""
    train, rows = part == "train", part == "test"
    model = training.make_model("xgboost")
    accuracy = None
    if kernels is None:
        model.fit(x[train], y[train])
    else:
        model = training.KernelChoiceModel(model).fit(x[train], y[train], kernels[train])
        recorded = np.where(np.isin(kernels, model.classes), kernels, training.RARE_KERNELS)
        accuracy = float((model.classes[model.kernel_codes(x[rows])] == recorded[rows]).mean())
    predicted = training.to_ms(kind, frame[rows], target, model.predict(x[rows]))
    measured = frame.loc[rows, "forward_ms"].to_numpy(float)
    error = np.abs(predicted - measured) / measured
    by_gpu = pd.Series(error).groupby(frame.loc[rows, "gpu"].to_numpy())
    per_gpu = pd.DataFrame({"median": by_gpu.median(), "p90": by_gpu.quantile(0.9)})
    return training.scores(measured, predicted), per_gpu, accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=["conv2d", "linear", "bmm"])
    parser.add_argument("--out", type=Path, default=RESULTS / "kernel_choice_ceiling.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    data = load_neusight()
    lines, gpu_lines = [], []
    for kind in args.kinds:
        ours = training.OursInputs(kind, data[kind])
        frame, part, target, x, y = ours.frame, ours.part, ours.target, ours.x, ours.y
        names = frame["kernel"]
        counts = names.value_counts()
        exact = training.common_kernels(names)
        results = {label: fit_and_score(kind, frame, v, y, target, part) for label, v in {
            "our features (the ours set)": x,
            "+ the kernel's family": np.c_[x, one_hot(names.map(family))],
            "+ the kernel's exact name": np.c_[x, one_hot(exact)]}.items()}
        x_kernel = ours.inputs(training.kernel_set(kind, ours.names))
        two_stage = fit_and_score(kind, frame, x_kernel, y, target, part, kernels=names.to_numpy(str))
        results[f"+ the kernel's name as predicted (test accuracy {two_stage[2]:.0%})"] = two_stage
        if x_kernel.shape[1] > x.shape[1]:  # the ceiling of the predicted name's inputs: theirs and the very name
            results["+ the tile features and the kernel's exact name"] = fit_and_score(
                kind, frame, np.c_[x_kernel, one_hot(exact)], y, target, part)
        for label, (s, _, _) in results.items():
            lines.append(f"| {kind} | {label} | {s['median_rel']:.1%} | {s['p90_rel']:.1%} |")
            print(lines[-1], flush=True)
        ours, _, with_exact, with_predicted = [per for _, per, _ in results.values()][:4]
        for gpu in ours.index:
            cells = [f"{per.loc[gpu, 'median']:.1%} / {per.loc[gpu, 'p90']:.1%}"
                     for per in (ours, with_exact, with_predicted)]
            gpu_lines.append(f"| {kind} | {gpu} | {' | '.join(cells)} |")
        families = ", ".join(f"{f} {n}" for f, n in names.map(family).value_counts().items())
        lines.append(f"| {kind} | ({len(counts)} kernel names, {int((counts >= training.KERNEL_MIN_ROWS).sum())} run "
                     f"by {training.KERNEL_MIN_ROWS}+ rows; families: {families}) | | |")
    text = "\n".join([
        "# Does the library's kernel choice explain the GPU predictors' error?", "",
        f"`.venv/bin/python bench/kernel_choice_ceiling.py --kinds {' '.join(args.kinds)}` "
        f"({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s). NeuSight's forward rows, five GPUs; "
        "xgboost (600 trees, depth 8) on our features with the bundle's target, fitted on the training part of the "
        "80/10/10 split by configuration, judged on the test part (relative error). The family and exact-name inputs "
        "are oracles (NeuSight recorded the kernel each row ran; a user's layer has no such record); the predicted "
        "name is a classifier's (training.KernelChoiceModel on the kernel set's inputs, ours and the tile features, "
        "as the packaged linear predictor: xgboost, 100 rounds "
        "of depth 6, fitted on the training part; its accuracy on the test part in brackets); for a kind with tile "
        "features, the last row gives those inputs the exact name instead (the ceiling of the predicted one).", "",
        "| kind | inputs | test median | test p90 |", "| --- | --- | --- | --- |", *lines, "",
        "Test median / 90th percentile per GPU:", "",
        "| kind | GPU | our features | + exact kernel | + predicted kernel |", "| --- | --- | --- | --- | --- |",
        *gpu_lines, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
