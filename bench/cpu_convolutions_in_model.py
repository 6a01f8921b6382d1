"""A model's convolutions on this machine's CPU, one by one: each distinct 2-d convolution that
prenet.predict(gpu="cpu") costs in a training step of the model, timed alone in PyTorch (forward, one thread, the
median of 7 after 2 warm-ups) against its predicted forward time (calibrated to this CPU where a calibration was
made, prenet.host_calibration). Shows which shapes a whole-model error comes from.

Run:  .venv/bin/python bench/cpu_convolutions_in_model.py [--model resnet18] [--pixels 64] [--batches 8 32]
          [--out FILE]
(seconds). Writes bench/results/cpu_convolutions_in_model.md.
"""
import argparse
import statistics
import time
import warnings
from pathlib import Path

import torch
import torchvision

import prenet
from prenet.measure import cpu_threads
from report import RESULTS, write_report



def forward_ms(config):
    """Median forward milliseconds of one convolution of `config` (prenet's conv2d keys) on this CPU."""
    conv = torch.nn.Conv2d(config["in_channels"], config["out_channels"], config["kernel_size"],
                           stride=config["stride"], padding=config["padding"], groups=config["groups"],
                           bias=bool(config["bias"]))
    x = torch.randn(config["batch"], config["in_channels"], config["height"], config["width"])
    times = []
    with torch.no_grad():
        for repeat in range(9):
            started = time.perf_counter()
            conv(x)
            if repeat >= 2:
                times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", help="a torchvision model (10 classes)")
    parser.add_argument("--pixels", type=int, default=64)
    parser.add_argument("--batches", type=int, nargs="*", default=[8, 32])
    parser.add_argument("--out", type=Path, default=RESULTS / "cpu_convolutions_in_model.md")
    args = parser.parse_args(argv)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    lines, started = [], time.monotonic()
    calibrated = None
    for batch in args.batches:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = prenet.predict(model, batch=batch, gpu="cpu", input_shape=(3, args.pixels, args.pixels),
                                      dataset_size=batch)
        calibrated = estimate.calibrated
        ops = estimate.ops
        forward = ops[(ops["kind"] == "conv2d") & (ops["phase"] == "forward")]
        layers = {}  # configuration -> [config, count, predicted ms of all]
        for _, row in forward.iterrows():
            entry = layers.setdefault(tuple(sorted(row["config"].items())), [row["config"], 0, 0.0])
            entry[1] += 1
            entry[2] += row["ms"]
        lines += [f"## Batch {batch}", "",
                  "| convolutions | in -> out channels | kernel | stride | map (px) | predicted ms | measured ms | "
                  "measured / predicted |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        predicted_total = measured_total = 0.0
        for config, count, predicted in layers.values():
            measured = forward_ms(config)
            predicted_total += predicted
            measured_total += count * measured
            lines.append(f"| {count} | {config['in_channels']} -> {config['out_channels']} | "
                         f"{config['kernel_size']} | {config['stride']} | {config['height']} | "
                         f"{predicted / count:.2f} | {measured:.2f} | {measured * count / predicted:.2f} |")
            print(lines[-1], flush=True)
        lines += ["", f"All convolutions forward: predicted {predicted_total:.1f} ms, "
                      f"measured {measured_total:.1f} ms.", ""]
    text = "\n".join([
        f"# {args.model}'s convolutions at {args.pixels} px on this CPU, one by one", "",
        f"`.venv/bin/python bench/cpu_convolutions_in_model.py --model {args.model} --pixels {args.pixels} "
        f"--batches {' '.join(map(str, args.batches))}` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; one thread). Predicted: the forward time prenet.predict(gpu=\"cpu\") "
        f"gives each distinct convolution of the step ({calibrated or 'not calibrated to this CPU'}); measured: "
        "that convolution alone in PyTorch, the median of 7 forward passes after 2.", "", *lines])
    write_report(args.out, text)


if __name__ == "__main__":
    with cpu_threads(1):  # the BLAS library's threads too, as prenet.measure(threads=1) and the harness run
        main()
