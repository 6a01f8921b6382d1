"""The host calibration judged on layers it was not fitted on: layers drawn at random (not spread) among sampler
indices that neither the CPU set (0..1,999) nor the calibration's reference layers (100,000 onwards) use,
LARGE_ELEMENTWISE layers (the sampler draws few large ones, so the reference layers leave them to the curves' ends)
and MODEL_CONVOLUTIONS convolutions drawn as models build them (the sampler's "models" profile), timed here with the
same harness, against the measured host's predictions scaled by this CPU's calibration (by each kind's chosen fit,
and by a curve for every kind), and unscaled.

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
# (native kind, harness kind, its extra keys) x (batch, features): elementwise layers of 0.1-8 million elements
LARGE_ELEMENTWISE = ([(op, "activation", {"op": op}) for op in ("relu", "gelu", "sigmoid", "tanh", "silu")] +
                     [("add", "add", {}), ("softmax", "softmax", {})],
                     [(8, 16384), (32, 16384), (64, 32768), (16, 262144), (128, 65536)])
MODEL_CONVOLUTIONS = 60


def model_convolutions():
    """The first MODEL_CONVOLUTIONS conv2d layers of the "models" sampling profile from FIRST_INDEX (as the other
    sets' tuples) among those predicted at most the reference layers' MAX_TRAIN_MS."""
    layers = host_calibration.candidate_layers(FIRST_INDEX, 10 * MODEL_CONVOLUTIONS, profile="models")["conv2d"]
    return layers[:MODEL_CONVOLUTIONS]


def large_elementwise_layers():
    """LARGE_ELEMENTWISE as (harness kind, harness configuration, native kind, native configuration, predicted)."""
    kinds, sizes = LARGE_ELEMENTWISE
    layers = []
    for native, harness_kind, extra in kinds:
        for batch, features in sizes:
            native_config = {"batch": batch, "features": features}
            layers.append((harness_kind, {**native_config, **extra, "optimizer": "sgd"}, native, native_config,
                           host_calibration.predicted_on_measured_host(native, native_config, "sgd")))
    return layers


def errors(rows, calibration, part, at_least_ms=0.0):
    """Relative errors of the predictions of `part` over `rows` predicted at least `at_least_ms`: calibrated by each
    kind's chosen fit, by a curve for every kind, and unscaled."""
    found = ([], [], [])
    for row in rows:
        predicted = row[f"predicted_{part}_ms"]
        if predicted < at_least_ms:
            continue
        measured = row[f"{part}_ms"]
        for fit, errors_of_fit in zip((None, "curve", "none"), found):
            factor = calibration.factor(part, row["kind"], predicted, row["native_config"], fit)
            errors_of_fit.append(abs(predicted * factor - measured) / measured)
    return [np.array(e) for e in found]


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
    sets = {"drawn": picked, "large elementwise": large_elementwise_layers(),
            "convolutions as models build them": model_convolutions()}
    timed = {name: [] for name in sets}
    harness = Harness("cpu", threads=1)
    try:
        for name, layers in sets.items():
            for i, (kind, config, native, native_config, predicted) in enumerate(layers):
                result = harness.time(i, kind, config, host_calibration.HARNESS_TIMEOUT_S)
                if result["status"] == "ok":
                    timed[name].append({"kind": native, "native_config": native_config,
                                        "predicted_forward_ms": predicted["forward"],
                                        "predicted_train_ms": predicted["train"],
                                        "forward_ms": result["forward_ms"], "train_ms": result["train_step_ms"]})
    finally:
        harness.stop()
    command = " ".join(["bench/calibration_heldout.py", f"--per-kind {args.per_kind}"] +
                       ([f"--calibrations {' '.join(map(str, paths))}"] if args.calibrations else []))
    counts = "; ".join(f"{name}: {len(timed[name])} of {len(layers)}" for name, layers in sets.items())
    lines = ["# The host calibration on layers it was not fitted on", "",
             f"`.venv/bin/python {command}` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s): "
             f"layers timed here ({counts}). Relative error of each layer's predicted time against its time here, "
             "calibrated (each kind by its chosen fit, and by a curve for every kind) and uncalibrated (median / 90th "
             "percentile).", ""]
    for path, calibration in calibrations:
        lines += [f"`{path}`: {calibration.describe()}.", "",
                  "| layers | part | count | calibrated | a curve for every kind | uncalibrated |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for name, rows in timed.items():
            for part in ("forward", "train"):
                for label, at_least in (("all", 0.0), ("predicted >= 0.5 ms", 0.5)):
                    found = errors(rows, calibration, part, at_least)
                    if not len(found[0]):
                        continue
                    lines.append(f"| {name}, {label} | {part} | {len(found[0])} | " + " | ".join(
                        f"{100 * np.median(e):.1f}% / {100 * np.quantile(e, 0.9):.1f}%" for e in found) + " |")
        lines.append("")
    write_report(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
