"""Which CPU layer data makes the better predictors, where the machine changes speed? Two collections of the same
configurations, taken at different times (--first, data/cpu, and --second, a set whose rows carry the host's speed:
prenet.collect.SPEED_COLUMNS), give each configuration two timings. Each kind and mode is fitted as prenet.fit fits
it (our features, xgboost) on the training configurations of one of: the first set as measured; the second as
measured; the second scaled to its typical speed by its recorded product or copy (prenet.datasets.at_typical_speed);
both sets, each configuration's faster timing (prenet.datasets.fastest_of_repeats); both sets, every row. All are
judged on the same held-out truth: the test configurations (the split of both sets' configurations, seed 0) whose
two timings agree within AGREE, at the geometric mean of the two. A disturbance that slowed one timing leaves its
configuration out of the yardstick instead of moving it.

Run:  taskset -c 0 .venv/bin/python bench/cpu_speed_fit.py [--first data/cpu] [--second data/cpu_second]
          [--modes train forward] [--kinds conv2d ...] [--out FILE]
Writes bench/results/cpu_speed_fit.md (several minutes).
"""
import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prenet import training
from prenet.datasets import at_typical_speed, cpu_folders, fastest_of_repeats, load_harness_rows
from report import write_report

ROOT = Path(__file__).resolve().parents[1]
AGREE = 0.05  # a configuration whose two timings are this close makes the yardstick


def truth(kind, first, second, mode):
    """(one row per configuration timed in both sets with both times of `mode`: its configuration, `measured` the
    geometric mean of the two times, `agree` whether they agree within AGREE; the configuration key columns)."""
    column = f"{mode}_ms"
    optimizer = ["optimizer"] if mode in ("optimizer", "train") else []
    keys = training.config_keys(kind, first) + optimizer
    pairs = first.merge(second[keys + [column]], on=keys, suffixes=("", "_second"))
    pairs = pairs[(pairs[column] > 0) & (pairs[f"{column}_second"] > 0)].drop_duplicates(keys).reset_index(drop=True)
    ratio = pairs[f"{column}_second"] / pairs[column]
    return pairs.assign(measured=np.sqrt(pairs[column] * pairs[f"{column}_second"]),
                        agree=np.abs(np.log(ratio)) <= np.log1p(AGREE)), keys


def errors(kind, fitted_on, judged, keys, part, mode):
    """Relative errors, on `judged`'s test configurations that agree, of a predictor fitted as prenet.fit fits
    one (our features, xgboost) on the rows of `fitted_on` whose configurations are in the training part."""
    result, = training.fit_kind(kind, fitted_on, mode, families=("xgboost",), sets=("ours",), split=part)
    tested = training.configuration_strings(judged, keys).map(part) == "test"
    test = judged[tested & judged["agree"]]
    inputs = training.model_inputs(kind, test, result["features"], "optimizer" if "optimizer" in keys else None)
    predicted = training.to_ms(kind, test, result["target"], training.clipped_targets(result, inputs))
    return np.abs(predicted / test["measured"].to_numpy() - 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=Path, default=ROOT / "data" / "cpu")
    parser.add_argument("--second", type=Path, default=ROOT / "data" / "cpu_second")
    parser.add_argument("--modes", nargs="*", default=["train", "forward"])
    parser.add_argument("--kinds", nargs="*")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cpu_speed_fit.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    # each set alone, with its models-profile rows: load_cpu would take the faster of both sets' timings
    first, second = (load_harness_rows(cpu_folders(folder, companions=("models",)))
                     for folder in (args.first, args.second))
    both = {kind: pd.concat([first[kind], second[kind]], ignore_index=True) for kind in second}
    ways = {"first set": first, "second set": second,
            "second, scaled by its product": at_typical_speed(second, "reference_matmul_ms")[0],
            "second, scaled by its copy": at_typical_speed(second, "reference_copy_ms")[0],
            "both, the faster timing": fastest_of_repeats(both), "both, every row": both}
    rows, summary, agreement = [], {way: [] for way in ways}, []
    for kind in args.kinds or sorted(second):
        for mode in args.modes:
            if second[kind][f"{mode}_ms"].notna().sum() < 100:
                continue
            judged, keys = truth(kind, first[kind], second[kind], mode)
            part = dict(zip(training.configuration_strings(judged, keys),
                            training.split_by_configuration(judged, keys, 0)))
            agreement.append(judged["agree"].mean())
            cells = []
            for way, tables in ways.items():
                e = errors(kind, tables[kind], judged, keys, part, mode)
                summary[way].append({"median_rel": np.median(e), "p90_rel": np.quantile(e, 0.9)})
                cells.append(f"{100 * np.median(e):.1f}% / {100 * np.quantile(e, 0.9):.1f}%")
            rows.append(f"| {kind} | {mode} | {len(judged)} | {judged['agree'].mean():.0%} | {len(e)} | "
                        + " | ".join(cells) + " |")
            print(rows[-1], flush=True)
    lines = [f"| {way} | {100 * np.median([c['median_rel'] for c in cells]):.2f}% | "
             f"{100 * np.median([c['p90_rel'] for c in cells]):.2f}% | "
             f"{sum(map(training.meets_target, cells))} of {len(cells)} |" for way, cells in summary.items()]

    def shown(path):
        return path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path

    command = " ".join(["taskset -c 0 .venv/bin/python bench/cpu_speed_fit.py", f"--first {shown(args.first)}",
                        f"--second {shown(args.second)}", f"--modes {' '.join(args.modes)}"]
                       + ([f"--kinds {' '.join(args.kinds)}"] if args.kinds else []))
    write_report(args.out, "\n".join([
        "# CPU predictors from two timings of one set of configurations", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.monotonic() - started:.0f} s). "
        f"Each kind and mode fitted on our features with xgboost on the training configurations of each data "
        f"below; every cell judged on the same truth: the test configurations whose two timings agree within "
        f"{AGREE:.0%} (a median {np.median(agreement):.0%} of a kind's configurations do), at the geometric mean of "
        "the two (median / 90th percentile relative error). Issue 4's target: 5% / 15%.", "",
        "| fitted on | median of the medians | median of the 90th percentiles | kind and mode pairs within 5% / 15% |",
        "| --- | --- | --- | --- |", *lines, "",
        "| kind | mode | configurations timed twice | agreeing | test rows | " + " | ".join(ways) + " |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in ways) + " |", *rows, ""]))


if __name__ == "__main__":
    main()
