"""How much of the CPU conv2d predictors' held-out error the implementation PyTorch and oneDNN run explains
(prenet.onednn_kernels: per configuration, the forward pass's, the input gradient's and the weight gradient's, as
labelled in data/cpu_kernels/). Per mode of the CPU set, xgboost on our features (the bundle's target and 80/10/10
split by configuration) fitted three ways: (a) ours alone, (b) with the implementation known (an oracle: the label
as an input), (c) with it predicted by a classifier from our features, as the bundle can serve it for a user's
layer (training.KernelChoiceModel, fitted on the training part, the "kernel" set of prenet.fit); then the test
error per implementation, ours against (c).

Run:  .venv/bin/python bench/cpu_conv_kernels.py [--modes forward train_forward backward train] [--out FILE]
(about three minutes). Writes bench/results/cpu_conv_kernels.md.
"""
import argparse
import time

import numpy as np
import pandas as pd

from prenet import training
from prenet.datasets import cpu_folder, load_cpu
from report import RESULTS, write_report

KIND = "conv2d"


def relative_errors(frame, rows, target, raw, ms_column, bounds):
    predicted = training.to_ms(KIND, frame[rows], target, np.clip(raw, *bounds))
    measured = frame.loc[rows, ms_column].to_numpy(float)
    return np.abs(predicted - measured) / measured


def fit_mode(frame, mode):
    """{way: (validation errors, test errors)}, the classifier's test accuracy and the test rows' labels."""
    ours = training.OursInputs(KIND, frame, mode)
    frame, part, target, x, y = ours.frame, ours.part, ours.target, ours.x, ours.y
    ms_column = f"{mode}_ms"
    kernels = frame["kernel"].to_numpy(str)
    train = part == "train"
    bounds = training.target_range(target, y[train])
    known = np.c_[x, pd.get_dummies(kernels).to_numpy(float)]
    ways = {}
    for way, inputs in (("ours", x), ("kernel known", known)):
        model = training.make_model("xgboost").fit(inputs[train], y[train])
        ways[way] = tuple(relative_errors(frame, part == which, target, model.predict(inputs[part == which]),
                                          ms_column, bounds) for which in ("validation", "test"))
    chooser = training.KernelChoiceModel(training.make_model("xgboost")).fit(x[train], y[train], kernels[train])
    ways["kernel predicted"] = tuple(relative_errors(frame, part == which, target,
                                                     chooser.predict(x[part == which]), ms_column, bounds)
                                     for which in ("validation", "test"))
    test = part == "test"
    recorded = np.where(np.isin(kernels, chooser.classes), kernels, training.RARE_KERNELS)
    accuracy = float((chooser.classes[chooser.kernel_codes(x[test])] == recorded[test]).mean())
    return ways, accuracy, kernels[test]


def shown(label):
    """A label in a table cell: its passes apart by semicolons (a bar would split the cell)."""
    return label.replace("|", "; ")


def pct(values, q):
    return f"{100 * float(np.quantile(values, q)):.1f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="*", default=["forward", "train_forward", "backward", "train"])
    parser.add_argument("--out", default=RESULTS / "cpu_conv_kernels.md")
    args = parser.parse_args()
    started = time.monotonic()
    frame = load_cpu()[KIND]
    if "kernel" not in frame:
        raise SystemExit(f"no kernel labels for the CPU set's convolutions beside {cpu_folder()}: run "
                         "`.venv/bin/python -m prenet.onednn_kernels` first")
    summary = ["| mode | ours: validation | ours: test | kernel known: test | kernel predicted: validation | "
               "kernel predicted: test | classifier's test accuracy |", "| --- | --- | --- | --- | --- | --- | --- |"]
    per_kernel = []
    for mode in args.modes:
        ways, accuracy, labels = fit_mode(frame, mode)

        def cell(way, which):
            errors = ways[way][which]
            return f"{pct(errors, 0.5)} / {pct(errors, 0.9)}"

        summary.append(f"| {mode} | {cell('ours', 0)} | {cell('ours', 1)} | {cell('kernel known', 1)} | "
                       f"{cell('kernel predicted', 0)} | {cell('kernel predicted', 1)} | {100 * accuracy:.0f}% |")
        if mode == "train":
            for label in pd.Series(labels).value_counts().index:
                rows = labels == label
                per_kernel.append(f"| {shown(label)} | {int(rows.sum())} | {pct(ways['ours'][1][rows], 0.5)} / "
                                  f"{pct(ways['ours'][1][rows], 0.9)} | {pct(ways['kernel predicted'][1][rows], 0.5)}"
                                  f" / {pct(ways['kernel predicted'][1][rows], 0.9)} |")
    counts = frame["kernel"].value_counts()
    text = "\n".join([
        "# CPU convolutions: the implementation PyTorch and oneDNN run, and the predictors' error", "",
        f"`.venv/bin/python bench/cpu_conv_kernels.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). The CPU set's {len(frame)} convolution configurations (data/cpu and "
        "its companions, the fastest of each configuration's timings), each labelled with the implementations of "
        "its forward pass, input gradient and weight gradient (`python -m prenet.onednn_kernels`, data/cpu_kernels/"
        "). xgboost on our features, 80/10/10 split by configuration; median / 90th percentile relative error. "
        "'kernel known' is an oracle (the label an input); 'kernel predicted' is what a bundle serves "
        "(training.KernelChoiceModel: a classifier picks the label from our features, the regressor reads its pick).",
        "", *summary, "",
        "Test error of the training step by implementation (forward; input gradient; weight gradient; "
        "'native' is PyTorch's own kernel):", "",
        "| implementation | test rows | ours | kernel predicted |", "| --- | --- | --- | --- |", *per_kernel, "",
        "Configurations per implementation:", "", "| implementation | configurations |", "| --- | --- |",
        *[f"| {shown(label)} | {count} |" for label, count in counts.items()], ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
