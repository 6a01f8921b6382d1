"""Whole models on a GPU no predictor was fitted on: the epochs bench/measure_gpu.py measured with prenet.measure
(data/epochs/<GPU>.jsonl) against prenet.predict for that GPU from its catalog entry, with training memory
against the measured peak. Cases that repeat a row of ../shared/data/h100_validation are shown beside it, as
a check that prenet.measure reproduces that set's measurements.

Run:  .venv/bin/python bench/validate_gpu_measured.py [--data data/epochs/NVIDIA_H100_80GB_HBM3.jsonl]
          [--out bench/results/validate_gpu_measured.md]
"""
import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

import prenet
from prenet import reference_models
from prenet.models import REFERENCE_MODELS
from measure_gpu import MODELS
from report import RESULTS, write_report
from validate_h100 import host_costs_note, percentile, validation_file

DATA = Path(__file__).resolve().parents[1] / "data" / "epochs" / "NVIDIA_H100_80GB_HBM3.jsonl"


def shown(path):
    """`path` relative to the repository where it lies inside it."""
    root = DATA.parents[2]
    return path.resolve().relative_to(root) if root in path.resolve().parents else path


def reference_rows():
    """{(model, batch, optimizer, precision): measured epoch s} of the shared H100 validation set, if present."""
    try:
        lines = validation_file().read_text().splitlines()[1:]
    except OSError:
        return {}
    rows = [json.loads(line) for line in lines]
    return {(r["model"], r["batch"], r["optimizer"], r["precision"]): r["epoch_s"] for r in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", default=RESULTS / "validate_gpu_measured.md")
    args = parser.parse_args()
    started = time.monotonic()
    measured = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    reference = reference_rows()
    rows, errors, memory_errors, failed, environment = [], [], [], [], None
    for case in measured:
        if case.get("status") == "failed":
            failed.append(f"{case['model']} b{case['batch']} {case['precision']}: {case['error']}")
            continue
        environment = environment or case["env"]
        factory, inputs = MODELS[case["model"]]
        name = case["model"]
        try:
            model = factory()
        except ImportError:  # transformers is not installed here: predicted on the plain-PyTorch stand-in, with the
            # library's default attention (sdpa), as the measured run had it
            model = getattr(reference_models, REFERENCE_MODELS[case["model"]][0])()
            name = f"{case['model']} (predicted on the stand-in)"
        kwargs = dict(batch=case["batch"], dataset_size=case["n"], optimizer=case["optimizer"],
                      precision=case["precision"], **inputs())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = prenet.predict(model, gpu=case["env"]["device_name"], **kwargs)
            memory = estimate.memory.total / 2 ** 20  # prenet.training_memory of the step predicted
        error = abs(estimate.epoch_seconds - case["epoch_s"]) / case["epoch_s"]
        low, high = estimate.interval_seconds
        errors.append((case["precision"], error, low <= case["epoch_s"] <= high))
        peak = case["env"].get("peak_memory_mib")
        memory_error = abs(memory - peak) / peak if peak else float("nan")
        memory_errors.append(memory_error)
        key = (case["model"], case["batch"], case["optimizer"], case["precision"])
        shared = f"{reference[key]:.3f}" if key in reference else ""
        rows.append(f"| {name} | {case['batch']} | {case['optimizer']} | {case['precision']} | "
                    f"{case['epoch_s']:.3f} | {shared} | {estimate.epoch_seconds:.3f} | {100 * error:.1f}% | "
                    f"{low:.3f}-{high:.3f} | {'yes' if errors[-1][2] else 'no'} | {estimate.bound} | "
                    f"{peak:.0f} | {memory:.0f} | {100 * memory_error:.1f}% |")
        print(rows[-1], flush=True)

    def summary(label, keep):
        chosen = [(e, inside) for precision, e, inside in errors if keep(precision)]
        if not chosen:
            return f"- {label}: no case"
        values = [e for e, _ in chosen]
        return (f"- {label}: {len(values)} cases, median error {100 * statistics.median(values):.1f}%, 90th "
                f"percentile {100 * percentile(values, 0.9):.1f}%; the 80% interval holds "
                f"{sum(inside for _, inside in chosen)} of {len(chosen)}")

    env = environment or {}
    text = "\n".join([
        f"# Whole models on an unseen GPU, measured with prenet.measure: {env.get('device_name', '?')}", "",
        f"`.venv/bin/python bench/validate_gpu_measured.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). Measured: {shown(args.data)} "
        f"(`bench/measure_gpu.py`, the protocol: 1,024 samples resident, one warm-up and three timed epochs, the "
        f"median; torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, host CPU "
        f"{env.get('host_cpu')}). Predicted: prenet.predict for the catalog's entry of that GPU (no layer data "
        "from it is fitted on). 'shared' is the epoch of the same case in ../shared/data/h100_validation, "
        "measured elsewhere by the same protocol." + host_costs_note(), "",
        summary("every case", lambda p: True),
        summary("fp32 (PyTorch's defaults)", lambda p: p == "fp32"),
        summary("bf16 and fp16 (autocast)", lambda p: p in ("bf16", "fp16")),
        summary("fp32_strict and tf32", lambda p: p in ("fp32_strict", "tf32")),
        f"- training memory against the measured peak: median {100 * statistics.median(memory_errors):.1f}%, "
        f"worst {100 * max(memory_errors):.1f}% ({len(memory_errors)} cases)",
        *(["", "Failed to measure: " + "; ".join(failed)] if failed else []), "",
        "| model | batch | optimizer | precision | measured s | shared s | predicted s | error | 80% interval s | "
        "inside | bound | measured peak MiB | predicted memory MiB | memory error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
