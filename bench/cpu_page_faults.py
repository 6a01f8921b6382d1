"""The CPU validation's models measured twice: with the C library's default allocator (prenet.measure as the
protocol runs it) and keeping freed memory for reuse (prenet.measure(keep_memory=True), as PyTorch's caching
allocator does on a GPU), beside prenet.predict(gpu="cpu"), and what faulting in a fresh page costs on this
machine. Shows how much of a CPU step is the virtual machine's page faults rather than the kernels that the
predictors time.

Each measurement runs in its own process (keeping memory lasts for a process), the two settings one after the
other for each case, so that a change in the machine's state between them shows as little as it can.

Run:  .venv/bin/python bench/cpu_page_faults.py [--dataset-size 256] [--out FILE]   (three to five minutes)
Writes bench/results/cpu_page_faults.md. On a CPU other than the measured host the predictions are those
calibrated to it (prenet calibrate; bench/validate_cpu.py --other-host makes the calibration where missing).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

import prenet
from prenet import host_memory
from prenet.host_cost import cpu_model
from report import RESULTS, write_report
from validate_cpu import CASES, percentile_90



def measured_seconds(name, batch, dataset_size, keep_memory):
    """The median epoch of a validate_cpu case measured in a fresh process (one thread)."""
    command = [sys.executable, __file__, "--measure", name, str(batch), "--dataset-size", str(dataset_size)]
    done = subprocess.run(command + (["--keep-memory"] if keep_memory else []), capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"measuring {name} at batch {batch} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_one(name, batch, dataset_size, keep_memory):
    """Worker: prints the measurement of one case as JSON."""
    _, factory, inputs, _ = next(case for case in CASES if case[0] == name)
    torch.manual_seed(0)
    result = prenet.measure(factory(), batch=batch, dataset_size=dataset_size, device="cpu", threads=1,
                            keep_memory=keep_memory, **inputs)
    print(json.dumps({"epoch_seconds": result.epoch_seconds, "allocator": result.environment["allocator"]}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset-size", type=int, default=256)
    parser.add_argument("--out", type=Path, default=RESULTS / "cpu_page_faults.md")
    parser.add_argument("--measure", nargs=2, metavar=("CASE", "BATCH"), help=argparse.SUPPRESS)
    parser.add_argument("--keep-memory", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        measure_one(args.measure[0], int(args.measure[1]), args.dataset_size, args.keep_memory)
        return
    started = time.monotonic()
    first_touch = host_memory.first_touch_us_per_page(megabytes=64)
    rows, errors = [], {"default": [], "kept": []}
    for name, factory, inputs, batches in CASES:
        for batch in batches:
            with warnings.catch_warnings():  # the other host's warning: the report says what was predicted
                warnings.simplefilter("ignore")
                predicted = prenet.predict(factory(), batch=batch, gpu="cpu", dataset_size=args.dataset_size,
                                           **inputs).epoch_seconds
            default = measured_seconds(name, batch, args.dataset_size, False)
            kept = measured_seconds(name, batch, args.dataset_size, True)
            if (default["allocator"], kept["allocator"]) != (host_memory.DEFAULT, host_memory.KEPT):
                raise RuntimeError(f"the measurements ran with {default['allocator']} and {kept['allocator']}")
            times = {"default": default["epoch_seconds"], "kept": kept["epoch_seconds"]}
            for setting, seconds in times.items():
                errors[setting].append(abs(predicted - seconds) / seconds)
            rows.append(f"| {name} | {batch} | {predicted:.3f} | {times['default']:.3f} | {times['kept']:.3f} | "
                        f"{times['default'] / times['kept']:.2f} | {100 * errors['default'][-1]:.1f}% | "
                        f"{100 * errors['kept'][-1]:.1f}% |")
            print(rows[-1], flush=True)
    summary = [f"- {label}: median error {100 * statistics.median(errors[key]):.1f}%, 90th percentile "
               f"{100 * percentile_90(errors[key]):.1f}% over {len(errors[key])} cases"
               for key, label in (("default", "measured with the default allocator (the protocol as it stands)"),
                                  ("kept", "measured with freed memory kept"))]
    text = "\n".join([
        "# CPU steps and the virtual machine's page faults", "",
        f"`.venv/bin/python bench/cpu_page_faults.py --dataset-size {args.dataset_size}` "
        f"({time.strftime('%Y-%m-%d %H:%M')}, {time.monotonic() - started:.0f} s; {cpu_model()}, "
        "one thread, SGD with momentum, fp32). Each case measured by `prenet.measure` in a fresh process, first with "
        f"the C library's default allocator, then with {host_memory.KEPT}; predicted by `prenet.predict(gpu=\"cpu\")` "
        "(calibrated to this CPU where it is not the measured host).", "",
        f"Faulting in a fresh page here: {first_touch:.2f} us (`prenet.host_memory.first_touch_us_per_page`, 64 MiB; "
        "bare metal takes about 0.1-0.3 us).", "", *summary, "",
        "| model | batch | predicted s | measured s, default allocator | measured s, memory kept | default / kept | "
        "error, default | error, kept |", "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
