"""Where a GPU's time goes in the H100 validation's training steps, operator by operator: measured on a GPU under
torch.profiler (`--measure`), set beside prenet.predict's device time per operator of the same step (`--compare`,
on any machine). The validation set's epochs say how far a prediction is off (bench/validate_h100.py: bf16 21.8%
median, fp32 torchvision models 13.5%, all under); this says in which operators.

- Measure (a GPU machine): each case (the validation set's model, batch, optimizer and precision) is timed by
  prenet.measure without the profiler (its step: the epoch's median over its iterations), then again under
  torch.profiler with CPU and CUDA activity. Each top-level aten operator (no aten operator above it) is kept with
  its phase (forward, backward: under autograd's engine, update: under the optimizer's step, zero_grad, other: the
  loss and prenet.measure's own copies),
  input shapes, calls and the device time of the kernels it and the operators under it launched; each kernel by name
  with its device time; all per step. One JSON object per case and line, with the environment; resumable (cases in
  the file are skipped) and written as each case ends.
- Compare (here): prenet.predict's op table of each measured case (its device milliseconds by phase and operator)
  beside the measured ones, the operators with the largest differences first, and the step's measured kernel time
  against its wall time (how much of the step the GPU idles). Writes a markdown report.

Run on a GPU machine:  python bench/gpu_step_device_profile.py --measure --out FILE.jsonl [--max-minutes M]
Compare anywhere:      .venv/bin/python bench/gpu_step_device_profile.py --compare FILE.jsonl [--out FILE.md]
"""
import argparse
import json
import platform
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn

from validate_h100 import build

# (model, batch, optimizer, precision): the validation set's cases, its furthest misses and bf16 first
CASES = (("gpt2", 32, "adam", "bf16"), ("resnet50", 64, "sgd", "bf16"), ("bert_base", 32, "adam", "bf16"),
         ("vgg16", 32, "sgd", "fp32"), ("resnet18", 64, "sgd", "fp32"), ("mobilenet_v2", 64, "sgd", "fp32"),
         ("resnet18", 256, "sgd", "fp32"), ("resnet50", 32, "adam", "fp32"), ("bert_base", 32, "adam", "fp32"),
         ("gpt2", 32, "adam", "fp32"), ("resnet50", 64, "sgd", "fp32"), ("vgg16", 64, "sgd", "fp32"))
FORWARD_MARK = "prenet.bench.forward"
PHASE_MARKS = (("Optimizer.step", "update"), ("Optimizer.zero_grad", "zero_grad"),
               ("autograd::engine::evaluate_function", "backward"), (FORWARD_MARK, "forward"))


class _MarkedForward(nn.Module):
    """The model, its forward pass under a profiler label (the loss and prenet.measure's own work are outside)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        with torch.profiler.record_function(FORWARD_MARK):
            return self.inner(*args, **kwargs)


def case_key(model, batch, optimizer, precision):
    return f"{model}/{batch}/{optimizer}/{precision}"


def _device_us(event):
    """An event's device time in microseconds, its children's included (torch 2: device_time_total; 1.x: cuda_)."""
    value = getattr(event, "device_time_total", None)
    return float(value if value is not None else getattr(event, "cuda_time_total", 0.0) or 0.0)


def _is_device_event(event):
    return str(getattr(event, "device_type", "")).endswith(("CUDA", "PrivateUse1"))


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def _top_level_phase(event):
    """The phase of an operator no other operator called, from its nearest marked ancestor ("other": the loss, and
    prenet.measure's own work, the model's weights kept and put back); None where another operator called it."""
    phase = None
    for ancestor in _ancestors(event):
        if ancestor.name.startswith("aten::"):
            return None
        phase = phase or next((p for mark, p in PHASE_MARKS if ancestor.name.startswith(mark)), None)
    return phase or "other"


def _is_annotation(name):
    """A range the profiler records on the GPU's timeline too (the optimizer's step, the forward's label): no kernel."""
    return name.startswith(("Optimizer.", "ProfilerStep")) or name == FORWARD_MARK


def step_profile(events, steps):
    """({(phase, op, shapes): [calls, device us]} per step, {kernel: [calls, device us]} per step) of a profile."""
    operators, kernels = defaultdict(lambda: [0.0, 0.0]), defaultdict(lambda: [0.0, 0.0])
    for event in events:
        if _is_device_event(event):
            if _is_annotation(event.name):
                continue
            kernels[event.name][0] += 1 / steps
            kernels[event.name][1] += _device_us(event) / steps
            continue
        phase = _top_level_phase(event) if event.name.startswith("aten::") else None
        if phase is None:
            continue
        shapes = json.dumps(getattr(event, "input_shapes", None) or [])
        entry = operators[(phase, event.name[len("aten::"):], shapes)]
        entry[0] += 1 / steps
        entry[1] += _device_us(event) / steps
    return operators, kernels


def measure_case(model_name, batch, optimizer, precision, device):
    """One case's line: the unprofiled step, the profiled operators and kernels per step, the environment."""
    from torch.profiler import ProfilerActivity, profile

    import prenet

    model, inputs, source = build(model_name)
    timed = prenet.measure(model, batch=batch, dataset_size=8 * batch, optimizer=optimizer, precision=precision,
                           device=device, **inputs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as profiler:
        prenet.measure(_MarkedForward(model), batch=batch, dataset_size=2 * batch, optimizer=optimizer,
                       precision=precision, device=device, **inputs)
    events = profiler.events()
    # the optimizer's steps on the host (torch 2 records each annotation on the GPU's timeline too)
    steps = sum(1 for event in events if event.name.startswith("Optimizer.step") and not _is_device_event(event))
    if not steps:
        raise RuntimeError("no Optimizer.step event in the profile: the steps cannot be counted")
    operators, kernels = step_profile(events, steps)
    return {"case": {"model": model_name, "batch": batch, "optimizer": optimizer, "precision": precision,
                     "source": source},
            "step_ms": 1e3 * timed.step_seconds, "epoch_s_8_batches": timed.epoch_seconds, "profiled_steps": steps,
            "operators": [{"phase": phase, "op": op, "shapes": json.loads(shapes), "calls": calls, "device_us": us}
                          for (phase, op, shapes), (calls, us) in sorted(operators.items())],
            "kernels": [{"name": name, "calls": calls, "device_us": us} for name, (calls, us) in
                        sorted(kernels.items(), key=lambda item: -item[1][1])],
            "env": {**timed.environment, "python": platform.python_version(), "measured": time.strftime("%Y-%m-%d")}}


def measure_all(out, max_minutes, device, only):
    out = Path(out)
    done = set()
    if out.exists():
        cases = [json.loads(line)["case"] for line in out.read_text().splitlines() if line.strip()]
        done = {case_key(c["model"], c["batch"], c["optimizer"], c["precision"]) for c in cases}
    started = time.monotonic()
    for case in CASES:
        key = case_key(*case)
        if key in done or (only and case[0] not in only):
            continue
        if time.monotonic() - started > 60 * max_minutes:
            print(f"time is up before {key}", flush=True)
            break
        begun = time.monotonic()
        try:
            line = measure_case(*case, device)
        except Exception as error:  # recorded, so that the next case still runs
            line = {"case": dict(zip(("model", "batch", "optimizer", "precision"), case)),
                    "error": f"{type(error).__name__}: {error}"}
        with out.open("a") as file:
            file.write(json.dumps(line) + "\n")
        kernel_ms = sum(k["device_us"] for k in line.get("kernels", ())) / 1e3
        said = line.get("error") or f"step {line.get('step_ms', 0.0):.2f} ms, kernels {kernel_ms:.2f} ms"
        print(f"{key}: {said} ({time.monotonic() - begun:.0f} s)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="measure on this machine's GPU")
    parser.add_argument("--compare", type=Path, help="a --measure file: its cases beside prenet.predict's")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--max-minutes", type=float, default=4.0)
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu: a dry run of --measure")
    parser.add_argument("--only", nargs="*", help="model names to measure (default: every case)")
    args = parser.parse_args()
    if args.measure == bool(args.compare):
        parser.error("give --measure or --compare FILE")
    if args.measure:
        if not args.out:
            parser.error("--measure needs --out FILE.jsonl")
        measure_all(args.out, args.max_minutes, args.device, args.only)
    else:
        from device_profile_report import write_comparison

        write_comparison(args.compare, args.out)


if __name__ == "__main__":
    main()
