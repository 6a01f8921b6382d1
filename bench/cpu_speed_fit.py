"""Does dividing out the host's recorded speed make better CPU predictors? On a CPU set whose rows carry the host's
speed (prenet.collect.SPEED_COLUMNS: a fixed product and a fixed copy timed after each row), each kind and mode is
fitted as prenet.fit fits it (our features, xgboost, the training part of its split by configuration) on the times
as measured, and on the times scaled to the set's typical speed by the product or by the copy
(prenet.datasets.at_typical_speed); and, with --first, on another set of the same configurations timed before
(data/cpu, whose stretches of rows ran up to 1.7 times slow, data/README.md). All are judged on the same held-out
rows: the test configurations' rows of the set that ran at its typical speed (both references within TYPICAL of
their medians), against their times as measured, so that neither the scaling nor a slow stretch moves the yardstick.

Run:  taskset -c 0 .venv/bin/python bench/cpu_speed_fit.py [--data data/cpu_speed] [--first data/cpu]
          [--modes train forward] [--kinds conv2d ...] [--out FILE]
Writes bench/results/cpu_speed_fit.md (a few minutes).
"""
import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prenet import training
from prenet.datasets import at_typical_speed, load_cpu
from report import write_report

ROOT = Path(__file__).resolve().parents[1]
TYPICAL = 0.05  # a row whose two references lie this close to their medians ran at the typical speed
WAYS = {"as measured": None, "scaled by the product": "reference_matmul_ms",
        "scaled by the copy": "reference_copy_ms"}


def key_strings(frame, columns):
    return frame[columns].astype(str).agg("|".join, axis=1).to_numpy()


def errors(kind, fitted_on, judged_on, mode):
    """Relative errors of a predictor fitted as prenet.fit fits one (our features, xgboost) on the rows of
    `fitted_on` whose configurations fall in the training part of `judged_on`'s split (seed 0), on `judged_on`'s
    test rows marked `typical`, against their `measured` times."""
    column = f"{mode}_ms"
    optimizer = ["optimizer"] if mode in ("optimizer", "train") else []
    fitted_on, judged_on = ([frame[frame[column].notna() & (frame[column] > 0)].reset_index(drop=True)
                             for frame in (fitted_on, judged_on)])
    keys = training.config_keys(kind, judged_on) + optimizer
    part = dict(zip(key_strings(judged_on, keys), training.split_by_configuration(judged_on, keys, 0)))
    train = np.array([part.get(key) == "train" for key in key_strings(fitted_on, keys)])
    names = training.feature_sets(kind, fitted_on["gpu"].unique(), mode,
                                  fitted_on["optimizer"].unique() if optimizer else ())["ours"]
    target = training.target_for("ours", mode)
    inputs = training.model_inputs(kind, fitted_on, names, optimizer[0] if optimizer else None)
    y = training.target_values(kind, fitted_on, target, column)
    model = training.make_candidate("ours", "xgboost", names).fit(inputs[train], y[train])
    result = {"model": model, "target_range": training.target_range(target, y[train])}
    test = judged_on[np.array([part[key] == "test" for key in key_strings(judged_on, keys)]) & judged_on["typical"]]
    inputs = training.model_inputs(kind, test, names, optimizer[0] if optimizer else None)
    predicted = training.to_ms(kind, test, target, training.clipped_targets(result, inputs))
    return np.abs(predicted / test["measured"].to_numpy() - 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "cpu_speed")
    parser.add_argument("--first", type=Path, help="a set of the same configurations timed before (data/cpu)")
    parser.add_argument("--modes", nargs="*", default=["train", "forward"])
    parser.add_argument("--kinds", nargs="*")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cpu_speed_fit.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    tables = load_cpu(args.data)
    ways, speeds = {"as measured": tables}, {}
    for way, reference in WAYS.items():
        if reference:
            ways[way], speeds[reference] = at_typical_speed(tables, reference)
    if args.first:
        ways["the first set"] = load_cpu(args.first)
    rows, summary = [], {way: [] for way in ways}
    for kind in args.kinds or sorted(tables):
        measured = tables[kind]
        typical = np.ones(len(measured), bool)
        for reference, speed in speeds.items():
            typical &= (np.abs(measured[reference] / speed - 1) <= TYPICAL).to_numpy()
        for mode in args.modes:
            if measured[f"{mode}_ms"].notna().sum() < 100:
                continue
            cells = []
            judged_on = measured.assign(typical=typical, measured=measured[f"{mode}_ms"])
            for way, frames in ways.items():
                e = errors(kind, frames[kind], judged_on, mode)
                summary[way].append((np.median(e), np.quantile(e, 0.9)))
                cells.append(f"{100 * np.median(e):.1f}% / {100 * np.quantile(e, 0.9):.1f}%")
            rows.append(f"| {kind} | {mode} | {len(e)} | " + " | ".join(cells) + " |")
            print(rows[-1], flush=True)
    every = pd.concat([frame[list(speeds)] for frame in tables.values()])
    spread = [f"{reference.split('_')[1]} {speed:.3f} ms typical (10th-90th percentile "
              f"{np.quantile(every[reference], 0.1):.3f}-{np.quantile(every[reference], 0.9):.3f})"
              for reference, speed in speeds.items()]
    at_typical = np.ones(len(every), bool)
    for reference, speed in speeds.items():
        at_typical &= (np.abs(every[reference] / speed - 1) <= TYPICAL).to_numpy()
    lines = [f"| {way} | {100 * np.median([m for m, _ in cells]):.2f}% | "
             f"{sum(m <= 0.05 and p <= 0.15 for m, p in cells)} of {len(cells)} |" for way, cells in summary.items()]
    def shown(path):
        return path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path

    command = " ".join(["taskset -c 0 .venv/bin/python bench/cpu_speed_fit.py", f"--data {shown(args.data)}"]
                       + ([f"--first {shown(args.first)}"] if args.first else [])
                       + ([f"--kinds {' '.join(args.kinds)}"] if args.kinds else []))
    first = (f"; and on the first set, {shown(args.first)}, the same configurations timed before, as measured"
             if args.first else "")
    write_report(args.out, "\n".join([
        "# CPU predictors fitted with the host's recorded speed divided out", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.monotonic() - started:.0f} s). "
        f"{len(every)} rows of {shown(args.data)}; the host's speed as they ran: {'; '.join(spread)}; "
        f"{at_typical.mean():.0%} of rows ran at the typical speed (both within {TYPICAL:.0%}). Each kind and mode "
        "fitted on our features with xgboost (the training part of prenet.fit's split): on the set's times as "
        f"measured, and scaled to the typical speed by the product or by the copy{first}. Every cell is judged on "
        "the same rows, the test configurations' rows that ran at the typical speed, against their measured times "
        "(median / 90th percentile relative error). Issue 4's target: 5% / 15%.", "",
        "| fitted on | median of the medians | kind and mode pairs within 5% / 15% |", "| --- | --- | --- |",
        *lines, "",
        "| kind | mode | test rows at the typical speed | " + " | ".join(ways) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in ways) + " |", *rows, ""]))


if __name__ == "__main__":
    main()
