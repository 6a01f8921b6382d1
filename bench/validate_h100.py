"""Validation on hardware no layer data comes from: predicted against measured epoch time on the H100 of
../shared/data/h100_validation (measured by its README's protocol; never used in fitting or tuning).

Run:  .venv/bin/python bench/validate_h100.py
Writes bench/results/validate_h100.md and prints the table. Hugging Face models (bert_base, gpt2) are built
where `transformers` is importable and listed as skipped where it is not; precisions prenet does not predict yet
are listed as such.
"""
import json
import statistics
import time
from pathlib import Path

import prenet
from prenet.datasets import neusight_folder

RESULTS = Path(__file__).resolve().parent / "results" / "validate_h100.md"
TORCHVISION = {"vgg16", "resnet18", "resnet50", "mobilenet_v2"}


def validation_file():
    return neusight_folder().parent / "h100_validation" / "epochs.jsonl"


def build(name):
    """(model, predict keyword arguments) as the validation README builds each model."""
    if name in TORCHVISION:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=1000), {"input_shape": (3, 224, 224)}
    import torch
    import transformers  # ImportError: skipped by the caller

    if name == "bert_base":
        model = transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=2))
        ids = torch.randint(30522, (1, 128))
        return model, {"example_input": {"input_ids": ids, "labels": torch.zeros(1, dtype=torch.long)}}
    if name == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
        ids = torch.randint(50257, (1, 256))
        return model, {"example_input": {"input_ids": ids, "labels": ids}}
    raise ValueError(f"unknown validation model {name!r}")


def main():
    lines = validation_file().read_text().splitlines()
    environment = json.loads(lines[0])["env"]
    rows, errors, inside = [], [], []
    started = time.monotonic()
    for line in lines[1:]:
        case = json.loads(line)
        label = f"{case['model']} | {case['batch']} | {case['optimizer']} | {case['precision']}"
        try:
            model, inputs = build(case["model"])
        except ImportError:
            rows.append(f"| {label} | {case['epoch_s']:.3f} | skipped: transformers is not installed | | | | |")
            continue
        if case["precision"] not in prenet.predictors.PRECISIONS:
            rows.append(f"| {label} | {case['epoch_s']:.3f} | not predicted: precision {case['precision']} "
                        "(open issue) | | | | |")
            continue
        estimate = prenet.predict(model, batch=case["batch"], gpu=case["gpu"], dataset_size=case["n"],
                                  optimizer=case["optimizer"], precision=case["precision"], **inputs)
        error = abs(estimate.epoch_seconds - case["epoch_s"]) / case["epoch_s"]
        errors.append(error)
        low, high = estimate.interval_seconds
        inside.append(low <= case["epoch_s"] <= high)
        rows.append(f"| {label} | {case['epoch_s']:.3f} | {estimate.epoch_seconds:.3f} | {100 * error:.1f}% | "
                    f"{low:.3f}-{high:.3f} | {'yes' if inside[-1] else 'no'} | {estimate.bound} |")
        print(rows[-1], flush=True)
    errors.sort()
    p90 = errors[min(len(errors) - 1, int(round(0.9 * (len(errors) - 1))))] if errors else float("nan")
    text = "\n".join([
        "# Whole-model validation on an unseen GPU: NVIDIA H100 80GB HBM3", "",
        f"`.venv/bin/python bench/validate_h100.py` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s). "
        f"Measured: {validation_file()} (torch {environment['torch']}); predicted: prenet.predict with the packaged "
        "GPU predictors (no H100 layer data exists in this project). Epoch of 1024 samples.", "",
        f"fp32 cases predicted: {len(errors)}; median error {100 * statistics.median(errors):.1f}%, "
        f"90th percentile {100 * p90:.1f}% (targets: 10% and 25%); the stated 80% interval holds the measured "
        f"epoch in {sum(inside)} of {len(inside)} cases. Nearest fitted GPU: {estimate.extrapolation['nearest']} "
        f"(distance {estimate.extrapolation['distance']:.2f}; beyond the fitted range in "
        f"{', '.join(estimate.extrapolation['outside']) or 'nothing'})." if errors else "No case predicted.", "",
        "| model | batch | optimizer | precision | measured s | predicted s | error | 80% interval s | inside | "
        "predicted bound |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
