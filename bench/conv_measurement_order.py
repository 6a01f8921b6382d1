"""Does the order in which NeuSight measured its convolutions explain the conv2d predictor's held-out error?

Each of NeuSight's conv files holds about 5,000 configurations, one GPU each, in the order they were measured (one
process per GPU, the same random order of shapes on all five). Here a row's position in its file is one more input
of the seen-GPU predictor (xgboost with the bundle's settings, target and 80/10/10 split by configuration): if the
held-out error falls, part of it is how far into its process a row was measured, which no feature of a layer
describes. Then, from that fit, what the position adds to a configuration's time, per GPU and by the size of the
convolution: the same milliseconds for small and large ones is an additive cost per call that grows as a process
measures more shapes (a host-side cost), a constant ratio a slowdown of the GPU (clocks, heat). linear and bmm are
shown for contrast: their files are sorted by size, so their position is their size.

Run:  .venv/bin/python bench/conv_measurement_order.py [--out FILE]   (about a minute)
Writes bench/results/conv_measurement_order.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prenet import training
from prenet.datasets import load_neusight
from prenet.measurement_order import position_model, predicted_at, with_position
from kernel_choice_ceiling import one_hot
from report import RESULTS, write_report

POSITIONS = (1000, 2500, 4000, 4900)  # positions at which the fitted effect is read, against position 0
SIZES = [0, 0.3, 1, 3, 10, np.inf]    # ms buckets of the configuration's time at position 0


def fitted(kind, frame, ours, with_order):
    """(model, inputs) of xgboost on our features (`ours`: training.OursInputs of `frame`), and the position where
    `with_order` (prenet.measurement_order.position_model), fitted on the training part of the split."""
    train = ours.part == "train"
    if with_order:
        return position_model(kind, frame, train)[:2]
    return training.make_model("xgboost").fit(ours.x[train], ours.y[train]), ours.x


def test_scores(kind, frame, model, x, target, part):
    rows = part == "test"
    predicted = training.to_ms(kind, frame[rows], target, model.predict(x[rows]))
    return training.scores(frame.loc[rows, "forward_ms"].to_numpy(float), predicted)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "conv_measurement_order.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    data = load_neusight()
    score_lines, order_lines = [], []
    conv = None
    for kind in ("conv2d", "linear", "bmm"):
        frame = with_position(data[kind])
        varying = [k for k in training.config_keys(kind, frame) if frame[k].nunique() > 1]
        correlation = ", ".join(f"{k} {np.corrcoef(frame['position'], np.log(frame[k]))[0, 1]:+.2f}" for k in varying)
        order_lines.append(f"| {kind} | {len(frame)} | {correlation} |")
        ours = training.OursInputs(kind, frame)  # with_position's rows all have a time: the same rows, in order
        target, part = ours.target, ours.part
        for with_order in (False, True):
            model, x = fitted(kind, frame, ours, with_order)
            s = test_scores(kind, frame, model, x, target, part)
            label = "ours + the row's position in its file" if with_order else "ours (the bundle's inputs)"
            score_lines.append(f"| {kind} | {label} | {s['median_rel']:.1%} | {s['p90_rel']:.1%} |")
            print(score_lines[-1], flush=True)
            if kind == "conv2d" and with_order:
                conv = frame, model, x, target, part
                # the kernel as measured, which no prediction for a user's layer knows: a ceiling
                exact = np.c_[x, one_hot(training.common_kernels(frame["kernel"]))]
                ceiling = training.make_model("xgboost").fit(exact[part == "train"], ours.y[part == "train"])
                s = test_scores(kind, frame, ceiling, exact, target, part)
                score_lines.append(f"| {kind} | ours + the row's position + the kernel NeuSight recorded (a ceiling) | "
                                   f"{s['median_rel']:.1%} | {s['p90_rel']:.1%} |")
                print(score_lines[-1], flush=True)
    frame, model, x, target, part = conv
    rows = part == "test"
    test = frame[rows].reset_index(drop=True)

    def at(position):
        return predicted_at("conv2d", test, (model, x[rows], target), position)

    start = at(0)
    size = pd.Series(pd.cut(start, SIZES).astype(str))
    buckets = [str(b) for b in pd.cut(pd.Series([0.1, 0.5, 2, 5, 20]), SIZES)]  # one value in each, in order
    shift_lines, gpu_lines = [], []
    for position in POSITIONS:
        later = at(position)
        added = pd.DataFrame({"ms": later - start, "log": np.log(later / start), "size": size, "gpu": test["gpu"]})
        by_size = added.groupby("size", sort=False)
        ms, ratio = by_size["ms"].median(), by_size["log"].median()
        shift_lines.append(f"| {position} | " + " | ".join(
            f"{ms.get(b, np.nan):+.3f} ms ({np.exp(ratio.get(b, np.nan)):.2f}x)" for b in buckets) + " |")
        per_gpu = added.groupby("gpu")["ms"].median()
        gpu_lines.append(f"| {position} | " + " | ".join(f"{per_gpu[g]:+.3f}" for g in per_gpu.index) + " |")
    counts = size.value_counts()
    text = "\n".join([
        "# The order of measurement in NeuSight's convolutions", "",
        f"`.venv/bin/python bench/conv_measurement_order.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). NeuSight's forward rows, five GPUs; xgboost (600 trees, depth 8) on "
        "our features with the bundle's target, fitted on the training part of the 80/10/10 split by configuration, "
        "judged on the test part (relative error); position: the row's index in its GPU's file.", "",
        "How the position relates to the configuration (correlation of the position with the log of each varying "
        "parameter): the conv files are in a random order of shapes, the others sorted by size.", "",
        "| kind | rows | correlation with the position |", "| --- | --- | --- |", *order_lines, "",
        "| kind | inputs | test median | test p90 |", "| --- | --- | --- | --- |", *score_lines, "",
        "What the position adds to a convolution's time, read from the fit with the position: each held-out "
        "configuration predicted at a later position against position 0, medians per size bucket (the time at "
        f"position 0; held-out rows per bucket: {', '.join(f'{b} {counts.get(b, 0)}' for b in buckets)}). The "
        "same milliseconds at every size is a cost added per call; a constant ratio would be a slower GPU.", "",
        "| position | " + " | ".join(f"{b} ms" for b in buckets) + " |", "| --- |" + " --- |" * len(buckets),
        *shift_lines, "",
        "The same, milliseconds per GPU (median over its held-out rows):", "",
        "| position | " + " | ".join(per_gpu.index) + " |", "| --- |" + " --- |" * len(per_gpu), *gpu_lines, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
