"""Benchmark: the native harness against a PreNeT-style Python timing loop, on the same CPU and configurations.

The PreNeT loop (the paper's method): build the torch layer, 10 warm-up training steps, then time.time() around
50 steps, creating the input inside the loop. Both methods time the training step (forward, backward, optimizer
step) of the same configurations, each configuration twice; reported: configurations per minute and
repeatability (median relative difference between the two measurements of a configuration).

Run:  .venv/bin/python bench/harness_vs_python_loop.py [--configs 200]
Writes bench/results/harness_vs_python_loop.md and prints the table.
"""
import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from prenet.collect import Harness  # noqa: E402
from prenet.sampling import sample_config  # noqa: E402

KINDS = ["linear", "conv2d", "lstm", "multihead_attention", "embedding", "layer_norm"]
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=1e-3),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-3),
}


def python_layer(kind, c):
    """(module, function making a fresh input) for one configuration, as a Python benchmark would build it."""
    if kind == "linear":
        layer = torch.nn.Linear(c["in_features"], c["out_features"], bias=bool(c["bias"]))
        act = {"none": lambda y: y, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "tanh": torch.tanh}[
            c["activation"]]
        return (lambda x: act(layer(x))), layer, lambda: torch.randn(c["batch"], c["seq_len"], c["in_features"])
    if kind == "conv2d":
        layer = torch.nn.Conv2d(c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"], c["padding"],
                                groups=c["groups"], bias=bool(c["bias"]))
        return layer, layer, lambda: torch.randn(c["batch"], c["in_channels"], c["height"], c["width"])
    if kind == "lstm":
        layer = torch.nn.LSTM(c["input_size"], c["hidden_size"], c["num_layers"],
                              bidirectional=bool(c["bidirectional"]))
        return (lambda x: layer(x)[0]), layer, lambda: torch.randn(c["seq_len"], c["batch"], c["input_size"])
    if kind == "multihead_attention":
        layer = torch.nn.MultiheadAttention(c["embed_dim"], c["num_heads"])
        return ((lambda x: layer(x, x, x, need_weights=False)[0]), layer,
                lambda: torch.randn(c["seq_len"], c["batch"], c["embed_dim"]))
    if kind == "embedding":
        layer = torch.nn.Embedding(c["num_embeddings"], c["embedding_dim"])
        return layer, layer, lambda: torch.randint(c["num_embeddings"], (c["batch"], c["seq_len"]))
    if kind == "layer_norm":
        layer = torch.nn.LayerNorm(c["normalized_shape"])
        return layer, layer, lambda: torch.randn(c["batch"], c["seq_len"], c["normalized_shape"])
    raise ValueError(kind)


def prenet_loop_ms(kind, config, warmup=10, iterations=50):
    forward, module, make_input = python_layer(kind, config)
    optimizer = OPTIMIZERS[config["optimizer"]](module.parameters())

    def step():
        x = make_input()
        forward(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(warmup):
        step()
    start = time.time()
    for _ in range(iterations):
        step()
    return 1e3 * (time.time() - start) / iterations


def relative_difference(a, b):
    return abs(a - b) / ((a + b) / 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1, help="configurations differ from the data set's (seed 0)")
    parser.add_argument("--max-flops", type=float, default=2e8,
                        help="forward-FLOP cap per configuration, so that the Python loop's 60 steps stay short")
    args = parser.parse_args()
    torch.set_num_threads(1)
    configs = [(KINDS[i % len(KINDS)], sample_config(KINDS[i % len(KINDS)], i, seed=args.seed,
                                                     max_flops=args.max_flops)) for i in range(args.configs)]
    results = {}
    harness = Harness("cpu", threads=1)
    try:
        for name, run in (("native harness", lambda k, c, i: harness.time(i, k, c, 600)["train_step_ms"]),
                          ("PreNeT-style Python loop", lambda k, c, i: prenet_loop_ms(k, c))):
            passes, seconds = [], []
            for repeat in range(2):
                start = time.monotonic()
                passes.append([run(kind, config, i) for i, (kind, config) in enumerate(configs)])
                seconds.append(time.monotonic() - start)
                print(f"{name}, pass {repeat + 1}: {seconds[-1]:.0f} s", flush=True)
            diffs = [relative_difference(a, b) for a, b in zip(*passes)]
            results[name] = dict(per_minute=60 * len(configs) / statistics.mean(seconds),
                                 median_diff=statistics.median(diffs),
                                 p90_diff=statistics.quantiles(diffs, n=10)[-1], seconds=sum(seconds))
    finally:
        harness.stop()
    lines = [f"Training-step timing of {len(configs)} configurations ({', '.join(KINDS)}; seed {args.seed}, "
             f"forward FLOPs <= {args.max_flops:g}), each measured twice, one thread, {time.strftime('%Y-%m-%d')}, "
             f"`.venv/bin/python bench/harness_vs_python_loop.py --configs {args.configs} "
             f"--max-flops {args.max_flops:g}`", "",
             "| method | configurations / min | repeatability: median rel. diff | 90th pct rel. diff | total s |",
             "| --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['per_minute']:.1f} | {100 * r['median_diff']:.2f}% | {100 * r['p90_diff']:.2f}% "
                     f"| {r['seconds']:.0f} |")
    lines += ["", "The harness also times the forward pass alone for every configuration, included in its rate."]
    text = "\n".join(lines) + "\n"
    out = Path(__file__).resolve().parent / "results" / "harness_vs_python_loop.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
