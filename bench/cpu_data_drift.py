"""How much of the CPU predictors' held-out error is the collection's machine rather than the configuration: in a CPU
set (data/cpu_intel_xeon by default, the one that drifted), one elementwise operator on a tensor of at most TINY
elements does the same work whatever its shape (its time is the call's fixed cost), so the spread of those rows'
times is noise no feature can explain. Per stretch of the collection (CHUNK samples in the order they were
measured): the median forward time of such rows and the share of them slower than SLOW_US, beside each row's own
repeatability (half its interquartile range over its repetitions, relative to its median).

Run:  .venv/bin/python bench/cpu_data_drift.py [--data FOLDER] [--cases add activation:relu] [--out FILE]
(seconds); a case is a kind of the set, with `:op` for one operator of a kind that has several.
Writes bench/results/cpu_data_drift.md (with --data, cpu_data_drift_<folder's name>.md).
"""
import argparse
import time
from pathlib import Path

import pandas as pd

from report import RESULTS, write_report

ROOT = Path(__file__).resolve().parents[1]
TINY = 300  # elements: the call's fixed cost dominates (a few nanoseconds of work against about a microsecond)
CHUNK = 200  # samples per stretch of the collection
SLOW_US = 1.2  # between the two speeds the rows show (about 0.9 and 1.7 us)


def tiny_rows(folder, case):
    kind, _, op = case.partition(":")
    frame = pd.read_csv(folder / f"{kind}.csv")
    frame = frame[(frame["status"] == "ok") & (frame["batch"] * frame["features"] <= TINY)
                  & ((frame["op"] == op) if op else True)].copy()
    frame["forward_us"] = 1e3 * frame["forward_ms"]
    frame["repeatability"] = (frame["forward_p75_ms"] - frame["forward_p25_ms"]) / (2 * frame["forward_ms"])
    frame["stretch"] = frame["sample"] // CHUNK
    return frame


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=["add", "activation:relu"])
    parser.add_argument("--data", type=Path, help="a CPU set's folder (default: data/cpu_intel_xeon)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    folder = args.data or ROOT / "data" / "cpu_intel_xeon"
    out = args.out or RESULTS / (f"cpu_data_drift_{folder.name}.md" if args.data else "cpu_data_drift.md")
    lines, summary = [], []
    for case in args.cases:
        frame = tiny_rows(folder, case)
        for stretch, rows in frame.groupby("stretch"):
            first, last = rows["timestamp"].min()[:16], rows["timestamp"].max()[11:16]
            lines.append(f"| {case} | {stretch * CHUNK}-{stretch * CHUNK + CHUNK - 1} ({first}-{last}) | "
                         f"{len(rows)} | {rows['forward_us'].median():.2f} | "
                         f"{(rows['forward_us'] > SLOW_US).mean():.0%} | {rows['repeatability'].median():.1%} |")
        spread = frame["forward_us"].quantile([0.1, 0.5, 0.9])
        summary.append(f"- {case}: {len(frame)} rows of at most {TINY} elements; forward time 10th / 50th / 90th "
                       f"percentile {spread[0.1]:.2f} / {spread[0.5]:.2f} / {spread[0.9]:.2f} us (the 90th "
                       f"{spread[0.9] / spread[0.5] - 1:+.0%} of the median); each row's own repeatability "
                       f"{frame['repeatability'].median():.1%} (median)")
    text = "\n".join([
        "# A CPU set's machine over the collection: one workload, timed throughout", "",
        f"`.venv/bin/python bench/cpu_data_drift.py{' --data ' + str(args.data) if args.data else ''} --cases "
        f"{' '.join(args.cases)}` ({time.strftime('%Y-%m-%d')}). "
        f"Rows of {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder} whose tensor has at most "
        f"{TINY} elements (the same work for every such row), by stretch of {CHUNK} samples in collection order: "
        f"median forward time and the share slower than {SLOW_US} us.", "",
        *summary, "",
        "| case | samples (measured, UTC) | rows | median forward (us) | slower than "
        f"{SLOW_US} us | repeatability (median) |", "| --- | --- | --- | --- | --- | --- |", *lines, ""])
    write_report(out, text)


if __name__ == "__main__":
    main()
