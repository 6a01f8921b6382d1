"""Host-side cost of a training step: what the CPU spends per operator, per module call, per autograd node and per
optimizer tensor before any device work, measured on this machine with tensors of one element (so the kernels
themselves cost next to nothing), and what faulting in a fresh page of memory costs (prenet.host_memory). On the CPU
the step's frame is measured too (prenet.step_frame: what the protocol's step does around its operators, and each
module call's Python), and the update's own arithmetic, per element and optimizer ("optimizer_element_ns"), right
after a backward pass over weights of UPDATE_SIZES elements (update_element_ns): its square roots and divisions keep
Adam's update from the memory's pace, so that counting its passes over memory as additions put Adam's update at 0.6
of its time here, and weights a step leaves in the caches update faster per element than those it has to fetch; and
a bernoulli_ draw per element ("bernoulli_element_ns"), dropout's noise, which the CPU's generator paces.
Issuing a kernel on a GPU costs more than dispatching an operator here: that cost comes from GPU hosts'
measurements (prenet.launch_gap), not from this machine.

`python -m prenet.host_cost` measures and writes data/host_costs.json (packaged with prenet: the costs of the
host the CPU predictors were measured on). A GPU step's host is costed with data/gpu_host_costs.json instead (the
same measurement on the Intel Xeon that was the measured host until 2026-11-26; the unseen-GPU validation has
been judged with it). The file PRENET_HOST_COSTS names replaces both: one measured on the machine that will
train (run the same command there), or bench/gpu_host_cost.py's output, whose "cpu" part it takes.
"""
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

from . import step_frame
from .host_memory import first_touch_us_per_page

PACKAGED_COSTS = Path(__file__).resolve().parent / "data" / "host_costs.json"
CPUINFO = Path("/proc/cpuinfo")
PACKAGED_GPU_HOST_COSTS = Path(__file__).resolve().parent / "data" / "gpu_host_costs.json"


def _per_call_us(step, calls, repeats=15):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return 1e6 * min(times) / calls  # the least disturbed run: the machine may be busy


def cpu_model():
    """This machine's CPU: its model name as /proc/cpuinfo gives it and, where it gives them, its CPUID family and
    model ("Intel(R) Xeon(R) Processor (family 6 model 167)"). The name alone can be a virtual machine's generic
    one: this project's machines have reported "Intel(R) Xeon(R) Processor" for CPUs of models 207 and 167, whose
    layer times differ, so a host (the catalog's aliases) and a calibration (its file) are known by both."""
    fields = {}
    try:
        for line in CPUINFO.read_text().splitlines():
            if not line.strip():
                break  # the first processor's block is enough: they are alike
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    if fields.get("cpu family") and fields.get("model"):
        return f"{name} (family {fields['cpu family']} model {fields['model']})"
    return name


def measure():
    """Per-call host costs in microseconds on this machine (one thread; the caller's thread count restored)."""
    return on_one_thread(_measure)


def on_one_thread(work):
    """What `work()` returns, run with PyTorch on one thread (the caller's thread count restored after)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return work()
    finally:
        torch.set_num_threads(threads)


def environment():
    """Where host costs are measured: this machine's CPU, torch and Python, one thread, today's date."""
    import torch

    return {"host_cpu": cpu_model(), "torch": torch.__version__, "python": platform.python_version(), "threads": 1,
            "date": time.strftime("%Y-%m-%d")}


def _measure():
    import torch

    from .estimate import OPTIMIZERS
    from .measure import make_optimizer

    a, b = torch.ones(1), torch.ones(1)
    n = 2000

    def ops():
        for _ in range(n):
            a + b

    identity = torch.nn.Identity()

    def modules():
        for _ in range(n):
            identity(a)

    def direct():
        for _ in range(n):
            pass

    chain = 500
    leaf = torch.ones(1, requires_grad=True)

    def backward():
        y = leaf
        for _ in range(chain):
            y = y * 1.0
        y.backward()

    def forward_chain():
        y = leaf
        for _ in range(chain):
            y = y * 1.0

    tensors = [torch.nn.Parameter(torch.ones(1)) for _ in range(200)]
    for t in tensors:
        t.grad = torch.ones(1)
    optimizers = {"sgd_momentum": torch.optim.SGD(tensors, lr=1e-3, momentum=0.9, foreach=True),
                  "adam": torch.optim.Adam(tensors, lr=1e-3, foreach=True)}
    per_tensor = {name: _per_call_us(opt.step, len(tensors)) for name, opt in optimizers.items()}
    loop_us = _per_call_us(direct, n)

    def element_ns(name, elements):
        """Per element: the update right after the backward pass of UPDATE_LAYERS square linear layers of
        `elements` weights in all (as a training step leaves them in the caches), less a step over as many tensors
        of one element (the per-tensor cost, counted apart)."""
        width = round(math.sqrt(elements / UPDATE_LAYERS))
        layers = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(UPDATE_LAYERS)])
        optimizer, batch = make_optimizer(name, layers.parameters()), torch.ones(16, width)

        def update():
            optimizer.zero_grad(set_to_none=True)
            layers(batch).sum().backward()
            started = time.perf_counter()
            optimizer.step()
            return time.perf_counter() - started

        update()  # its state made
        tiny = [torch.nn.Parameter(torch.zeros(1)) for _ in range(UPDATE_LAYERS)]
        for parameter in tiny:
            parameter.grad = torch.ones(1)
        tiny_optimizer = make_optimizer(name, tiny)
        tiny_optimizer.step()
        stepped = statistics.median(update() for _ in range(7))  # as a step finds its weights, not the best case
        return 1e9 * (stepped - 1e-6 * _per_call_us(tiny_optimizer.step, 1, repeats=5)) / (UPDATE_LAYERS * width ** 2)

    noise = torch.empty(BERNOULLI_ELEMENTS)

    costs = {
        "op_us": _per_call_us(ops, n) - loop_us,
        "module_call_us": _per_call_us(modules, n) - loop_us,
        "autograd_node_us": _per_call_us(backward, chain) - _per_call_us(forward_chain, chain),
        "optimizer_tensor_us": per_tensor,
        "optimizer_element_ns": {name: {str(n): element_ns(name, n) for n in UPDATE_SIZES} for name in OPTIMIZERS},
        "bernoulli_element_ns": 1e3 * _per_call_us(lambda: noise.bernoulli_(0.9), BERNOULLI_ELEMENTS, repeats=7),
        "first_touch_us_per_page": first_touch_us_per_page(),
        "environment": environment(),
    }
    costs["step_frame"] = step_frame.measure(tuple(OPTIMIZERS), costs)
    return costs


KEYS = ("op_us", "module_call_us", "autograd_node_us", "optimizer_tensor_us")
# Each optimizer's update (prenet.predict's names, estimate.OPTIMIZERS) is timed per element ("optimizer_element_ns")
# after a backward pass over this many weights in all (2-32 MB; ResNet-18 has 11.7 million, an MLP on MNIST half a
# million), in UPDATE_LAYERS square linear layers. On this project's Intel Xeon of CPUID model 167, SGD's update took
# 0.71, 0.85 and 1.47 ns per element so (ad hoc, 2026-11-26): in a step, 0.81 ns on an MLP's 0.54 million weights
# and 1.47 ns on ResNet-18's, while one 8 MB tensor stepped over and over, as it was timed before (one figure for
# every model), took 0.76 ns.
UPDATE_SIZES = (2 ** 19, 2 ** 21, 2 ** 23)
UPDATE_LAYERS = 4
# A bernoulli_ draw, dropout's noise on the CPU (prenet.fused_dropout), is timed per element ("bernoulli_element_ns")
# over a float tensor of this many elements (1 MB): the CPU draws each element from its generator in turn, 7-9 ns an
# element on this project's Intel Xeon of CPUID model 167, where a product of the same tensors takes 0.2-0.5 ns
# (ad hoc, 2026-11-27), so its traffic is no measure of it.
BERNOULLI_ELEMENTS = 2 ** 18


def update_element_ns(costs, optimizer, elements):
    """Nanoseconds per element of `optimizer`'s update of `elements` trainable weights by host costs `costs`, or
    None where they hold no such measurement: interpolated in log elements between the sizes measured, constant
    beyond them (files written before 2026-11-26 22:00 UTC hold one figure, of one 8 MB tensor, for every size)."""
    import numpy as np

    measured = costs.get("optimizer_element_ns", {}).get(optimizer)
    if measured is None or isinstance(measured, (int, float)):
        return measured
    sizes = sorted((int(n), ns) for n, ns in measured.items())
    return float(np.interp(math.log(max(elements, 1)), [math.log(n) for n, _ in sizes], [ns for _, ns in sizes]))


def load(path=None, gpu=False):
    """Host costs from `path`, else PRENET_HOST_COSTS, else the packaged file: the measured CPU host's, or with
    `gpu` those a GPU step's host is given; a bench/gpu_host_cost.py file gives its "cpu" part. A file without the
    costs' keys raises ValueError naming them."""
    path = Path(path or os.environ.get("PRENET_HOST_COSTS") or (PACKAGED_GPU_HOST_COSTS if gpu else PACKAGED_COSTS))
    costs = read(path)
    costs = costs.get("cpu", costs) if isinstance(costs, dict) else costs
    return checked(costs, f"host cost file {path}")


def read(path):
    """What the host cost file `path` holds, unchecked; FileNotFoundError or ValueError (not JSON) naming it and
    how to measure it again."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"host cost file {path} is missing; measure it with `python -m prenet.host_cost`")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"host cost file {path} is not JSON ({error}); measure it with `python -m "
                         "prenet.host_cost`") from None


def checked(costs, where):
    """`costs` where they hold every one of KEYS and, if they hold a step frame (prenet.step_frame), a whole one: its
    fixed cost and cost per tensor for each of prenet.predict's optimizers and its cost per module call, as numbers;
    else ValueError naming `where`, what is missing and how to measure it again."""
    from .estimate import OPTIMIZERS

    again = "(as `python -m prenet.host_cost` writes them)"
    missing = [key for key in KEYS if not isinstance(costs, dict) or key not in costs]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}; it needs {', '.join(KEYS)} {again}")
    frame = costs.get("step_frame")
    if frame is None:
        return costs
    number = (int, float)
    wrong = [] if isinstance(frame, dict) and isinstance(frame.get("module_us"), number) else ["module_us"]
    for part in ("fixed_us", "tensor_us"):
        values = frame.get(part) if isinstance(frame, dict) else None
        lacking = [name for name in OPTIMIZERS if not isinstance(values, dict) or
                   not isinstance(values.get(name), number)]
        wrong += [f"{part} of {', '.join(lacking)}"] if lacking else []
    if wrong:
        raise ValueError(f"{where} has a step frame without a number for {'; '.join(wrong)}: it needs module_us and, "
                         f"for each of {', '.join(OPTIMIZERS)}, fixed_us and tensor_us {again}")
    return costs


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prenet.host_cost",
                                     description="Measures this machine's host costs and writes them to FILE.")
    parser.add_argument("file", nargs="?", default="data/host_costs.json", help="(default: %(default)s)")
    out = Path(parser.parse_args().file)
    costs = measure()
    out.write_text(json.dumps(costs, indent=1) + "\n")
    print(json.dumps(costs, indent=1))
