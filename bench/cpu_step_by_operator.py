"""One training step of a CPU validation case, operator by operator: prenet.predict(gpu="cpu")'s time for each
aten operator (summed over the step, forward and backward together) beside the self time PyTorch's profiler
measures for it in real steps (one thread, the BLAS library's included, as prenet.measure(threads=1) runs; SGD
with momentum and the protocol's loss, op_trace.training_loss). Shows which operators a whole-model error comes
from. The profiler adds a little to every operator, so small ones read somewhat slow, and it counts time where it
is spent: a ReLU's in clamp_min, a clone's in copy_, under their own names in the measured column.

Run:  .venv/bin/python bench/cpu_step_by_operator.py [--case transformer] [--batch 64] [--steps 3] [--keep-memory]
          [--out FILE]
(seconds). `--keep-memory` keeps freed memory in the process (prenet.host_memory, as prenet.measure(keep_memory=True)
and the harness run): without it, a step's tensors land on fresh pages and the faults count in the operators that
first write them. Read the per-operator split with care: on this project's virtual machines the profiler doubles
a step and its cost lands unevenly (the LSTM model's log-softmax backward read 12.7 ms in a step whose whole loss
costs 1.6 ms timed without it; docs/validation.md). Cases are bench/validate_cpu.py's. Writes
bench/results/cpu_step_by_operator.md.
"""
import argparse
import collections
import time
import warnings
from pathlib import Path

import torch

import prenet
from prenet.host_memory import keep_freed_memory
from prenet.measure import ResidentLabels, cpu_threads, make_optimizer
from prenet.model_inputs import call, input_maker
from prenet.op_trace import training_loss
from report import RESULTS, write_report
from validate_cpu import CASES

SHOWN_SHARE = 0.01  # operators below this share of the step on both sides are summed into one row


def measured_ms(model, inputs, batch, steps):
    """{aten operator name: self milliseconds per step} over `steps` profiled training steps, after 3 unprofiled."""
    from torch.profiler import ProfilerActivity, profile

    data = input_maker(model, inputs.get("input_shape"), inputs.get("example_input"))(batch)
    optimizer = make_optimizer("sgd", model.parameters())  # the protocol's SGD, as prenet.measure builds it
    labels = ResidentLabels(batch).of_batch(0, batch)  # drawn by the first step, resident after, as measure has them

    def step():
        optimizer.zero_grad(set_to_none=True)
        training_loss(call(model, data), labels=labels).backward()
        optimizer.step()

    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            step()
    return {event.key.removeprefix("aten::"): event.self_cpu_time_total / steps / 1e3
            for event in profiler.key_averages() if event.key.startswith("aten::")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="transformer", choices=[name for name, *_ in CASES])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--keep-memory", action="store_true", help="keep freed memory (no page faults)")
    parser.add_argument("--out", type=Path, default=RESULTS / "cpu_step_by_operator.md")
    args = parser.parse_args(argv)
    if args.keep_memory:
        keep_freed_memory()
    torch.manual_seed(0)
    _, factory, inputs, _ = next(case for case in CASES if case[0] == args.case)
    model = factory().train()
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimate = prenet.predict(model, batch=args.batch, gpu="cpu", dataset_size=args.batch, **inputs)
    predicted = collections.defaultdict(float)
    for _, row in estimate.ops.iterrows():
        predicted[row["op"].split(".")[0]] += row["ms"]
    measured = measured_ms(model, inputs, args.batch, args.steps)
    step_predicted, step_measured = sum(predicted.values()), sum(measured.values())
    names = sorted(set(predicted) | set(measured), key=lambda n: -max(predicted.get(n, 0), measured.get(n, 0)))
    shown = [n for n in names if predicted.get(n, 0) >= SHOWN_SHARE * step_predicted or
             measured.get(n, 0) >= SHOWN_SHARE * step_measured]
    rows = []
    for name in shown:
        p, m = predicted.get(name, 0.0), measured.get(name, 0.0)
        rows.append(f"| {name} | {p:.2f} | {m:.2f} | {m / p:.2f} |" if p else f"| {name} | - | {m:.2f} | - |")
    rest_p = step_predicted - sum(predicted.get(n, 0) for n in shown)
    rest_m = step_measured - sum(measured.get(n, 0) for n in shown)
    rows.append(f"| (each other operator) | {rest_p:.2f} | {rest_m:.2f} | - |")
    calibration = estimate.calibrated or "not calibrated to this CPU"
    text = "\n".join([
        f"# One training step of {args.case} at batch {args.batch} on this CPU, operator by operator", "",
        f"`.venv/bin/python bench/cpu_step_by_operator.py --case {args.case} --batch {args.batch} --steps "
        f"{args.steps}{' --keep-memory' if args.keep_memory else ''}` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; one thread, the BLAS library's included; freed memory "
        f"{'kept' if args.keep_memory else 'returned, as the C library does by default'}). Predicted: "
        f"prenet.predict(gpu=\"cpu\") ({calibration}), per operator summed over the step. Measured: the "
        f"profiler's self time per step over {args.steps} steps. Operators under {100 * SHOWN_SHARE:.0f}% of the "
        "step on both sides are summed in the last row.", "",
        "| operator | predicted ms | measured ms | measured / predicted |", "| --- | --- | --- | --- |", *rows, "",
        f"Step: predicted {1e3 * estimate.step_seconds:.1f} ms (operators {step_predicted:.1f} ms, the rest host "
        f"work: module calls and the optimizer's per-tensor cost); operators measured {step_measured:.1f} ms.", ""])
    write_report(args.out, text)
    print(text)


if __name__ == "__main__":
    with cpu_threads(1):  # the BLAS library's threads too, as prenet.measure(threads=1) and the harness run
        main()
