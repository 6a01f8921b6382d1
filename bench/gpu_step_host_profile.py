"""Where the host's time goes in a host-bound GPU training step, phase by phase and operator by operator, beside
prenet.predict's host side of the same step. ResNet-18 at batch 16 and 32 takes about 10 ms a step on the shared
H100 set (issue 5's own example of a host-bound step), 7.1 ms are predicted (30% under), while ResNet-50 and
MobileNet-v2 at batch 16, host-bound too, are within 10%: what the host does in those 3 ms is not known here, as no
machine of ours has a GPU. This measures it where one is lent (scripts/gpu_session.sh runs it).

- Phases: the protocol's step (prenet.measure's: zero_grad, forward, loss, backward, the optimizer's step) timed on
  the host's clock without synchronising, so that in a host-bound step each phase's time is the host's work in it
  (the backward pass's is the autograd engine issuing its kernels; the calling thread waits for it); the median
  over the timed steps, and the step's own median, synchronised every step.
- Operators: torch.profiler over a few steps (CPU activity; its own cost inflates each call a little), the self CPU
  time per step of each event (aten operators, the CUDA runtime's launches, the optimizer's and autograd's own).
- Predicted: prenet.predict's host milliseconds of the same step on the same GPU, by phase (forward operators,
  backward operators, the update with the step's frame).

Run on a GPU machine:  python bench/gpu_step_host_profile.py [--model resnet18] [--batch 16] [--out FILE.md]
(without CUDA, or with --device cpu, it runs on the CPU, a dry run of the script: the CPU's phases beside a GPU's
predicted host).
"""
import argparse
import statistics
import time
from pathlib import Path

import torch
import torchvision

import prenet
from prenet.measure import ResidentLabels, make_optimizer
from prenet.op_trace import training_loss

PHASES = ("zero_grad", "forward", "loss", "backward", "optimizer step")


def timed_steps(model, optimizer, data, batch, steps, synchronize):
    """({phase: median host ms}, median ms of a whole step synchronised at its end) over `steps` steps."""
    phases, totals, start = {name: [] for name in PHASES}, [], 0
    labels = ResidentLabels(len(data))  # as prenet.measure keeps them: no kernel in the step
    for _ in range(steps):
        chunk, chunk_labels = data[start:start + batch], labels.of_batch(start, batch)
        start = (start + batch) % (len(data) - batch + 1)
        marks = [time.perf_counter()]
        optimizer.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        output = model(chunk)
        marks.append(time.perf_counter())
        loss = training_loss(output, labels=chunk_labels)
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        optimizer.step()
        marks.append(time.perf_counter())
        synchronize()
        totals.append(time.perf_counter() - marks[0])
        for name, begin, end in zip(PHASES, marks, marks[1:]):
            phases[name].append(end - begin)
    return ({name: 1e3 * statistics.median(times) for name, times in phases.items()},
            1e3 * statistics.median(totals))


def profiled_events(model, optimizer, data, batch, steps):
    """[(event, calls per step, self CPU us per step)] over `steps` profiled steps, most time first."""
    from torch.profiler import ProfilerActivity, profile

    labels = ResidentLabels(len(data))
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for step in range(steps):
            start = step * batch % (len(data) - batch + 1)
            optimizer.zero_grad(set_to_none=True)
            training_loss(model(data[start:start + batch]), labels=labels.of_batch(start, batch)).backward()
            optimizer.step()
    events = [(e.key, e.count / steps, e.self_cpu_time_total / steps) for e in profiler.key_averages()]
    return sorted(events, key=lambda event: -event[2])


def predicted_host(model, batch, gpu):
    """{part: predicted host ms} of one step: the forward operators, the backward ones, the update with the frame."""
    estimate = prenet.predict(model, batch=batch, gpu=gpu, input_shape=(3, 224, 224), dataset_size=batch * 4)
    by_phase = estimate.ops.groupby("phase")["host_ms"].sum()
    parts = {"forward (and loss) operators": float(by_phase.get("forward", 0.0)),
             "backward operators": float(by_phase.get("backward", 0.0))}
    parts["update and the step's frame"] = estimate.host_ms - sum(parts.values())
    return parts, estimate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18", help="a torchvision model (default resnet18)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=30, help="timed steps (after 10 to warm up)")
    parser.add_argument("--profiled-steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=30, help="events listed")
    parser.add_argument("--out", type=Path, default=Path("gpu_step_host_profile.md"))
    parser.add_argument("--device", help="cuda or cpu (default: cuda where available)")
    args = parser.parse_args()

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "H100"
    model = getattr(torchvision.models, args.model)().to(device).train()
    optimizer = make_optimizer("sgd", [p for p in model.parameters() if p.requires_grad])
    data = torch.randn(args.batch * 4, 3, 224, 224, device=device)

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    timed_steps(model, optimizer, data, args.batch, 10, synchronize)  # warm-up: cuDNN's plans, the allocator
    phases, step_ms = timed_steps(model, optimizer, data, args.batch, args.steps, synchronize)
    events = profiled_events(model, optimizer, data, args.batch, args.profiled_steps)
    launches = sum(calls for name, calls, _ in events if name in ("cudaLaunchKernel", "cuLaunchKernel",
                                                                   "cudaLaunchKernelExC"))
    predicted, estimate = predicted_host(getattr(torchvision.models, args.model)(), args.batch, gpu)

    device_name = gpu if device.type == "cuda" else "the CPU (a dry run of the script)"
    lines = [f"# The host's time in a training step: {args.model} at batch {args.batch} on {device_name}", "",
             f"`python bench/gpu_step_host_profile.py --model {args.model} --batch {args.batch}` "
             f"({time.strftime('%Y-%m-%d')}; torch {torch.__version__}, host CPU "
             f"{prenet.host_cost.cpu_model()}). SGD with momentum, fp32, 224 px, the data resident.", "",
             f"A step, synchronised: {step_ms:.2f} ms measured (median of {args.steps}); predicted "
             f"{1e3 * estimate.step_seconds:.2f} ms, of which the host {estimate.host_ms:.2f} ms "
             f"({estimate.bound}-bound).", "",
             "| phase (measured, host clock, median) | ms |", "| --- | --- |"]
    lines += [f"| {name} | {ms:.3f} |" for name, ms in phases.items()]
    lines += [f"| all five | {sum(phases.values()):.3f} |", "",
              "| predicted host | ms |", "| --- | --- |"]
    lines += [f"| {name} | {ms:.3f} |" for name, ms in predicted.items()]
    traced = estimate.ops
    lines += [f"| all | {estimate.host_ms:.3f} |", "",
              f"Predicted operators: {int((traced['phase'] == 'forward').sum())} forward, "
              f"{int((traced['phase'] == 'backward').sum())} backward. Kernel launches profiled: {launches:.0f} a "
              "step.", "",
              f"Profiled ({args.profiled_steps} steps; self CPU time per step, the {args.top} largest):", "",
              "| event | calls a step | self CPU us a step |", "| --- | --- | --- |"]
    lines += [f"| {name} | {calls:.1f} | {us:.1f} |" for name, calls, us in events[:args.top]]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
