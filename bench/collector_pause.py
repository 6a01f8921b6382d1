"""What pausing Python's garbage collector during prenet.predict saves (prenet/collector_paused.py): ResNet-50
predicted on the V100, with the pause as shipped and with it switched off (the module's `gc` replaced by one whose
disable does nothing), in turn round by round beside a batch-1 forward pass for each, in one process; the
collector's passes counted by generation through gc.callbacks.
Usage: python bench/collector_pause.py [--rounds 60] [--out bench/results/collector_pause.md]"""
import argparse
import gc
import platform
import statistics
import time
import types

import torch
import torchvision

import prenet
import prenet.collector_paused as collector_paused
from predict_cost import interleaved_seconds
from report import RESULTS, write_report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--out", default=RESULTS / "collector_pause.md")
    args = parser.parse_args()
    model = torchvision.models.resnet50()
    image = torch.randn(1, 3, 224, 224)
    never_off = types.SimpleNamespace(isenabled=gc.isenabled, disable=lambda: None, enable=gc.enable)
    passes = {"paused": [0, 0, 0], "not paused": [0, 0, 0]}
    current = []

    def count(phase, info):
        if phase == "start" and current:
            passes[current[0]][info["generation"]] += 1

    def forward():
        with torch.no_grad():
            model.eval()(image)

    def predict_with(variant, collector):
        def run():
            collector_paused.gc, current[:] = collector, [variant]
            try:
                prenet.predict(model, batch=32, gpu="V100", input_shape=(3, 224, 224), dataset_size=1024)
            finally:
                collector_paused.gc, current[:] = gc, []
        return run

    gc.callbacks.append(count)
    try:
        times = interleaved_seconds({"forward before paused": forward, "paused": predict_with("paused", gc),
                                     "forward before not paused": forward,
                                     "not paused": predict_with("not paused", never_off)}, args.rounds)
    finally:
        gc.callbacks.remove(count)
    rows = []
    for variant in ("not paused", "paused"):
        t, f = times[variant], times[f"forward before {variant}"]
        counts = passes[variant]  # the warm-up's predict included
        rows.append(f"| {variant} | {1e3 * statistics.median(t):.1f} | {1e3 * statistics.mean(t):.1f} | "
                    f"{1e3 * max(t):.1f} | {1e3 * statistics.mean(f):.1f} | "
                    f"{counts[0] / (args.rounds + 1):.1f} / {counts[1] / (args.rounds + 1):.1f} / "
                    f"{counts[2] / (args.rounds + 1):.2f} |")
    text = "\n".join([
        "# Python's garbage collector paused during prenet.predict, and not", "",
        f"`python bench/collector_pause.py --rounds {args.rounds}` ({time.strftime('%Y-%m-%d')}; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}): ResNet-50, batch 32, 1,024 "
        "samples, V100, fp32, SGD; each predict run beside a batch-1 forward pass, the two variants in turn in each "
        "round, in one process. The collector's passes per predict by generation (young / middle / full; a full "
        "pass walks every object the process holds).", "",
        "| variant | predict median (ms) | predict mean (ms) | predict max (ms) | forward pass mean (ms) | "
        "collector passes per predict |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
