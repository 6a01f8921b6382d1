"""What a row reduction's SIMD features add to its predictors: layer norm and softmax, our feature set with and without
`simd_vectors` and `simd_tail` (the reduced axis in full vectors of 8 floats, ATen's AVX2 vectors, and the elements
after them; prenet/features.hpp), xgboost and random forest, the bundle's target and 80/10/10 split by
configuration (training.fit_kind), every mode of the CPU set and the forward pass of NeuSight's GPU set.

Run:  .venv/bin/python bench/simd_tail.py [--out FILE]   (under a minute). Writes bench/results/simd_tail.md.
"""
import argparse
import time

from prenet import training
from prenet._native import core
from prenet.datasets import load_cpu, load_neusight
from report import RESULTS, write_report

KINDS = ("layer_norm", "softmax")
FAMILIES = ("xgboost", "random_forest")


def simd_features(kind):
    return next(k for k in core().layer_kinds() if k["name"] == kind)["simd_features"]


def cell(scores):
    return f"{100 * scores['median_rel']:.1f}% / {100 * scores['p90_rel']:.1f}%"


def rows_for(data_name, kind, frame, modes):
    """Table rows of one kind: per mode it has times for and family, validation and test errors without and with
    the features."""
    rows = []
    for mode in [m for m in modes if f"{m}_ms" in frame and (frame[f"{m}_ms"] > 0).any()]:
        fitted = {}
        for way, without in (("without", simd_features(kind)), ("with", ())):
            for result in training.fit_kind(kind, frame, mode, families=FAMILIES, sets=["ours"], without=without):
                fitted[way, result["family"]] = result
        for family in FAMILIES:
            before, after = fitted["without", family], fitted["with", family]
            met = "yes" if training.meets_target(after["test"]) else "no"
            rows.append(f"| {data_name} | {kind} | {mode} | {family} | {cell(before['validation'])} | "
                        f"{cell(after['validation'])} | {cell(before['test'])} | {cell(after['test'])} | {met} |")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "simd_tail.md")
    args = parser.parse_args()
    started = time.monotonic()
    cpu, gpu = load_cpu(), load_neusight()
    rows = []
    for kind in KINDS:
        rows += rows_for("CPU", kind, cpu[kind], training.MODES)
        rows += rows_for("GPU", kind, gpu[kind], ["forward"])
    text = "\n".join([
        "# A row reduction's SIMD features: layer norm and softmax", "",
        f"`.venv/bin/python bench/simd_tail.py` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s). "
        "Our feature set without and with `simd_vectors` and `simd_tail` (the reduced axis's full vectors of 8 "
        "floats and the elements after them: ATen's CPU kernels run AVX2 vectors in PyTorch 1.13, and a row's tail "
        "takes a partial vector), each fitted on the same 80/10/10 split by configuration (training.fit_kind); "
        "median / 90th percentile relative error. CPU: this project's CPU set (the AMD EPYC, each configuration's "
        "fastest timing), every mode (the optimizer's mode has no rows for softmax, which has no parameters); GPU: "
        "NeuSight's forward latencies on five GPUs. 'meets' is issue 4's target (5% / 15%) on test, with them.", "",
        "| data | kind | mode | family | validation without | validation with | test without | test with | "
        "meets |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
