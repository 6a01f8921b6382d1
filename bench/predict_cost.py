"""What prenet.predict costs, side by side with one CPU forward pass of the same model at batch 1 (issue 5's target:
predict on ResNet-50 under a quarter of that forward pass), on this machine with torch's default threads. The five
things timed (forward pass, predict, predict's two parts alone, and predict followed by its per-module table, which
traces the step again) run in turn, REPEATS rounds after a warm-up, so that a change in the machine's speed during
the run reaches all of them alike; each is the median of its rounds, and the ratio is the median of the rounds' own
ratios. Predict's mean is reported too, with the ratio of the means: a garbage collection of the whole process now
and then lands in a round, and a user pays its average.
Usage: python bench/predict_cost.py [--out bench/results/predict_cost.md]"""
import argparse
import platform
import statistics
import time

import torch
import torchvision

import prenet
from prenet import estimate
from report import RESULTS, write_report

REPEATS = 21
CASES = [("resnet50", "V100"), ("resnet50", "H100"), ("resnet18", "V100")]


def interleaved_seconds(runs, repeats=REPEATS):
    """{name: seconds of each round} for `runs` ({name: function}), run in turn `repeats` times after a warm-up."""
    for run in runs.values():
        run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "predict_cost.md")
    args = parser.parse_args()
    rows = []
    for name, gpu in CASES:
        model = getattr(torchvision.models, name)()
        image = torch.randn(1, 3, 224, 224)

        def forward():
            with torch.no_grad():
                model.eval()(image)

        def predict():
            return prenet.predict(model, batch=32, gpu=gpu, input_shape=(3, 224, 224), dataset_size=1024)

        def trace():  # the model's operators, what predict does before costing them on the GPU
            return estimate.trace_steps(model, 32, 1024, (3, 224, 224))

        traced = trace()
        times = interleaved_seconds({"forward": forward, "predict": predict, "trace": trace,
                                     "costing": lambda: estimate.estimate_traced(traced, 32, gpu, 1024),
                                     "tables": lambda: predict().layers})
        ms = {part: 1e3 * statistics.median(t) for part, t in times.items()}
        ratio = statistics.median(p / f for p, f in zip(times["predict"], times["forward"]))
        mean_ratio = statistics.mean(times["predict"]) / statistics.mean(times["forward"])
        operators = len(next(iter(traced.ops_by_size.values())))
        rows.append(f"| {name} | {gpu} | {predict().traced} | {operators} | {ms['forward']:.1f} | "
                    f"{ms['predict']:.1f} | {1e3 * statistics.mean(times['predict']):.1f} | {ms['trace']:.1f} | "
                    f"{ms['costing']:.1f} | {ratio:.2f} | {mean_ratio:.2f} | {ms['tables']:.1f} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "# What prenet.predict costs against one CPU forward pass at batch 1", "",
        f"`python bench/predict_cost.py` ({time.strftime('%Y-%m-%d')}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {platform.machine()}; {REPEATS} rounds after a warm-up, the five timings "
        "in turn in each; medians, the ratio the median of the rounds' ratios, and predict's mean with the ratio of "
        "the means). predict: "
        "batch 32, 1,024 samples, fp32, SGD. Target: predict below 0.25 forward passes.", "",
        "Of predict: tracing the step (`estimate.trace_steps`) and costing the traced operators on the GPU "
        "(`estimate.estimate_traced`), each timed alone. The last column: predict and then reading its per-module "
        "table (`.layers`), which traces the step again to find each operator's module (predict's own trace "
        "leaves modules out: the times do not depend on them).", "",
        "| model | gpu | traced | operators | forward, batch 1 (ms) | predict (ms) | predict, mean (ms) | trace (ms) | "
        "costing (ms) | predict / forward | mean predict / mean forward | predict and .layers (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
