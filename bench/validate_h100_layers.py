"""Layer by layer on a GPU no predictor was fitted on: the H100 rows of data/gpu (collected this project's way,
scripts/collect_gpu.sh, seeds 0, 1 and 2) against prenet's prediction for the H100 from its catalog entry
(the packaged unseen-GPU predictors; the H100 rows are never fitted on). Per kind and part of the step:
the forward pass (the harness's forward alone, no autograd), the backward pass (composed from forward
predictions of the gradient operators; issue 4's derivation, checked here on a GPU for the first time) and the
optimizer's update.

Run:  .venv/bin/python bench/validate_h100_layers.py [--out bench/results/validate_h100_layers.md]
"""
import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from prenet.datasets import collection_folders, load_harness_rows
from prenet.predictors import resolve
from prenet.training import config_keys
from report import RESULTS, write_report

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
FOLDERS = collection_folders(DATA, "NVIDIA_H100_80GB_HBM3")  # one per sampling seed
PARTS = (("forward", "forward_ms", "forward_ms"), ("backward", "backward_ms", "backward_ms"),
         ("optimizer", "optimizer_ms", "optimizer_ms"))
# The kinds NeuSight's operator set (the GPU predictors' only data) times forward; the rest are composed
# (kernels of known shapes) or bounded by their traffic.
LARGE_MS = 0.2  # a part measured above this is mostly device work (see the report's note)
FITTED_KINDS = {"add", "bmm", "conv2d", "gelu", "layer_norm", "linear", "relu", "softmax"}


def predicted(kind, rows, gpu):
    """Per row: {forward_ms, backward_ms, optimizer_ms} predicted for `gpu`, rows grouped by optimizer."""
    native, catalog, name = resolve(gpu)
    keys = config_keys(kind, rows)  # the kind's parameters, not the other columns the rows carry
    out = [None] * len(rows)
    for optimizer, group in rows.groupby("optimizer"):
        configs = [{k: int(v) for k, v in zip(keys, values)} for values in group[keys].itertuples(index=False)]
        for i, t in zip(group.index, native.estimate(kind, configs, catalog, name, optimizer, "fp32")):
            out[i] = t
    return out


def percentile(values, q):
    return float(np.percentile(values, 100 * q)) if len(values) else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "validate_h100_layers.md")
    parser.add_argument("--gpu", default="H100", help="the catalog name to predict for")
    args = parser.parse_args()
    started = time.monotonic()
    tables = load_harness_rows(FOLDERS)
    predictions = {kind: predicted(kind, rows, args.gpu) for kind, rows in tables.items()}
    sections, summaries = [], []
    for floor in (0.0, LARGE_MS):
        lines, summary = [], {part: [] for part, _, _ in PARTS}
        for kind in sorted(tables):
            rows, times = tables[kind], predictions[kind]
            cells = []
            for part, measured_column, predicted_key in PARTS:
                measured = rows[measured_column].to_numpy(float)
                guess = np.array([t[predicted_key] for t in times])
                keep = np.isfinite(measured) & (measured > floor) & (measured > 0) & np.isfinite(guess) & (guess > 0)
                if not keep.any():
                    cells.append("-")
                    continue
                error = np.abs(guess[keep] - measured[keep]) / measured[keep]
                ratio = statistics.median(guess[keep] / measured[keep])
                summary[part].append((kind, float(np.median(error))))
                cells.append(f"{100 * np.median(error):.1f}% / {100 * percentile(error, 0.9):.1f}% (x{ratio:.2f}, "
                             f"{keep.sum()})")
            basis = sorted({t["forward_basis"] for t in times})
            lines.append(f"| {kind}{' *' if kind in FITTED_KINDS else ''} | {len(rows)} | {' | '.join(cells)} | "
                         f"{', '.join(basis)} |")
        fitted = [e for kind, e in summary["forward"] if kind in FITTED_KINDS]
        title = "every row" if floor == 0 else f"rows whose measured part took more than {floor} ms"
        summaries += [f"- {title}: forward of the learned kinds, median of the per-kind medians "
                      f"{100 * statistics.median(fitted):.1f}% ({sum(e <= 0.15 for e in fitted)} of {len(fitted)} "
                      "kinds within issue 6's 15%); "
                      + "; ".join(f"{part}, every kind: {100 * statistics.median([e for _, e in errors]):.1f}% "
                                  f"({len(errors)} kinds)" for part, errors in summary.items() if errors)]
        sections += [f"## {title[0].upper()}{title[1:]}", "",
                     "| kind | rows | forward | backward | optimizer | forward basis |",
                     "| --- | --- | --- | --- | --- | --- |", *lines, ""]
        print("\n".join(sections[-len(lines) - 3:]), flush=True)
    text = "\n".join([
        "# Layers on an unseen GPU: the H100 rows of data/gpu against prenet's H100 prediction", "",
        f"`.venv/bin/python bench/validate_h100_layers.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). Measured: {', '.join(f'data/gpu/{f.name}' for f in FOLDERS)} "
        "(prenet collect on one H100 80GB HBM3, torch 2.11 / CUDA 13.0 / cuDNN 9.19, fp32 with PyTorch's defaults, "
        "scripts/collect_gpu.sh; never fitted on). Predicted: the packaged GPU predictors for the catalog's "
        f"'{args.gpu}' (fitted on NeuSight's five GPUs; forward only, backward composed of forward predictions of "
        "its gradient operators, the update from its traffic).", "",
        "Cells: median / 90th percentile relative error (median of predicted over measured, rows). Kinds marked * "
        "are the ones the GPU predictors learned (NeuSight's operators); the others are composed or bounded by "
        "their traffic (forward basis column). The harness times each part between CUDA events recorded by the "
        "host around it, so a part whose kernels take less than the host needs to issue them is timed at the "
        "host's pace (a backward pass never under about 40 us: the autograd engine's start); the second table "
        f"keeps the rows above {LARGE_MS} ms, where the device's work dominates.", "",
        *summaries, "", *sections])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
