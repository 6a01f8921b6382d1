"""Whether a convolution's time grows with the number of distinct convolution shapes its process ran before it,
as NeuSight's measurements do (bench/conv_measurement_order.py: +0.2-0.6 ms a call after about 5,000 shapes, the
same for small and large convolutions). A GPU predictor learns from those rows; a training process runs a few dozen
shapes, so the answer says which of the data's regimes a training step is in.

In a fresh process per setting (torch.backends.cudnn.benchmark on, as NeuSight timed; off, as the protocol and
PyTorch's default run), the PROBES are timed before any other convolution and again after each checkpoint of
distinct random shapes (each run forward once, as a collection does): CUDA events around one call, median of ten
calls after three (bench/cudnn_choice.py's timing), and the host's time to issue the call (the GPU idle before it).

Run on a GPU machine:  python bench/conv_order_effect.py --out FILE.jsonl [--shapes 5000] [--max-minutes M]
One JSON object per (setting, shapes run before, probe) with the environment and the run's start, written as
measured; a setting whose last checkpoint is in FILE is skipped, one cut short by the time limit runs again from the
start (its earlier rows stay, under their own run). `--device cpu` runs the same loop on the CPU: a check of the
script.
"""
import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

from cudnn_choice import environment, timed_ms

# (batch, in_channels, out_channels, height = width): a small, a medium and a large 3x3 convolution
PROBES = ((8, 64, 64, 14), (1, 128, 128, 7), (32, 256, 256, 28))
CHECKPOINTS = (0, 250, 1000, 2500, 5000)
SETTINGS = {"benchmark": True, "heuristic": False}  # label -> torch.backends.cudnn.benchmark


def random_shapes(count, seed=0):
    """`count` distinct (batch, in_channels, out_channels, size) of 3x3 convolutions, small enough to run fast."""
    rng, shapes = random.Random(seed), set()
    while len(shapes) < count:
        shapes.add((rng.randint(1, 16), rng.randint(3, 512), rng.randint(3, 512), rng.randint(5, 64)))
    return sorted(shapes, key=lambda _: rng.random())


def conv_call(shape, device):
    """A forward call of a 3x3 convolution (stride 1, padding 1, no bias, as NeuSight's) on an input of `shape`."""
    batch, channels, out_channels, size = shape
    conv = nn.Conv2d(channels, out_channels, 3, 1, 1, bias=False).to(device)
    x = torch.randn(batch, channels, size, size, device=device)
    return lambda: conv(x)


def issue_ms(run, device, repeats=10):
    """Median host milliseconds to issue `run()` with the device idle before it (synchronised between calls)."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        run()
        times.append(1e3 * (time.perf_counter() - started))
    return statistics.median(times)


def worker(setting, shapes, checkpoints, device, deadline):
    """Prints a JSON line per (checkpoint, probe) in this fresh process, until the last checkpoint or `deadline`."""
    with torch.no_grad():
        torch.backends.cudnn.benchmark = SETTINGS[setting]
        probes = [(probe, conv_call(probe, device)) for probe in PROBES]
        run = 0
        for checkpoint in checkpoints:
            for shape in shapes[run:checkpoint]:
                conv_call(shape, device)()
                if time.time() > deadline:
                    return
            run = checkpoint
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            for probe, call in probes:
                print(json.dumps({"setting": setting, "shapes_before": checkpoint, "probe": probe,
                                  "forward_ms": timed_ms(call, device), "issue_ms": issue_ms(call, device)}),
                      flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", type=int, default=CHECKPOINTS[-1], help="distinct shapes run in all")
    parser.add_argument("--max-minutes", type=float, default=6.0)
    parser.add_argument("--worker", choices=list(SETTINGS), help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("CUDA is not available on this machine; --device cpu checks the script")
    checkpoints = [c for c in CHECKPOINTS if c < args.shapes] + [args.shapes]
    if args.worker:
        worker(args.worker, random_shapes(args.shapes), checkpoints, device, args.deadline)
        return
    if args.out is None:
        parser.error("--out FILE.jsonl is required")
    done = set()
    if args.out.exists():
        done = {row["setting"] for row in map(json.loads, args.out.read_text().splitlines())
                if row["shapes_before"] == checkpoints[-1]}
    env = environment(device)
    deadline = time.time() + 60 * args.max_minutes
    run = time.strftime("%Y-%m-%dT%H:%M:%S")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for setting in [s for s in SETTINGS if s not in done]:
        # each setting in a process of its own: what a process has run before is the variable measured
        share = (deadline - time.time()) / (len(SETTINGS) - len(done))
        command = [sys.executable, __file__, "--worker", setting, "--device", args.device, "--shapes",
                   str(args.shapes), "--deadline", str(time.time() + share)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child, args.out.open("a") as out:
            for line in child.stdout:
                row = json.loads(line)
                out.write(json.dumps({**row, "run": run, "environment": env}) + "\n")
                out.flush()
                print(f"{setting}: after {row['shapes_before']} shapes, probe {row['probe']}: "
                      f"{row['forward_ms']:.3f} ms, issued in {row['issue_ms']:.3f} ms", flush=True)
        done.add(setting)


if __name__ == "__main__":
    main()
