"""Validation on this machine's CPU: prenet.predict(gpu="cpu") against prenet.measure(device="cpu") for small
and medium models at several batch sizes, one thread (as the CPU layer data was measured).

Run:  .venv/bin/python bench/validate_cpu.py [--dataset-size 1024] [--other-host [--uncalibrated] | --bundle FOLDER]
          [--out FILE] [--set models | convolutions] [--keep-memory]
Writes bench/results/validate_cpu.md (the convolutions set: validate_cpu_convolutions.md) and prints the table.
The models set is the issue's list; the convolutions set has two-layer stacks of the convolutions the conv2d kind
does not describe (1-d, 3-d, transposed, dilated, non-square), which the general convolution kind times as
their implicit GEMMs. On a CPU other than the measured host it stops unless
given --other-host; then the predictors are calibrated to this CPU first (prenet.host_calibration, about a
minute, once per machine) unless --uncalibrated; or with --bundle, by the predictors of FOLDER, fitted on this
CPU's own layer data (`PRENET_CPU_DATA=... prenet.fit --data cpu`, data/README.md), with PRENET_HOST_CATALOG naming
its host and PRENET_HOST_COSTS its host costs. Epochs of the protocol's 1024 samples by default (a few minutes;
with 256, as the reports before 2026-11-26 used, the MLP's epoch at batch 256 was one step of 8-12 ms, measured as
noisily as that).
"""
import argparse
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn as nn

import prenet
from prenet import host_calibration, host_memory
from prenet.catalog import unmeasured_host_warning
from prenet.uncertainty import fitted_devices
from report import RESULTS, write_report



class Mlp(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


class SmallCnn(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 10))


class LstmLanguageModel(nn.Module):
    def __init__(self, vocab=2000, dim=128):
        super().__init__()
        self.embed, self.lstm, self.head = nn.Embedding(vocab, dim), nn.LSTM(dim, dim, batch_first=True), \
            nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


class TinyTransformer(nn.Module):
    def __init__(self, vocab=2000, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder, self.head = nn.TransformerEncoder(layer, 2), nn.Linear(dim, 10)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(1))


def resnet18_small():
    import torchvision

    return torchvision.models.resnet18(num_classes=10)


CASES = [  # name, factory, input (shape or example), batches
    ("mlp", Mlp, {"input_shape": (1, 28, 28)}, (16, 64, 256)),
    ("small_cnn", SmallCnn, {"input_shape": (3, 32, 32)}, (16, 64)),
    ("resnet18_64px", resnet18_small, {"input_shape": (3, 64, 64)}, (8, 32)),
    ("lstm_lm", LstmLanguageModel, {"example_input": torch.randint(2000, (1, 35))}, (16, 64)),
    ("transformer", TinyTransformer, {"example_input": torch.randint(2000, (1, 64))}, (16, 64)),
]


def stacked(layer, width, second):
    """Two convolutions with a ReLU between: `layer`, then `second` (taking `width` channels)."""
    return lambda: nn.Sequential(layer(), nn.ReLU(), second(width))


CONVOLUTIONS = [
    ("conv1d_k5_len256", stacked(lambda: nn.Conv1d(64, 128, 5, padding=2), 128,
                                 lambda c: nn.Conv1d(c, 128, 5, padding=2)), {"input_shape": (64, 256)}, (16,)),
    ("conv3d_k3_16x32x32", stacked(lambda: nn.Conv3d(16, 32, 3, padding=1), 32,
                                   lambda c: nn.Conv3d(c, 32, 3, padding=1)), {"input_shape": (16, 16, 32, 32)}, (4,)),
    ("conv_transpose2d_k4_s2", stacked(lambda: nn.ConvTranspose2d(64, 64, 4, stride=2, padding=1), 64,
                                       lambda c: nn.ConvTranspose2d(c, 32, 4, stride=2, padding=1)),
     {"input_shape": (64, 32, 32)}, (8,)),
    ("conv2d_dilated2_56px", stacked(lambda: nn.Conv2d(64, 64, 3, padding=2, dilation=2), 64,
                                     lambda c: nn.Conv2d(c, 64, 3, padding=2, dilation=2)),
     {"input_shape": (64, 56, 56)}, (8,)),
    ("conv2d_1x7_7x1_28px", stacked(lambda: nn.Conv2d(64, 64, (1, 7), padding=(0, 3)), 64,
                                    lambda c: nn.Conv2d(c, 64, (7, 1), padding=(3, 0))),
     {"input_shape": (64, 28, 28)}, (16,)),
]
SETS = {"models": (CASES, "validate_cpu.md", "Whole-model validation on this machine's CPU"),
        "convolutions": (CONVOLUTIONS, "validate_cpu_convolutions.md",
                         "Convolutions of the general kind (implicit GEMM) on this machine's CPU")}


def reference_matmul_ms(repeats=50):
    """Median milliseconds of a 512x512 fp32 matrix product on one thread: the machine's speed when the cases ran
    (this virtual machine runs stretches 1.2-1.7 times slower, data/README.md), printed in the report."""
    torch.set_num_threads(1)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def percentile_90(errors):
    """The 90th percentile of `errors` by nearest rank, as this report and bench/calibration_spread.py take it."""
    ordered = sorted(errors)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset-size", type=int, default=1024)
    parser.add_argument("--other-host", action="store_true",
                        help="run on a CPU other than the measured host: the predictors calibrated to it "
                             "(prenet calibrate, made first where missing); the report says so")
    parser.add_argument("--uncalibrated", action="store_true",
                        help="with --other-host: the measured host's predictions, not calibrated to this CPU")
    parser.add_argument("--keep-memory", action="store_true",
                        help="measure with freed memory kept for reuse (prenet.measure(keep_memory=True)): steps "
                             "without the page faults that the default allocator adds (bench/cpu_page_faults.py)")
    parser.add_argument("--bundle", type=Path,
                        help="CPU predictors fitted on this CPU's own layer data (prenet.fit --data cpu, with "
                             "PRENET_CPU_DATA and PRENET_HOST_CATALOG naming the set and its host), used in place of "
                             "the packaged ones: the host they time is the one they were fitted on")
    parser.add_argument("--set", choices=SETS, default="models", help="which cases (default: models)")
    parser.add_argument("--out", type=Path, help=f"report file (default: under {RESULTS}, by set)")
    args = parser.parse_args(argv)
    cases, file_name, title = SETS[args.set]
    args.out = args.out or RESULTS / file_name
    host = "cpu"  # the packaged predictors' host
    if args.bundle:
        fitted = fitted_devices(args.bundle)
        if len(fitted) != 1:
            parser.error(f"--bundle {args.bundle}: fitted on {list(fitted) or 'no device'}; one host is needed")
        host = fitted[0]
    other_host = unmeasured_host_warning(host)
    if other_host and (args.bundle or not args.other_host):
        parser.exit(2, f"validate_cpu: {other_host}; predicted and measured times would be of different CPUs " +
                    ("(the bundle's host is not this machine's CPU)\n" if args.bundle else
                     "(pass --other-host to compare them anyway)\n"))
    torch.manual_seed(0)
    rows, errors = [], []
    started = time.monotonic()
    calibration = None
    if other_host:
        if args.uncalibrated:
            os.environ["PRENET_CACHE"] = tempfile.mkdtemp(prefix="prenet-uncalibrated-")  # no calibration there
        else:
            calibration = host_calibration.load() or host_calibration.load(host_calibration.calibrate())
    speed_before = reference_matmul_ms()
    for name, factory, inputs, batches in cases:
        for batch in batches:
            model = factory()
            with warnings.catch_warnings():  # said once, in the report
                warnings.simplefilter("ignore")
                estimate = prenet.predict(model, batch=batch, gpu=host, dataset_size=args.dataset_size,
                                          bundle=args.bundle, **inputs)
            measured = prenet.measure(model, batch=batch, dataset_size=args.dataset_size, device="cpu", threads=1,
                                      keep_memory=args.keep_memory, **inputs)
            error = abs(estimate.epoch_seconds - measured.epoch_seconds) / measured.epoch_seconds
            errors.append(error)
            rows.append(f"| {name} | {batch} | {measured.epoch_seconds:.3f} ({measured.epoch_min_seconds:.3f}-"
                        f"{measured.epoch_max_seconds:.3f}) | {estimate.epoch_seconds:.3f} | {100 * error:.1f}% |")
            print(rows[-1], flush=True)
    speed = (f"This machine's speed: a 512x512 fp32 matrix product (one thread) took {speed_before:.2f} ms before the "
             f"cases and {reference_matmul_ms():.2f} ms after (2.6 ms as usual on 2026-11-26, 3.1 ms in a slow "
             "spell).")
    errors.sort()
    command_tail = ((" --keep-memory" if args.keep_memory else "") +
                    (f" --other-host{' --uncalibrated' if args.uncalibrated else ''} --out {args.out}"
                     if other_host else "") + (f" --bundle {args.bundle} --out {args.out}" if args.bundle else "") +
                    (f" --set {args.set}" if args.set != "models" else ""))
    on_this_cpu = ([f"**Not the measured host**: {other_host}.", ""] if other_host and not calibration else
                   [f"**Not the measured host**: the CPU predictors {calibration.describe()} "
                    f"(`prenet calibrate`, {calibration.path}).", ""] if calibration else [])
    p90 = percentile_90(errors)
    variables = "".join(f"{name}={os.environ[name]} " for name in ("PRENET_HOST_CATALOG", "PRENET_HOST_COSTS")
                        if args.bundle and name in os.environ)
    text = "\n".join([
        f"# {title}", "",
        f"`{variables}.venv/bin/python bench/validate_cpu.py --dataset-size {args.dataset_size}{command_tail}` "
        f"({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s; one thread; SGD with momentum; fp32). "
        "Measured: `prenet.measure` "
        "(protocol, epochs of the given size" + (f"; {host_memory.KEPT}" if args.keep_memory else
                                                 "; the C library's default allocator") + "); predicted: " +
        (f"`prenet.predict(gpu=\"{host}\", bundle=...)` with CPU predictors fitted on this CPU's own layer data "
         f"({args.bundle}; host costs: {os.environ.get('PRENET_HOST_COSTS', 'the packaged ones')})." if args.bundle else
         "`prenet.predict(gpu=\"cpu\")` with the packaged CPU predictors."), "", speed, "", *on_this_cpu,
        f"Median error {100 * statistics.median(errors):.1f}%, 90th percentile {100 * p90:.1f}% over {len(errors)} "
        "cases" + (" (targets: 10% and 20%)." if args.set == "models" else "."), "",
        "| model | batch | measured epoch s (min-max) | predicted s | error |", "| --- | --- | --- | --- | --- |",
        *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
