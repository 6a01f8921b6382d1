"""Validation on hardware no layer data comes from: predicted against measured epoch time on the H100 of
../shared/data/h100_validation (measured by its README's protocol; never used in fitting or tuning).

Run:  .venv/bin/python bench/validate_h100.py [--out FILE] [--gpu-calibration FILE]
Writes bench/results/validate_h100.md (or FILE) and prints the table. With PRENET_HOST_COSTS set, the host costs
are that file's (prenet.host_cost.load), and the report says so. With --gpu-calibration, predictions are
calibrated by that `prenet calibrate --gpu` file (its factors per kind and its host costs), as on the machine that
made it. Hugging Face models (bert_base, gpt2) are built
with `transformers` where it is importable, else as prenet.reference_models' plain-PyTorch versions of the same
architectures (same parameter counts; eager attention), marked as such in the table.
"""
import json
import statistics
import time
from pathlib import Path

import prenet
from prenet.datasets import neusight_folder
from report import RESULTS, write_report

REPORT = RESULTS / "validate_h100.md"
TORCHVISION = {"vgg16", "resnet18", "resnet50", "mobilenet_v2"}


def validation_file():
    return neusight_folder().parent / "h100_validation" / "epochs.jsonl"


def build(name):
    """(model, predict keyword arguments, how it was built) as the validation README builds each model."""
    if name in TORCHVISION:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
        return model, {"input_shape": (3, 224, 224)}, "torchvision"
    import torch

    try:
        import transformers
        source = "transformers"
    except ImportError:
        transformers, source = None, "stand-in"
    from prenet import reference_models

    if name == "bert_base":
        model = (transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=2)) if transformers
                 else reference_models.bert_base())
        ids = torch.randint(30522, (1, 128))
        return model, {"example_input": {"input_ids": ids, "labels": torch.zeros(1, dtype=torch.long)}}, source
    if name == "gpt2":
        model = (transformers.GPT2LMHeadModel(transformers.GPT2Config()) if transformers else
                 reference_models.gpt2_small())
        ids = torch.randint(50257, (1, 256))
        return model, {"example_input": {"input_ids": ids, "labels": ids}}, source
    raise ValueError(f"unknown validation model {name!r}")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def summary(label, errors, inside):
    if not errors:
        return f"- {label}: no case"
    return (f"- {label}: {len(errors)} cases, median error {100 * statistics.median(errors):.1f}%, 90th percentile "
            f"{100 * percentile(errors, 0.9):.1f}%; the 80% interval holds {sum(inside)} of {len(inside)}")


def memory_summary(errors):
    """Training memory (prenet.training_memory) against the measured peak, by the models' source."""
    parts = []
    for label, keep in (("torchvision models", lambda source: source == "torchvision"),
                        ("BERT-base and GPT-2", lambda source: source != "torchvision")):
        chosen = sorted(e for source, e in errors if keep(source))
        if chosen:
            parts.append(f"{label} median {100 * statistics.median(chosen):.1f}%, worst {100 * chosen[-1]:.1f}% "
                         f"({len(chosen)} cases)")
    return ("Training memory (`prenet.training_memory`: weights, gradients, optimizer state, the resident samples "
            "and the activations saved for the backward pass) against the measured peak (`peak_mem_mib`): "
            + "; ".join(parts) + ". No cuDNN workspace, allocator rounding or context is modelled.")


def host_costs_note():
    """The report's note of host costs taken from PRENET_HOST_COSTS (prenet.host_cost.load), or nothing."""
    import os

    chosen = os.environ.get("PRENET_HOST_COSTS")
    return f" Host costs: {chosen} (PRENET_HOST_COSTS)." if chosen else ""


def torch_version():
    import torch

    return torch.__version__


def hugging_face_note(sources):
    """How BERT-base and GPT-2 were built, from the sources build() gave."""
    if "stand-in" in sources:
        return ("BERT-base and GPT-2 marked 'stand-in' are prenet.reference_models' plain-PyTorch versions "
                "(transformers is not installed here): same layers and parameter counts, attention written as matmul "
                "and softmax where the measured run used the library's default attention.")
    import transformers

    return f"BERT-base and GPT-2 are Hugging Face's models (transformers {transformers.__version__})."


def use_calibration(path):
    """Makes prenet.predict read the GPU calibration at `path` (a temporary user cache holding it under the name
    prenet.gpu_calibration gives the H100's file); returns the report's sentence on it."""
    import os
    import shutil
    import tempfile

    from prenet import gpu_calibration

    calibration = gpu_calibration.from_file(path)  # a file that is not one is named here
    cache = tempfile.mkdtemp(prefix="prenet-cache-")
    os.environ["PRENET_CACHE"] = cache
    shutil.copy(path, gpu_calibration.calibration_path(calibration.gpu))
    return f" Calibrated by {path.name}: {calibration.describe()}, and that machine's host costs."


def main():
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPORT))
    parser.add_argument("--gpu-calibration", type=Path, help="a `prenet calibrate --gpu` file of the H100")
    args = parser.parse_args()
    calibration_note = use_calibration(args.gpu_calibration) if args.gpu_calibration else ""
    calibration_option = f" --gpu-calibration {args.gpu_calibration}" if args.gpu_calibration else ""
    lines = validation_file().read_text().splitlines()
    environment = json.loads(lines[0])["env"]
    rows, results, memory_errors = [], [], []  # results: (precision, source, error, inside)
    started = time.monotonic()
    for line in lines[1:]:
        case = json.loads(line)
        model, inputs, source = build(case["model"])
        label = (f"{case['model']}{' (stand-in)' if source == 'stand-in' else ''} | {case['batch']} | "
                 f"{case['optimizer']} | {case['precision']}")
        estimate = prenet.predict(model, batch=case["batch"], gpu=case["gpu"], dataset_size=case["n"],
                                  optimizer=case["optimizer"], precision=case["precision"], **inputs)
        error = abs(estimate.epoch_seconds - case["epoch_s"]) / case["epoch_s"]
        low, high = estimate.interval_seconds
        results.append((case["precision"], source, error, low <= case["epoch_s"] <= high))
        memory_mib = estimate.memory.total / 2 ** 20  # prenet.training_memory of the step predicted
        memory_errors.append((source, abs(memory_mib - case["peak_mem_mib"]) / case["peak_mem_mib"]))
        rows.append(f"| {label} | {case['epoch_s']:.3f} | {estimate.epoch_seconds:.3f} | {100 * error:.1f}% | "
                    f"{low:.3f}-{high:.3f} | {'yes' if results[-1][3] else 'no'} | {estimate.bound} | "
                    f"{case['peak_mem_mib']:.0f} | {memory_mib:.0f} | {100 * memory_errors[-1][1]:.1f}% |")
        print(rows[-1], flush=True)

    def pick(keep):
        chosen = [r for r in results if keep(r)]
        return [r[2] for r in chosen], [r[3] for r in chosen]

    reach = estimate.extrapolation
    text = "\n".join([
        "# Whole-model validation on an unseen GPU: NVIDIA H100 80GB HBM3", "",
        f"`.venv/bin/python bench/validate_h100.py{calibration_option}` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). "
        f"Measured: {validation_file()} (torch {environment['torch']}); predicted: prenet.predict with the packaged "
        "GPU predictors (no H100 layer data is fitted on; data/gpu's H100 rows are validation only). Epoch of 1024 "
        "samples. Targets: fp32 median 10% and 90th percentile 25%; bf16 median 15%." + host_costs_note()
        + calibration_note + f" Traced under torch {torch_version()}.", "",
        summary("fp32, all models", *pick(lambda r: r[0] == "fp32")),
        summary("fp32, torchvision models", *pick(lambda r: r[0] == "fp32" and r[1] == "torchvision")),
        summary("fp32, BERT-base and GPT-2", *pick(lambda r: r[0] == "fp32" and r[1] != "torchvision")),
        summary("bf16 (autocast)", *pick(lambda r: r[0] == "bf16")), "",
        f"Nearest fitted GPU: {reach['nearest']} (distance {reach['distance']:.2f}; beyond the fitted range in "
        f"{', '.join(reach['outside']) or 'nothing'}). " + hugging_face_note({r[1] for r in results}), "",
        memory_summary(memory_errors), "",
        "| model | batch | optimizer | precision | measured s | predicted s | error | 80% interval s | inside | "
        "predicted bound | measured peak MiB | predicted memory MiB | memory error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
