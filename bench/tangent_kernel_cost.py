"""Where the cost of prenet.predict_steps' tangent kernel goes, against a training step of the same network
(issue 7's target: prediction at a fraction of the cost of training).

For two MLPs on 64 inputs and 10 classes (the validation's, and one of 1.1M parameters) and a CNN on 8x8 images
(bench/validate_steps.py --model cnn --hidden 32's), the kernel on 256 samples (predict_steps' default subset and
projection), in float64 as predict_steps computes it (float32 where it is sketched), is timed two ways: as
prenet.tangent_kernel.gram_matrix computes it now (linear layers factored from their inputs and sensitivities,
prenet.linear_layer_kernel, and convolutions' rows from theirs, prenet.conv_layer_gradients) and by the explicit
Jacobian it used before (per-sample Jacobians with vmap(jacrev), the CountSketch projection where parameters exceed
projection_dim, the Gram product, each part timed), beside one SGD step (momentum 0.9, batch 32, float32) of the
same network; "steps" columns say how many training steps cost as much as each kernel.

Then torchvision's ResNet-18 (10 classes, 32 px images, 11M parameters, too large for the explicit path) on
RESNET_SAMPLES samples: the kernel as gram_matrix computes it (each convolution's share factored over pairs of
positions where that costs less than its rows, prenet.conv_layer_kernel; batch norms' rows from their
sensitivities, prenet.norm_layer_gradients) against the path before 2026-11-27 (every convolution's rows made and
sketched, batch norms through their Jacobian: earlier_path), with the relative (Frobenius) difference of the two
kernels, which the sketch's noise sets; and on the fewest samples each one's error against the exact kernel (every
convolution's share factored, nothing sketched).

Run:  .venv/bin/python bench/tangent_kernel_cost.py [--out FILE]   (about 5 minutes; torch's default threads)
Writes bench/results/tangent_kernel_cost.md by default.
"""
import argparse
import contextlib
import time

import numpy as np
import torch
import torchvision

from prenet import conv_layer_kernel, layer_sensitivities, tangent_kernel
from report import RESULTS, write_report
from validate_steps import network

REPORT = RESULTS / "tangent_kernel_cost.md"
SAMPLES, BATCH, STEPS = 256, 32, 100
RESNET_SAMPLES = (16, 64)
PROJECTION = tangent_kernel.DEFAULT_PROJECTION_DIM  # predict_steps' default


def mlp(width, depth):
    layers, inputs = [], 64
    for _ in range(depth):
        layers += [torch.nn.Linear(inputs, width), torch.nn.Tanh()]
        inputs = width
    return torch.nn.Sequential(*layers, torch.nn.Linear(inputs, 10))


def kernel_parts(model, inputs, projection_dim):
    """Seconds of (Jacobian, projection, Gram product) for the kernel on `inputs`, as gram_matrix computes it."""
    parameters = sum(p.numel() for p in model.parameters())
    started = time.perf_counter()
    blocks = [block.reshape(-1, parameters) for block in tangent_kernel.jacobian_chunks(model, inputs)]
    jacobian_s = time.perf_counter() - started
    started = time.perf_counter()
    if parameters > projection_dim:
        sketch = tangent_kernel.CountSketch(parameters, projection_dim).matrix()
        blocks = [torch.sparse.mm(sketch, b.T).T for b in blocks]
    projection_s = time.perf_counter() - started
    rows = torch.cat(blocks)
    started = time.perf_counter()
    rows @ rows.T
    return jacobian_s, projection_s, time.perf_counter() - started


def factored_s(model, inputs):
    started = time.perf_counter()
    tangent_kernel.gram_matrix(model, inputs)
    return time.perf_counter() - started


@contextlib.contextmanager
def earlier_path():
    """gram_matrix as before 2026-11-27 within the block: no convolution's share factored, and only linear layers
    and convolutions taking their rows from their sensitivities (norms through their Jacobian)."""
    pays, kinds = conv_layer_kernel.factoring_pays, layer_sensitivities.factored_kinds
    earlier = {kind: entry._replace(input_dims={2}) if kind is torch.nn.Linear else entry
               for kind, entry in kinds().items() if kind in (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)}
    conv_layer_kernel.factoring_pays = lambda *arguments: False
    layer_sensitivities.factored_kinds = lambda: earlier
    try:
        yield
    finally:
        conv_layer_kernel.factoring_pays, layer_sensitivities.factored_kinds = pays, kinds


def resnet_rows(samples, exact=False):
    """A markdown row: ResNet-18's kernel on `samples` samples, as gram_matrix computes it and by earlier_path;
    with `exact`, each one's relative error against the exact kernel."""
    model, inputs = torchvision.models.resnet18(num_classes=10), torch.randn(samples, 3, 32, 32)
    positions = {}
    layers = layer_sensitivities.qualifying_layers(model.eval(), inputs, positions)
    convs = [name for name, layer in layers.items() if isinstance(layer, torch.nn.Conv2d)]
    chosen = [name for name in convs if conv_layer_kernel.factoring_pays(layers[name], samples, 10, positions[name])]
    weights = sum(p.numel() for name in chosen for p in layers[name].parameters())
    started = time.perf_counter()
    now = tangent_kernel.gram_matrix(model, inputs)[0]
    now_s = time.perf_counter() - started
    with earlier_path():
        started = time.perf_counter()
        before = tangent_kernel.gram_matrix(model, inputs)[0]
        before_s = time.perf_counter() - started
    difference = np.linalg.norm(now - before) / np.linalg.norm(before)
    errors = "- | - |"
    if exact:
        pays = conv_layer_kernel.factoring_pays
        conv_layer_kernel.factoring_pays = lambda *arguments: True
        try:
            truth = tangent_kernel.gram_matrix(model, inputs)[0]
        finally:
            conv_layer_kernel.factoring_pays = pays
        errors = " | ".join(f"{np.linalg.norm(k - truth) / np.linalg.norm(truth):.1%}" for k in (now, before)) + " |"
    return (f"| {samples} | {len(chosen)} of {len(convs)} ({weights:,} weights) | {now_s:.1f} | {before_s:.1f} | "
            f"{before_s / now_s:.1f}x | {difference:.1%} | {errors}")


def training_step_s(model, shape):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(BATCH, *shape), torch.randint(10, (BATCH,))
    started = time.perf_counter()
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return (time.perf_counter() - started) / STEPS


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPORT))
    args = parser.parse_args()
    torch.manual_seed(0)
    lines = ["# What the tangent kernel costs, against training steps", "",
             f"`.venv/bin/python bench/tangent_kernel_cost.py` ({time.strftime('%Y-%m-%d')}; torch "
             f"{torch.__version__}, {torch.get_num_threads()} thread(s)). Kernel on {SAMPLES} samples x 10 outputs "
             f"in float64 (float32 where sketched); explicit: CountSketch to {PROJECTION} columns where parameters "
             f"exceed it; SGD step at batch {BATCH}.", "",
             "| network | parameters | training step ms | factored kernel s | steps | explicit: Jacobian s | "
             "projection s | Gram s | explicit kernel s | steps |", "|---|---|---|---|---|---|---|---|---|---|"]
    cnn, cnn_name = network("cnn", 32)
    for name, model, shape in (("64-64-64-10 MLP (bench/validate_steps.py's)", mlp(64, 2), (64,)),
                               ("64-1024-1024-10 MLP", mlp(1024, 2), (64,)), (cnn_name, cnn, (1, 8, 8))):
        inputs = torch.randn(SAMPLES, *shape)
        parameters = sum(p.numel() for p in model.parameters())
        parts = kernel_parts(model, inputs, PROJECTION)
        factored = factored_s(model, inputs)
        step = training_step_s(model, shape)
        lines.append(f"| {name} | {parameters:,} | {1e3 * step:.2f} | {factored:.2f} | {factored / step:,.0f} | "
                     f"{parts[0]:.1f} | {parts[1]:.1f} | {parts[2]:.1f} | {sum(parts):.1f} | "
                     f"{sum(parts) / step:,.0f} |")
        print(lines[-1], flush=True)
    lines += ["", f"torchvision's ResNet-18 (10 classes, 32 px images), kernel on n samples x 10 outputs, "
              f"CountSketch to {PROJECTION} columns:", "",
              "| n | convolutions factored | kernel s | before 2026-11-27 s | saving | kernels differ by | "
              "error now | error before |", "|---|---|---|---|---|---|---|---|"]
    for samples in RESNET_SAMPLES:
        lines.append(resnet_rows(samples, exact=samples == RESNET_SAMPLES[0]))
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    write_report(args.out, text)


if __name__ == "__main__":
    main()
