"""Did the machine keep one speed while a CPU set was collected? Every EVERY-th configuration of each kind is timed
again now, by the same harness and settings (one thread, this process's core), and its measured training step is
held against the row's: per stretch of STRETCH samples (collected minutes apart, one after another), the median
ratio of the row's time to today's. A machine that changed speed during the collection shows as stretches whose
ratio leaves the kind's own median by more than SHIFT; a configuration's own noise (1-3% between two timings,
data/README.md) does not. Run it twice, apart, to tell a change during the collection from one now. Where the set's
rows carry the host's speed (prenet.collect.SPEED_COLUMNS, timed by the harness after each row), the ratios are also
given with that speed divided out, each row's time scaled by its own reference: if the reference follows the
machine, the scaled ratios of a configuration's two timings stay near 1 whenever each ran.

Run:  taskset -c 1 .venv/bin/python bench/cpu_retime.py [--data data/cpu] [--every 25] [--kinds add ...]
          [--out FILE]
(about 4% of the set's collection time: some 4-5 minutes for data/cpu at --every 25). Writes
bench/results/cpu_retime.md (with --data, cpu_retime_<folder's name>.md) and the rows timed today beside it as
CSV, in the set's format.
"""
import argparse
import csv
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prenet.collect import COLUMNS, ENVIRONMENT_COLUMNS, SPEED_COLUMNS, Harness, result_row
from prenet.progress import progress_bar
from prenet.sampling import sample_config
from report import RESULTS, write_report

ROOT = Path(__file__).resolve().parents[1]
STRETCH = 200  # samples per stretch: a few minutes of collection
SHIFT = 0.15  # a stretch this far from its kind's median ratio is flagged
TIMEOUT_S = 120.0


def retime(folder, kinds, every, out_csv):
    """The rows of `folder` at every `every`-th sample (ok ones), each with today's timing of its configuration
    (columns suffixed `_now`); today's rows also go to `out_csv`."""
    frames = {kind: pd.read_csv(folder / f"{kind}.csv") for kind in kinds}
    chosen = {kind: frame[(frame["sample"] % every == 0) & (frame["status"] == "ok")].sort_values("sample")
              for kind, frame in frames.items()}
    harness = Harness("cpu", threads=1)
    environment = {k: harness.environment.get(k, "") for k in ENVIRONMENT_COLUMNS}
    bar = progress_bar(sum(len(rows) for rows in chosen.values()), "retimed", True, unit="config")
    now = []
    try:
        with open(out_csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            for kind, rows in chosen.items():
                for sample in rows["sample"]:
                    config = sample_config(kind, int(sample))
                    row = result_row(kind, int(sample), config, environment,
                                     harness.time(int(sample), kind, config, TIMEOUT_S))
                    writer.writerow(row)
                    now.append(row)
                    bar.update(1)
    finally:
        bar.close()
        harness.stop()
    then = pd.concat(chosen.values())
    columns = ["kind", "sample", "train_step_ms", "forward_ms", "timestamp"] + [
        c for c in SPEED_COLUMNS if c in then and then[c].notna().all()]
    today = pd.DataFrame(now)
    return then[columns].merge(today[today["status"] == "ok"][columns], on=["kind", "sample"], suffixes=("", "_now"))


def speed_ratios(pairs):
    """{label: per row, the set's training step over today's}: as timed, and with each timing divided by its own
    reference speed where both have one (SPEED_COLUMNS)."""
    ratios = {"as timed": pairs["train_step_ms"] / pairs["train_step_ms_now"]}
    for column in SPEED_COLUMNS:
        if f"{column}_now" in pairs:
            ratios[f"over the {column.split('_')[1]}"] = ratios["as timed"] * pairs[f"{column}_now"] / pairs[column]
    return ratios


def spread_lines(pairs):
    """Per way of taking the ratio (speed_ratios): its median, 10th-90th percentile and the median distance of a
    row's ratio from 1, over all rows and per kind."""
    lines = ["| ratio | rows | median | 10th-90th percentile | median abs(log ratio) | worst kind's |",
             "| --- | --- | --- | --- | --- | --- |"]
    for label, ratio in speed_ratios(pairs).items():
        distance = np.abs(np.log(ratio))
        worst = distance.groupby(pairs["kind"]).median().sort_values()
        lines.append(f"| {label} | {len(ratio)} | {ratio.median():.3f} | {np.quantile(ratio, 0.1):.3f}-"
                     f"{np.quantile(ratio, 0.9):.3f} | {distance.median():.3f} | {worst.index[-1]} "
                     f"{worst.iloc[-1]:.3f} |")
    return lines


def stretch_table(pairs):
    """Per kind and stretch: collection time, rows, median ratio (then / now) of the training step and the forward
    pass, and whether the stretch leaves the kind's median by more than SHIFT."""
    pairs = pairs.assign(step_ratio=pairs["train_step_ms"] / pairs["train_step_ms_now"],
                         forward_ratio=pairs["forward_ms"] / pairs["forward_ms_now"],
                         stretch=pairs["sample"] // STRETCH)
    lines, flagged = [], []
    for kind, rows in pairs.groupby("kind", sort=False):
        middle = rows["step_ratio"].median()
        for stretch, part in rows.groupby("stretch"):
            ratio = part["step_ratio"].median()
            shifted = abs(ratio / middle - 1) > SHIFT
            first, last = part["timestamp"].min()[:16], part["timestamp"].max()[11:16]
            if shifted:
                flagged.append(f"{kind} {stretch * STRETCH}-{stretch * STRETCH + STRETCH - 1}")
            lines.append(f"| {kind} | {stretch * STRETCH}-{stretch * STRETCH + STRETCH - 1} ({first}-{last}) | "
                         f"{len(part)} | {ratio:.2f} | {part['forward_ratio'].median():.2f} | "
                         f"{'shifted' if shifted else ''} |")
    return lines, flagged


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a CPU set's folder (default: data/cpu)")
    parser.add_argument("--every", type=int, default=25, help="retime samples 0, N, 2N, ... (default 25)")
    parser.add_argument("--kinds", nargs="*", help="harness kinds (default: every CSV of the set)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    folder = args.data or ROOT / "data" / "cpu"
    kinds = args.kinds or sorted(path.stem for path in folder.glob("*.csv"))
    missing = [kind for kind in kinds if not (folder / f"{kind}.csv").is_file()]
    if missing or not kinds:
        parser.error(f"no {folder}/<kind>.csv for {missing or 'any kind'}")
    out = args.out or RESULTS / (f"cpu_retime_{folder.name}.md" if args.data else "cpu_retime.md")
    started = time.monotonic()
    pairs = retime(folder, kinds, args.every, out.with_suffix(".csv"))
    lines, flagged = stretch_table(pairs)
    overall = pairs["train_step_ms"] / pairs["train_step_ms_now"]
    command = " ".join(["taskset -c 1 .venv/bin/python bench/cpu_retime.py"]
                       + ([f"--data {args.data}"] if args.data else []) + [f"--every {args.every}"]
                       + ([f"--kinds {' '.join(args.kinds)}"] if args.kinds else []))
    text = "\n".join([
        "# A CPU set timed again: did the machine keep one speed?", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.monotonic() - started:.0f} s). "
        f"{len(pairs)} configurations of {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder} "
        f"(every {args.every}th sample) timed again by the harness, one thread; the rows of today beside this "
        f"file ({out.with_suffix('.csv').name}). Ratio: the set's time over today's (training step; forward pass "
        f"beside it), median per stretch of {STRETCH} samples. A stretch is marked shifted where its ratio leaves "
        f"the kind's median by more than {SHIFT:.0%}.", "",
        f"- all kinds: ratio median {overall.median():.2f}, 10th-90th percentile "
        f"{np.quantile(overall, 0.1):.2f}-{np.quantile(overall, 0.9):.2f}",
        f"- shifted stretches: {', '.join(flagged) if flagged else 'none'}", "",
        *(["The set's time over today's, as timed and with each timing's recorded host speed divided out:", "",
           *spread_lines(pairs), ""] if len(speed_ratios(pairs)) > 1 else []),
        "| kind | samples (collected, UTC) | rows | step: set / today | forward: set / today | |",
        "| --- | --- | --- | --- | --- | --- |", *lines, ""])
    write_report(out, text)


if __name__ == "__main__":
    main()
