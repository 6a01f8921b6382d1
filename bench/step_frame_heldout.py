"""Does the CPU step's frame (prenet.step_frame: the protocol's work around a step's operators and each module
call's Python, measured on tiny Linear chains) predict networks it was not measured on? Small networks unlike those
chains (other widths, activations, normalisation, dropout, a convolution, an embedding, Adam) and the CPU
validation's MLP and small CNN, each trained by the protocol (prenet.measure, one thread, freed memory kept) and
predicted with this machine's host costs (its calibration's, else the packaged ones) with and without the frame, on
the same measured epochs. The frame is measured again first (this virtual machine's speed drifts by tens of percent
within an hour), or with --kept-frame taken as the host costs hold it.

Run:  taskset -c 1 .venv/bin/python bench/step_frame_heldout.py [--kept-frame] [--out FILE]   (seconds)
Writes bench/results/step_frame_heldout.md.
"""
import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

import prenet
from prenet import host_calibration, host_cost, step_frame
from prenet.estimate import OPTIMIZERS, estimate_traced, trace_steps
from report import write_report

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_cpu import Mlp, SmallCnn  # noqa: E402


class EmbeddingMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Embedding(100, 16), nn.Linear(16, 3)

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(1))


def tanh_mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5))


def normalised_mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 64),
                         nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10))


def tiny_cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10))


# name, factory, input, batch, samples, optimizer
CASES = [
    ("Tanh MLP, 32 wide", tanh_mlp, {"input_shape": (16,)}, 4, 512, "sgd"),
    ("MLP with LayerNorm, GELU, dropout", normalised_mlp, {"input_shape": (32,)}, 8, 512, "adam"),
    ("one 3x3 convolution, 8 px", tiny_cnn, {"input_shape": (1, 8, 8)}, 2, 512, "sgd"),
    ("embedding, mean, Linear", EmbeddingMean, {"example_input": torch.randint(0, 100, (1, 6))}, 4, 512, "adam"),
    ("validation's MLP", Mlp, {"input_shape": (1, 28, 28)}, 16, 1024, "sgd"),
    ("validation's MLP", Mlp, {"input_shape": (1, 28, 28)}, 64, 1024, "sgd"),
    ("validation's MLP", Mlp, {"input_shape": (1, 28, 28)}, 256, 1024, "sgd"),
    ("validation's small CNN", SmallCnn, {"input_shape": (3, 32, 32)}, 16, 1024, "sgd"),
]


def this_host_costs():
    """(host costs, where from): this machine's calibration's, else the packaged file's."""
    calibration = host_calibration.load()
    if calibration is not None and calibration.host_costs:
        return calibration.host_costs, f"the calibration {host_calibration.calibration_path()}"
    return host_cost.load(), "the packaged data/host_costs.json"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" /
                        "step_frame_heldout.md")
    parser.add_argument("--kept-frame", action="store_true", help="the host costs' own frame, as measured then "
                        "(default: measured again first, this machine's speed drifting by tens of percent in an hour)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # another CPU than the measured host: the calibration is applied (or not)
    costs, source = this_host_costs()
    frameless = {key: value for key, value in costs.items() if key != "step_frame"}
    started = time.monotonic()
    if args.kept_frame:
        if "step_frame" not in costs:
            parser.exit(2, f"step_frame_heldout: {source} has no step frame; measure it again (`prenet calibrate`, "
                        "or `python -m prenet.host_cost FILE` and PRENET_HOST_COSTS=FILE)\n")
    else:  # measured now, so that the machine's speed is the same for the frame and the networks
        costs = dict(frameless, step_frame=step_frame.measure(tuple(OPTIMIZERS), frameless))
        source += ", with the frame measured again at the start of this run"
    rows, errors = [], {"without": [], "with": []}
    for name, factory, inputs, batch, samples, optimizer in CASES:
        torch.manual_seed(0)
        model = factory()
        traced = trace_steps(model, batch, samples, **inputs)
        predicted = {label: estimate_traced(traced, batch, "cpu", samples, optimizer, host_costs=c).epoch_seconds
                     for label, c in (("without", frameless), ("with", costs))}
        measured = prenet.measure(model, batch=batch, dataset_size=samples, optimizer=optimizer, device="cpu",
                                  threads=1, keep_memory=True, repeats=3, **inputs).epoch_seconds
        for label, seconds in predicted.items():
            errors[label].append(abs(seconds - measured) / measured)
        steps = -(-samples // batch)
        rows.append(f"| {name} | {batch} | {optimizer} | {traced.modules} | "
                    f"{1e6 * measured / steps:.0f} | {1e6 * predicted['without'] / steps:.0f} "
                    f"({100 * (predicted['without'] / measured - 1):+.0f}%) | {1e6 * predicted['with'] / steps:.0f} "
                    f"({100 * (predicted['with'] / measured - 1):+.0f}%) |")
        print(rows[-1], flush=True)
    frame = costs["step_frame"]
    summary = [f"- {label} the frame: median error {100 * statistics.median(e):.1f}%, 90th percentile "
               f"{100 * float(np.quantile(e, 0.9)):.1f}% over {len(e)} cases" for label, e in errors.items()]
    text = "\n".join([
        "# The CPU step's frame on networks it was not measured on", "",
        f"`taskset -c 1 .venv/bin/python bench/step_frame_heldout.py{' --kept-frame' if args.kept_frame else ''}` "
        f"({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; {host_cost.cpu_model()}; one thread, freed memory kept). Host costs: "
        f"{source}, whose frame (prenet.step_frame, measured on chains of 4-wide Linear layers at batch 2): "
        f"{frame['fixed_us']['sgd']:.0f} us a step with SGD ({frame['fixed_us']['adam']:.0f} with Adam) and "
        f"{frame['module_us']:.1f} us a module call; per parameter tensor the optimizer's loop, "
        f"{frame['tensor_us']['sgd']:.1f} us with SGD and {frame['tensor_us']['adam']:.1f} with Adam (without the "
        "frame: the multi-tensor figure and the module call alone). Measured: prenet.measure's median of 3 epochs; "
        "both predictions are of the same measured epochs.", "",
        *summary, "",
        "| network | batch | optimizer | module calls a step | measured us a step | predicted without the frame | "
        "predicted with it |", "| --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
