"""What cuDNN's heuristic choice of a convolution algorithm costs against the fastest one: PyTorch's default
(torch.backends.cudnn.benchmark off), which docs/measurement_protocol.md measures and users run, against the algorithm
benchmarking finds, which is how NeuSight timed the convolutions the GPU predictors learned from. For the distinct
convolutions of the image models of the H100 validation set (VGG-16, ResNet-18, ResNet-50, MobileNetV2) at the
batches measured there: the forward pass and the backward pass (input and weight gradients), timed with CUDA
events, first with benchmark off, then on (after its autotuning calls), in fp32 with PyTorch's defaults (TF32 in
cuDNN); prenet's forward prediction for the GPU beside each.

Run on a GPU machine:  python bench/cudnn_choice.py --out FILE.jsonl [--max-minutes M] [--models ...] [--batches ...]
One JSON object per convolution and line (its configuration, the four medians, the prediction, the environment);
resumable: configurations already in FILE are skipped, and each line is written as soon as it is measured.
`--device cpu` runs the same loop on the CPU, where the flag changes nothing: a check of the script, not a
measurement.
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn

import prenet
from prenet.measure import cpu_model

MODELS = ("vgg16", "resnet18", "resnet50", "mobilenet_v2")
BATCHES = (16, 32, 64)
WARMUP, REPEATS = 3, 10


def convolutions(model_name):
    """Each nn.Conv2d call of the torchvision model on one 224-pixel image: its configuration at batch 1
    (prenet.predict_layer's conv2d keys), in call order."""
    import torchvision

    model, found = getattr(torchvision.models, model_name)(), []

    def record(module, inputs, output):
        _, channels, height, width = inputs[0].shape
        found.append({"in_channels": channels, "out_channels": module.out_channels,
                      "kernel_size": module.kernel_size[0], "stride": module.stride[0],
                      "padding": module.padding[0], "height": height, "width": width, "groups": module.groups,
                      "bias": int(module.bias is not None)})

    hooks = [m.register_forward_hook(record) for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, 224, 224))
    for hook in hooks:
        hook.remove()
    return found


def timed_ms(run, device):
    """Median milliseconds of `run()` over REPEATS calls after WARMUP, by CUDA events on a GPU."""
    for _ in range(WARMUP):
        run()
    times = []
    for _ in range(REPEATS):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        else:
            started = time.perf_counter()
            run()
            times.append(1e3 * (time.perf_counter() - started))
    return statistics.median(times)


def measure(config, batch, device):
    """{forward_ms, backward_ms} with cuDNN's heuristics and with benchmarking, for one convolution."""
    conv = nn.Conv2d(config["in_channels"], config["out_channels"], config["kernel_size"], config["stride"],
                     config["padding"], groups=config["groups"], bias=bool(config["bias"])).to(device)
    x = torch.randn(batch, config["in_channels"], config["height"], config["width"], device=device,
                    requires_grad=True)
    grad = torch.ones_like(conv(x))
    out = {}
    for label, benchmark in (("heuristic", False), ("benchmarked", True)):
        torch.backends.cudnn.benchmark = benchmark
        forward_ms = timed_ms(lambda: conv(x), device)
        # a backward pass needs its forward: the two timed together, less the forward
        step_ms = timed_ms(lambda: torch.autograd.grad(conv(x), (x, conv.weight), grad), device)
        out[f"{label}_forward_ms"], out[f"{label}_backward_ms"] = forward_ms, step_ms - forward_ms
    torch.backends.cudnn.benchmark = False
    return out


def environment(device):
    env = {"host_cpu": cpu_model(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(device_name=props.name, device_units=props.multi_processor_count)
    else:
        env.update(device_name=env["host_cpu"], device_units=torch.get_num_threads())
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--batches", nargs="*", type=int, default=list(BATCHES))
    parser.add_argument("--max-minutes", type=float, default=8.0)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("CUDA is not available on this machine; --device cpu checks the script")
    env = environment(device)
    gpu = env["device_name"] if device.type == "cuda" else "cpu"
    done = set()
    if args.out.exists():
        done = {json.dumps(json.loads(line)["config"], sort_keys=True) for line in args.out.read_text().splitlines()
                if line.strip()}
    deadline = time.monotonic() + 60 * args.max_minutes
    todo = []
    for model_name in args.models:
        for config in convolutions(model_name):
            for batch in args.batches:
                full = {"batch": batch, **config, "channels_last": 0}
                key = json.dumps(full, sort_keys=True)
                if key not in done:
                    done.add(key)
                    todo.append((model_name, full))
    print(f"{len(todo)} convolutions to time on {env['device_name']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        for i, (model_name, config) in enumerate(todo):
            if time.monotonic() > deadline:
                print(f"stopped at the time limit: {len(todo) - i} left (run again to resume)")
                break
            row = {"model": model_name, "config": config, **measure(config, config["batch"], device)}
            try:
                row["predicted_forward_ms"] = prenet.predict_layer("conv2d", gpu=gpu, mode="forward", **config)
            except ValueError as error:  # a GPU the catalog lacks
                row["predicted_forward_ms"], row["prediction_error"] = None, str(error)
            out.write(json.dumps({**row, "environment": env}) + "\n")
            out.flush()
            if (i + 1) % 20 == 0:
                print(f"{i + 1} / {len(todo)}", flush=True)


if __name__ == "__main__":
    main()
