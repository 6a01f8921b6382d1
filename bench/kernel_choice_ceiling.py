"""How much of the GPU predictors' held-out error the library's choice of kernel explains: the seen-GPU predictor
of a kind (xgboost on our features, the bundle's family, target and 80/10/10 split by configuration) refitted
with, as extra inputs, what NeuSight recorded of the kernel each row ran: (a) its algorithm family (for
convolutions: Winograd, FFT, GEMM, cuDNN's implicit kernels; for matrix products the family is the kernel), (b) the
kernel's exact name (one input per name run by at least MIN_ROWS rows, the rest as one). Neither is known when a
user's layer is predicted, so these are oracles: an upper bound on what predicting the kernel choice could give.
If knowing the very kernel leaves the error where it was, the error is not the kernel choice. Then (c) what can be
had without the record: the kernel's name predicted from our features by a classifier (xgboost, fitted on the
training part), its choice an input of the regressor.

Run:  .venv/bin/python bench/kernel_choice_ceiling.py [--kinds conv2d linear bmm] [--out FILE]
(about two minutes). Writes bench/results/kernel_choice_ceiling.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xgboost

from prenet import training
from prenet.datasets import NEUSIGHT_OPERATORS, load_neusight, neusight_folder
from report import write_report

RESULTS = Path(__file__).resolve().parent / "results"
MIN_ROWS = 20  # a kernel name run by fewer rows shares one input with the other rare ones
# Substrings of a kernel's name -> its algorithm family, the first match wins (cuDNN and cuBLAS names).
FAMILIES = (("winograd", "winograd"), ("fft", "fft"), ("gemv", "gemv"), ("splitk", "split-K GEMM"),
            ("sgemm", "GEMM"), ("gemm", "GEMM"), ("scudnn", "cuDNN implicit"), ("convolve", "cuDNN implicit"))


def family(kernel_name):
    name = str(kernel_name).lower()
    return next((label for key, label in FAMILIES if key in name), "other")


def kernel_names(kind):
    """The `Kernel Name` of every row of `kind`, in load_neusight's row order (files sorted, rows as read)."""
    operator = next(op for op, (native, _, _) in NEUSIGHT_OPERATORS.items() if native == kind)
    files = sorted(neusight_folder().glob(f"{operator}__*.csv.gz"))
    return pd.concat([pd.read_csv(path, usecols=["Kernel Name"])["Kernel Name"] for path in files],
                     ignore_index=True)


def one_hot(labels):
    values, codes = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
    return np.eye(len(values))[codes]


def predicted_kernel(x, exact, part):
    """One-hot of the kernel name a classifier fitted on the training part predicts for every row."""
    names, codes = np.unique(np.asarray(exact, dtype=str), return_inverse=True)
    train = part == "train"
    seen, train_codes = np.unique(codes[train], return_inverse=True)  # classes the training part has
    classifier = xgboost.XGBClassifier(n_estimators=300, max_depth=8, learning_rate=0.1, n_jobs=2,
                                       tree_method="hist", random_state=0)
    classifier.fit(x[train], train_codes)
    chosen = seen[classifier.predict_proba(x).argmax(axis=1)]
    accuracy = float((chosen == codes)[part == "test"].mean())
    return np.eye(len(names))[chosen], accuracy


def fit_and_score(kind, frame, x, y, target, part):
    """Test scores overall and the test median per GPU of xgboost fitted on the training part."""
    model = training.make_model("xgboost").fit(x[part == "train"], y[part == "train"])
    rows = part == "test"
    predicted = training.to_ms(kind, frame[rows], target, model.predict(x[rows]))
    measured = frame.loc[rows, "forward_ms"].to_numpy(float)
    error = np.abs(predicted - measured) / measured
    per_gpu = pd.Series(error).groupby(frame.loc[rows, "gpu"].to_numpy()).median()
    return training.scores(measured, predicted), per_gpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=["conv2d", "linear", "bmm"])
    parser.add_argument("--out", type=Path, default=RESULTS / "kernel_choice_ceiling.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    data = load_neusight()
    lines, gpu_lines = [], []
    for kind in args.kinds:
        frame = data[kind]
        names = kernel_names(kind)
        if len(names) != len(frame):
            raise RuntimeError(f"{kind}: {len(names)} kernel names for {len(frame)} rows")
        keep = (frame["forward_ms"] > 0).to_numpy()
        frame, names = frame[keep].reset_index(drop=True), names[keep].reset_index(drop=True)
        counts = names.value_counts()
        exact = names.where(names.map(counts) >= MIN_ROWS, "(rare)")
        part = training.split_by_configuration(frame, training.config_keys(kind, frame))
        inputs = training.feature_sets(kind, frame["gpu"].unique())["ours"]
        target = training.target_for("ours")
        x = training.model_inputs(kind, frame, inputs)
        y = training.target_values(kind, frame, target, "forward_ms")
        predicted, accuracy = predicted_kernel(x, exact, part)
        variants = {"our features (the bundle's predictor)": x,
                    "+ the kernel's family": np.c_[x, one_hot(names.map(family))],
                    "+ the kernel's exact name": np.c_[x, one_hot(exact)],
                    f"+ the kernel's name as predicted (test accuracy {accuracy:.0%})": np.c_[x, predicted]}
        results = {label: fit_and_score(kind, frame, v, y, target, part) for label, v in variants.items()}
        for label, (s, _) in results.items():
            lines.append(f"| {kind} | {label} | {s['median_rel']:.1%} | {s['p90_rel']:.1%} |")
            print(lines[-1], flush=True)
        ours, _, with_exact, with_predicted = [per for _, per in results.values()]
        for gpu in ours.index:
            gpu_lines.append(f"| {kind} | {gpu} | {ours[gpu]:.1%} | {with_exact[gpu]:.1%} | "
                             f"{with_predicted[gpu]:.1%} |")
        families = ", ".join(f"{f} {n}" for f, n in names.map(family).value_counts().items())
        lines.append(f"| {kind} | ({len(counts)} kernel names, {int((counts >= MIN_ROWS).sum())} run by "
                     f"{MIN_ROWS}+ rows; families: {families}) | | |")
    text = "\n".join([
        "# Does the library's kernel choice explain the GPU predictors' error?", "",
        f"`.venv/bin/python bench/kernel_choice_ceiling.py --kinds {' '.join(args.kinds)}` "
        f"({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s). NeuSight's forward rows, five GPUs; "
        "xgboost (600 trees, depth 8) on our features with the bundle's target, fitted on the training part of the "
        "80/10/10 split by configuration, judged on the test part (relative error). The family and exact-name inputs "
        "are oracles (NeuSight recorded the kernel each row ran; a user's layer has no such record); the predicted "
        "name is a classifier's (xgboost, 300 trees, fitted on the training part; its accuracy on the test part "
        "in brackets).", "",
        "| kind | inputs | test median | test p90 |", "| --- | --- | --- | --- |", *lines, "",
        "Test median per GPU:", "",
        "| kind | GPU | our features | + exact kernel | + predicted kernel |", "| --- | --- | --- | --- | --- |",
        *gpu_lines, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
