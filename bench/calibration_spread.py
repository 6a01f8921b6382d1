"""How much the CPU validation's result depends on which calibration of this CPU is used: the validation's cases
(bench/validate_cpu.py) measured once, then predicted with each of several calibrations made one after another on
this machine (prenet.host_calibration, about two minutes each), so that the calibrations alone differ.

Run:  .venv/bin/python bench/calibration_spread.py [--calibrations 3] [--files FILE ...] [--out FILE]
(about seven minutes with three new calibrations). `--files` judges existing calibration files instead of making
new ones. Writes bench/results/calibration_spread.md.
"""
import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

import prenet
from prenet import host_calibration
from report import RESULTS, write_report
from validate_cpu import CASES, percentile_90



def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibrations", type=int, default=3, help="calibrations to make (without --files)")
    parser.add_argument("--files", nargs="*", type=Path, help="existing calibration files to judge instead")
    parser.add_argument("--dataset-size", type=int, default=256)
    parser.add_argument("--out", type=Path, default=RESULTS / "calibration_spread.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    files = list(args.files or [])
    if not files:
        folder = Path(tempfile.mkdtemp(prefix="prenet-calibrations-"))
        for i in range(args.calibrations):
            files.append(host_calibration.calibrate(folder / f"calibration-{i}.json"))
    # each calibration in a cache folder of its own, under the name prenet.predict looks for (PRENET_CACHE)
    caches = []
    for path in files:
        caches.append(Path(tempfile.mkdtemp(prefix="prenet-cache-")))
        shutil.copyfile(path, caches[-1] / host_calibration.calibration_path().name)
    torch.manual_seed(0)
    cases, measured = [], []
    for name, factory, inputs, batches in CASES:
        for batch in batches:
            model = factory()
            cases.append((name, batch, model, inputs))
            measured.append(prenet.measure(model, batch=batch, dataset_size=args.dataset_size, device="cpu",
                                           threads=1, **inputs).epoch_seconds)
            print(f"measured {name} at batch {batch}: {measured[-1]:.3f} s", flush=True)
    rows, summary = [], []
    for path, cache in zip(files, caches):
        os.environ["PRENET_CACHE"] = str(cache)
        signed = []
        for (name, batch, model, inputs), seconds in zip(cases, measured):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                estimate = prenet.predict(model, batch=batch, gpu="cpu", dataset_size=args.dataset_size, **inputs)
            assert estimate.calibrated, "predicted without this calibration"
            signed.append((estimate.epoch_seconds - seconds) / seconds)
        errors = [abs(e) for e in signed]
        summary.append((statistics.median(errors), percentile_90(errors)))
        rows.append(f"| {Path(path).name} | {100 * summary[-1][0]:.1f}% | {100 * summary[-1][1]:.1f}% | " +
                    " | ".join(f"{100 * e:+.0f}%" for e in signed) + " |")
        print(rows[-1], flush=True)
    header = " | ".join(f"{name} {batch}" for name, batch, _, _ in cases)
    text = "\n".join([
        "# The CPU validation under several calibrations of one CPU", "",
        f"`.venv/bin/python bench/calibration_spread.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; {host_calibration.calibration_path().stem}): the cases of "
        f"bench/validate_cpu.py measured once (`prenet.measure`, epochs of {args.dataset_size} samples, one thread), "
        f"predicted with each of {len(files)} calibrations made one after another on this machine. Median and "
        "90th percentile of the absolute errors, then each case's signed error (predicted over measured, less 1).",
        "", f"| calibration | median | 90th pct | {header} |", "| --- " * (3 + len(cases)) + "|", *rows, "",
        f"Medians range over {100 * min(m for m, _ in summary):.1f}-{100 * max(m for m, _ in summary):.1f}%, "
        f"90th percentiles over {100 * min(p for _, p in summary):.1f}-{100 * max(p for _, p in summary):.1f}%.",
        ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
