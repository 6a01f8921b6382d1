"""The host calibration judged on layers it was not fitted on: layers drawn at random (not spread) among sampler
indices that neither the CPU set (0..1,999) nor the calibration's reference layers (100,000 onwards) use, timed
here with the same harness, against the measured host's predictions scaled by this CPU's calibration and
unscaled.

Run:  .venv/bin/python bench/calibration_heldout.py [--per-kind 12] [--calibrations FILE ...] [--out FILE]
(about a minute). Judges this CPU's calibration (`prenet calibrate`), or each calibration file given, on the same
timed layers; writes bench/results/calibration_heldout.md.
"""
import argparse
import random
import time
from pathlib import Path

import numpy as np

from prenet import host_calibration
from prenet.collect import Harness
from report import write_report

FIRST_INDEX = 300_000  # beyond the reference layers' CANDIDATES x 5 from 100,000
CANDIDATES = 200  # per harness kind (x 5 for the activations, one kind per op)


def errors(rows, calibration, part, at_least_ms=0.0):
    """Relative errors of the calibrated and of the unscaled predictions of `part` over `rows` predicted at least
    `at_least_ms`."""
    calibrated, unscaled = [], []
    for row in rows:
        predicted = row[f"predicted_{part}_ms"]
        if predicted < at_least_ms:
            continue
        measured = row[f"{part}_ms"]
        factor = calibration.factor(part, row["kind"], predicted, row["native_config"])
        calibrated.append(abs(predicted * factor - measured) / measured)
        unscaled.append(abs(predicted - measured) / measured)
    return np.array(calibrated), np.array(unscaled)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=12, help="layers drawn per native kind")
    parser.add_argument("--calibrations", nargs="*", type=Path, help="calibration files to judge (default: this "
                        "CPU's)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" /
                        "calibration_heldout.md")
    args = parser.parse_args(argv)
    paths = args.calibrations or [host_calibration.calibration_path()]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        parser.exit(2, f"calibration_heldout: no calibration at {', '.join(missing)}; run `prenet calibrate` first\n")
    calibrations = [(path, host_calibration.load(path)) for path in paths]
    started = time.monotonic()
    rng = random.Random(0)
    picked = [layer for _, layers in sorted(host_calibration.candidate_layers(FIRST_INDEX, CANDIDATES).items())
              for layer in rng.sample(layers, min(args.per_kind, len(layers)))]
    harness, rows = Harness("cpu", threads=1), []
    try:
        for i, (kind, config, native, native_config, predicted) in enumerate(picked):
            result = harness.time(i, kind, config, host_calibration.HARNESS_TIMEOUT_S)
            if result["status"] == "ok":
                rows.append({"kind": native, "native_config": native_config,
                             "predicted_forward_ms": predicted["forward"], "predicted_train_ms": predicted["train"],
                             "forward_ms": result["forward_ms"], "train_ms": result["train_step_ms"]})
    finally:
        harness.stop()
    command = " ".join(["bench/calibration_heldout.py", f"--per-kind {args.per_kind}"] +
                       ([f"--calibrations {' '.join(map(str, paths))}"] if args.calibrations else []))
    lines = ["# The host calibration on layers it was not fitted on", "",
             f"`.venv/bin/python {command}` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s): "
             f"{len(rows)} layers timed here (of {len(picked)} drawn). Relative error of each layer's predicted "
             "time against its time here.", ""]
    for path, calibration in calibrations:
        lines += [f"`{path}`: {calibration.describe()}.", "",
                  "| part | layers | calibrated: median | 90th percentile | uncalibrated: median | 90th percentile |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for part in ("forward", "train"):
            for label, at_least in (("all", 0.0), ("predicted >= 0.5 ms", 0.5)):
                calibrated, unscaled = errors(rows, calibration, part, at_least)
                lines.append(f"| {part}, {label} | {len(calibrated)} | {100 * np.median(calibrated):.1f}% | "
                             f"{100 * np.quantile(calibrated, 0.9):.1f}% | {100 * np.median(unscaled):.1f}% | "
                             f"{100 * np.quantile(unscaled, 0.9):.1f}% |")
        lines.append("")
    write_report(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
