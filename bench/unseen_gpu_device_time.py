"""Leave-one-device-out with the launch gap taken out of the target: does fitting device time transfer better?

The packaged unseen-GPU predictors ("efficiency": log of latency over the roofline bound) learn NeuSight latencies,
which hold each measuring host's gap (prenet.launch_gap: 15-24 us, a property of the host, not of the GPU). The
candidate "efficiency, device time" learns log((latency - that GPU's gap) / roofline) and predicts a held-out GPU's
latency as its prediction plus the median gap of the GPUs it was fitted on (the held-out gap is never used).
Both are judged on the held-out GPU's measured latency, as results/unseen_gpu_full.md judges its candidates.

Run:  .venv/bin/python bench/unseen_gpu_device_time.py   (about 30 s; 600 rows per GPU and kind, 150 trees)
Writes bench/results/unseen_gpu_device_time.md.
"""
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prenet import launch_gap, training
from prenet.datasets import load_neusight
from prenet.unseen_gpu import _rows, candidate_inputs

RESULTS = Path(__file__).resolve().parent / "results" / "unseen_gpu_device_time.md"
ROWS_PER_GPU, TREES, SEED = 600, 150, 0


def main():
    gaps = launch_gap.load()

    def gap_ms(gpu):
        return 1e-3 * launch_gap.gap_us(gpu, gaps)

    started = time.monotonic()
    data = load_neusight()
    cells = []
    for kind in sorted(data):
        frame = _rows(data[kind][data[kind]["forward_ms"] > 0], ROWS_PER_GPU, SEED)
        for held_out in sorted(frame["gpu"].unique()):
            train, test = frame[frame["gpu"] != held_out], frame[frame["gpu"] == held_out]
            fitted_on = sorted(train["gpu"].unique())
            names, target = candidate_inputs(kind, fitted_on, "efficiency")
            x_train, x_test = training.model_inputs(kind, train, names), training.model_inputs(kind, test, names)
            measured = test["forward_ms"].to_numpy(float)
            latency_model = training.make_model("xgboost", seed=SEED, trees=TREES)
            latency_model.fit(x_train, training.target_values(kind, train, target, "forward_ms"))
            latency = training.to_ms(kind, test, target, latency_model.predict(x_test))
            device = train.assign(device_ms=np.maximum(train["forward_ms"] - train["gpu"].map(gap_ms), 1e-4))
            device_model = training.make_model("xgboost", seed=SEED, trees=TREES)
            device_model.fit(x_train, training.target_values(kind, device, target, "device_ms"))
            typical_gap = statistics.median(gap_ms(g) for g in fitted_on)
            via_device = training.to_ms(kind, test, target, device_model.predict(x_test)) + typical_gap
            cells.append({"kind": kind, "held_out": held_out,
                          "efficiency": float(np.median(np.abs(latency - measured) / measured)),
                          "efficiency, device time": float(np.median(np.abs(via_device - measured) / measured))})
    table = pd.DataFrame(cells)
    columns = ["efficiency", "efficiency, device time"]
    lines = ["# Unseen GPUs: fitting device time instead of latency", "",
             f"`.venv/bin/python bench/unseen_gpu_device_time.py` ({time.strftime('%Y-%m-%d')}, "
             f"{time.monotonic() - started:.0f} s; {ROWS_PER_GPU} rows per GPU and kind, {TREES} trees, seed {SEED}). "
             "Median relative error on the held-out GPU's latency; see the script's description.", "",
             "| candidate | median over cells | cells <= 15% | worst cell |", "|---|---|---|---|"]
    for column in columns:
        lines.append(f"| {column} | {100 * table[column].median():.1f}% | {(table[column] <= 0.15).sum()} of "
                     f"{len(table)} | {100 * table[column].max():.0f}% |")
    lines += ["", "| kind | held out | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for cell in cells:
        lines.append(f"| {cell['kind']} | {cell['held_out']} | " +
                     " | ".join(f"{100 * cell[c]:.1f}%" for c in columns) + " |")
    text = "\n".join(lines) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
