"""A committed CPU validation report (bench/validate_cpu.py's) predicted again with the predictors as they are now,
against the epochs it measured: how a change of the CPU predictors moves whole models on a host no longer reachable
(the AMD EPYC the packaged CPU predictors were measured on), or on the same measured epochs of this machine.

Run:  .venv/bin/python bench/cpu_validation_repredicted.py REPORT [--calibrated] [--out FILE]
(seconds). Without --calibrated the packaged CPU bundle predicts as on its measured host (the reports measured
there); with it, as prenet.predict(gpu="cpu") does on this machine (its calibration, for a report measured here).
"""
import argparse
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import prenet
from prenet.predictors import PACKAGED_HOST_BUNDLE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import write_report  # noqa: E402
from validate_cpu import CASES  # noqa: E402  (the cases the reports measured)

ROW = re.compile(r"^\| (\w+) \| (\d+) \| ([\d.]+) \([^)]*\) \| ([\d.]+) \| ([\d.]+)% \|", re.M)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--calibrated", action="store_true", help="predict as on this machine, calibrated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = args.report.read_text()
    size = int(re.search(r"--dataset-size (\d+)", text).group(1))
    # (model, batch, measured s, predicted s, the report's error: of the unrounded times)
    rows = [(m[1], int(m[2]), float(m[3]), float(m[4]), float(m[5]) / 100) for m in ROW.finditer(text)]
    if not rows:
        parser.exit(2, f"{args.report}: no rows of bench/validate_cpu.py's table\n")
    cases = {name: (factory, inputs) for name, factory, inputs, _ in CASES}
    torch.manual_seed(0)
    lines, then, now = [], [], []
    for name, batch, measured, committed, error in rows:
        factory, inputs = cases[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = prenet.predict(factory(), batch=batch, gpu="cpu", dataset_size=size, progress=False,
                                      bundle=None if args.calibrated else str(PACKAGED_HOST_BUNDLE), **inputs)
        then.append(error)
        now.append(abs(estimate.epoch_seconds - measured) / measured)
        lines.append(f"| {name} | {batch} | {measured:.3f} | {committed:.3f} ({100 * then[-1]:.1f}%) | "
                     f"{estimate.epoch_seconds:.3f} ({100 * now[-1]:.1f}%) |")

    def summary(errors):
        return f"{100 * statistics.median(errors):.1f}% / {100 * float(np.quantile(errors, 0.9)):.1f}%"

    how = "calibrated to this machine" if args.calibrated else "as on the measured host"
    report = "\n".join([
        f"# {args.report.name} predicted again", "",
        f"`.venv/bin/python bench/cpu_validation_repredicted.py {args.report}"
        f"{' --calibrated' if args.calibrated else ''}` ({time.strftime('%Y-%m-%d')}): the report's measured "
        f"epochs ({size} samples, as it rounds them) against its predictions and the predictors' now ({how}).", "",
        f"Median / 90th percentile error: {summary(then)} in the report, {summary(now)} now.", "",
        "| model | batch | measured s | predicted in the report (error) | predicted now (error) |",
        "| --- | --- | --- | --- | --- |", *lines, ""])
    if args.out:
        write_report(args.out, report)
    else:
        print(report)


if __name__ == "__main__":
    main()
