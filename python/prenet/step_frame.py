"""The host's work in a CPU training step that no operator accounts for: the protocol's frame around the layers (the
batch taken from the resident data, zero_grad, the autocast context, the loss's Python, the call that starts the
backward pass, the optimizer's step) and each module call's Python (its forward function and the calls into torch it
makes). The CPU predictors time layers from C++ (the harness), where none of it runs, so a tiny network trains
several times slower than its operators add up to (8-wide Linear layers with ReLUs between them at batch 2, SGD: 124
us a step measured against 20 us predicted with one layer, 674 against 346 with 17; 2026-11-26, the Intel Xeon of
CPUID model 167).

Measured on this machine (part of prenet.host_cost, and so of `prenet calibrate`): the protocol's training step of
chains of tiny Linear layers (prenet.measure, one thread), less what prenet.predict(gpu="cpu") gives them without
this frame; that remainder, over the chains, is a fixed cost per step and a cost per module call (least squares),
each optimizer's own step timed apart, as the protocol builds it, for its fixed cost and its cost per parameter
tensor (on the CPU PyTorch's optimizers loop over tensors; a GPU's use the multi-tensor path, prenet.host_cost's
optimizer_tensor_us).

A GPU step's host is given the frame's fixed cost (its operators, module calls and tensors are costed one by one
there). `python -m prenet.step_frame FILE` measures the frame on this machine on top of the host cost file FILE and
writes it into that file, with this machine's environment: how data/gpu_host_costs.json got its frame.
"""
import statistics
import time
from pathlib import Path

WIDTH, BATCH, SAMPLES = 4, 2, 256  # tiny layers, whose operators cost next to nothing beside the frame
CHAIN_PAIRS = (0, 4, 12)  # (ReLU, Linear) pairs after the first Linear of each chain
REPEATS = 5  # timed epochs per chain (the median taken)
TENSORS = (1, 64)  # one-element parameters the optimizer steps over, for its cost per tensor


def chain(pairs):
    """A Linear layer of WIDTH features, then `pairs` times a ReLU and another."""
    import torch

    layers = [torch.nn.Linear(WIDTH, WIDTH)]
    for _ in range(pairs):
        layers += [torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH)]
    return torch.nn.Sequential(*layers)


def optimizer_step_us(optimizer):
    """(microseconds per step, per parameter tensor) of `optimizer`'s step as the protocol builds it (prenet.measure's
    make_optimizer: on the CPU, a loop over tensors): intercept and slope through steps over TENSORS one-element
    tensors (the median of 200 each)."""
    import torch

    from .measure import make_optimizer

    medians = []
    for count in TENSORS:
        tensors = [torch.nn.Parameter(torch.zeros(1)) for _ in range(count)]
        for tensor in tensors:
            tensor.grad = torch.ones(1)
        step = make_optimizer(optimizer, tensors).step
        step()  # its state made
        times = []
        for _ in range(200):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
        medians.append(1e6 * statistics.median(times))
    per_tensor = (medians[1] - medians[0]) / (TENSORS[1] - TENSORS[0])
    return medians[0] - TENSORS[0] * per_tensor, per_tensor


def _step_us(model, optimizer, costs):
    """(measured, predicted without the frame) microseconds of a step of `model` at BATCH: prenet.measure's median
    epoch over its steps, and prenet.predict's step with the packaged CPU predictors and host costs `costs`."""
    from .estimate import estimate_traced, trace_steps
    from .measure import measure

    measured = measure(model, batch=BATCH, input_shape=(WIDTH,), dataset_size=SAMPLES, optimizer=optimizer,
                       device="cpu", repeats=REPEATS, threads=1)
    traced = trace_steps(model, BATCH, SAMPLES, (WIDTH,))
    predicted = estimate_traced(traced, BATCH, "cpu", SAMPLES, optimizer, host_costs=costs, calibrated=False)
    return 1e6 * measured.epoch_seconds / measured.iterations, 1e6 * predicted.step_seconds


def measure(optimizers, host_costs):
    """{"fixed_us": {optimizer: us}, "module_us": us, "tensor_us": {optimizer: us}, "chains": [...]}: the frame
    of a CPU step on this machine (see the module's description) for each of `optimizers` (prenet.predict's names;
    the chains are trained with the first), on top of `host_costs` (prenet.host_cost's other figures). An
    optimizer's fixed cost is the first's, less the first's own step's and plus its own (optimizer_step_us: timed
    apart, two optimizers' difference is measured more closely than by training a chain with each). Each figure at
    least 0."""
    import numpy as np

    steps = {name: optimizer_step_us(name) for name in optimizers}
    tensor_us = {name: max(0.0, per_tensor) for name, (_, per_tensor) in steps.items()}
    frameless = dict(host_costs, step_frame={"fixed_us": dict.fromkeys(optimizers, 0.0), "module_us": 0.0,
                                             "tensor_us": tensor_us})
    first, chains = optimizers[0], []
    for pairs in CHAIN_PAIRS:
        model = chain(pairs)
        measured, predicted = _step_us(model, first, frameless)
        chains.append({"pairs": pairs, "modules": len(list(model.modules())), "optimizer": first,
                       "measured_us": measured, "predicted_us": predicted})
    modules = np.array([c["modules"] for c in chains], float)
    beyond = np.array([c["measured_us"] - c["predicted_us"] for c in chains])
    module_us = max(0.0, float(np.polyfit(modules, beyond, 1)[0]))  # beyond = fixed + modules x module_us
    fixed = float(np.mean(beyond - modules * module_us))
    fixed_us = {name: max(0.0, fixed - steps[first][0] + steps[name][0]) for name in optimizers}
    return {"fixed_us": fixed_us, "module_us": module_us, "tensor_us": tensor_us, "chains": chains}


def describe(frame):
    """A measured frame in one line, as `prenet calibrate` prints it."""
    fixed, tensor = frame["fixed_us"], frame["tensor_us"]
    return (f"a step's frame {fixed['sgd']:.0f} us with SGD ({fixed['adam']:.0f} with Adam), {frame['module_us']:.1f} "
            f"us a module call, the optimizer's loop {tensor['sgd']:.1f} us a parameter tensor with SGD "
            f"({tensor['adam']:.1f} with Adam)")


def write_into(path):
    """Measures the frame on this machine on top of the host costs in `path` (a prenet.host_cost file; a frame it
    holds is replaced) and writes it there, with this machine's environment; returns the frame."""
    import json

    from . import host_cost
    from .estimate import OPTIMIZERS

    costs = host_cost.read(path)
    frameless = {key: value for key, value in host_cost.checked(costs, f"host cost file {path}").items()
                 if key != "step_frame"}
    frame = host_cost.on_one_thread(lambda: measure(tuple(OPTIMIZERS), frameless))
    frame["environment"] = host_cost.environment()
    Path(path).write_text(json.dumps(dict(costs, step_frame=frame), indent=1) + "\n")
    return frame


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prenet.step_frame",
                                     description="Measures this machine's step frame on top of a host cost file "
                                                 "(python -m prenet.host_cost) and writes it into that file.")
    parser.add_argument("file", help="the host cost file, e.g. data/gpu_host_costs.json")
    print(describe(write_into(parser.parse_args().file)))
