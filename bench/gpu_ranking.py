"""Does prenet.compare rank GPUs as their specifications must? A GPU that outclasses another (prenet.catalog.
outclasses: the same vendor, at least as good in FP32 rate, bandwidth, SMs, L2 and the precision's matrix rate,
better in one) should never be estimated slower. For a few models, both precisions and a small and a large batch,
every such pair over the whole catalog is counted where the outclassing GPU's epoch is estimated more than
TOLERANCE longer, and the worst ones are listed. No measurement: a check of the estimates' consistency, which the
"which GPU" answer rests on.

Usage: .venv/bin/python bench/gpu_ranking.py [--out bench/results/gpu_ranking.md]   (about two minutes)"""
import argparse
import itertools
import time
import warnings

import torch
import torchvision

import prenet
from prenet import reference_models
from prenet.catalog import outclasses
from report import RESULTS, write_report

TOLERANCE = 0.03
BATCHES = (8, 64)
PRECISIONS = ("fp32", "bf16")


def models():
    """(name, model, input arguments of prenet.compare)."""
    tokens = torch.randint(1000, (1, 128))
    image = {"input_shape": (3, 224, 224)}
    return [("resnet50", torchvision.models.resnet50(), image), ("vgg16", torchvision.models.vgg16(), image),
            ("mobilenet_v2", torchvision.models.mobilenet_v2(), image),
            ("bert_base (stand-in)", reference_models.bert_base(), {"example_input": tokens}),
            ("gpt2 (stand-in)", reference_models.gpt2_small(), {"example_input": tokens})]


def inversions(table, catalog, precision):
    """[(outclassing GPU, its epoch s, the outclassed GPU, its epoch s)] where the first is estimated longer."""
    epoch = dict(zip(table["gpu"], table["epoch_seconds"]))
    return [(a, epoch[a], b, epoch[b]) for a, b in itertools.permutations(epoch, 2)
            if outclasses(catalog[a], catalog[b], precision) and epoch[a] > (1 + TOLERANCE) * epoch[b]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "gpu_ranking.md")
    args = parser.parse_args()
    started = time.monotonic()
    warnings.simplefilter("ignore")  # the catalog's AMD GPUs warn that their libraries are not modelled
    catalog = {row["name"]: row for _, row in prenet.gpus().iterrows()}
    rows, worst = [], []
    for (name, model, inputs), precision, batch in itertools.product(models(), PRECISIONS, BATCHES):
        table = prenet.compare(model, batch=batch, gpus="all", precision=precision, dataset_size=1024,
                               progress=False, **inputs)
        pairs = sum(outclasses(catalog[a], catalog[b], precision)
                    for a, b in itertools.permutations(table["gpu"], 2))
        found = inversions(table, catalog, precision)
        worst += [(slow / fast, name, precision, batch, a, b) for a, slow, b, fast in found]
        rows.append(f"| {name} | {precision} | {batch} | {len(table)} | {pairs} | {len(found)} |")
        print(rows[-1], flush=True)
    worst.sort(reverse=True)
    listed = [f"| {name} | {precision} | {batch} | {a} | {b} | {ratio:.2f} |"
              for ratio, name, precision, batch, a, b in worst[:15]]
    text = "\n".join([
        "# Does prenet.compare rank GPUs as their specifications must?", "",
        f"`.venv/bin/python bench/gpu_ranking.py` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s). "
        "Epoch of 1,024 samples, SGD, the whole catalog (`gpus=\"all\"`; in bf16 the GPUs that have it). A pair: one "
        "GPU outclassing another (prenet.catalog.outclasses: the same vendor, at least as good in FP32 rate, "
        "bandwidth, SMs, L2 and the precision's matrix rate, better in one); an inversion: the outclassing GPU "
        f"estimated more than {TOLERANCE:.0%} slower.", "",
        "| model | precision | batch | GPUs | pairs | inversions |", "| --- | --- | --- | --- | --- | --- |",
        *rows, "",
        f"Inversions, the largest first ({len(worst)} in all):", "",
        "| model | precision | batch | outclassing GPU | outclassed GPU | epoch ratio |",
        "| --- | --- | --- | --- | --- | --- |", *(listed or ["| (none) | | | | | |"]), ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
