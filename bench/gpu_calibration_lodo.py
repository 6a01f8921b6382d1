"""What a GPU calibration by a few timed layers per kind (prenet.gpu_calibration) would leave, leave one device out:
the candidate the unseen-GPU bundle is fitted with (prenet.unseen_gpu.SERVED_SET; xgboost learned on device time,
each NeuSight GPU held out in turn), on the held-out GPU's rows whose device time is at least MIN_DEVICE_MS (as
prenet.gpu_calibration times them), as predicted and after each (kind, held-out GPU) cell's predictions are scaled
by the median ratio of measured to predicted over K of its rows drawn at random (the calibration's reference layers;
judged on the other rows; the median over DRAWS draws), and by the median over all of its rows (the best one factor
can do).

Run:  .venv/bin/python bench/gpu_calibration_lodo.py [--out FILE] (about a minute).
Writes bench/results/gpu_calibration_lodo.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from prenet import gpu_calibration, unseen_gpu
from prenet.datasets import load_neusight
from report import cells_summary_row, write_report

RESULTS = Path(__file__).resolve().parent / "results"
REFERENCE_ROWS = (5, 10, 20)
DRAWS = 20


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_calibration_lodo.md")
    args = parser.parse_args(argv)
    settings = unseen_gpu.Settings(sets=(unseen_gpu.SERVED_SET,), trees=300, rows_per_gpu=1500, timing="device")
    started = time.monotonic()
    data = load_neusight(timing="device")
    rng = np.random.default_rng(0)
    columns = ["as predicted", *(f"{k} timed" for k in REFERENCE_ROWS), "all rows' factor"]
    cells, rows = {column: [] for column in columns}, []
    for kind in sorted(data):
        for held_out, _, test, _, predicted in unseen_gpu.held_out_predictions(kind, data[kind], settings):
            measured = test["forward_ms"].to_numpy(float)
            kept = measured >= gpu_calibration.MIN_DEVICE_MS
            measured, predicted = measured[kept], predicted[kept]
            log_ratio = np.log(measured / predicted)
            errors = {"as predicted": np.median(np.abs(predicted - measured) / measured),
                      "all rows' factor": np.median(np.abs(predicted * np.exp(np.median(log_ratio)) - measured)
                                                    / measured)}
            for k in REFERENCE_ROWS:
                draws = []
                for _ in range(DRAWS):
                    order = rng.permutation(len(measured))
                    timed, rest = order[:k], order[k:]
                    factor = np.exp(np.median(log_ratio[timed]))
                    draws.append(np.median(np.abs(predicted[rest] * factor - measured[rest]) / measured[rest]))
                errors[f"{k} timed"] = float(np.median(draws))
            for column in columns:
                cells[column].append(errors[column])
            rows.append(f"| {kind} | {held_out} | {int(kept.sum())} | "
                        + " | ".join(f"{errors[c]:.1%}" for c in columns) + " |")
            print(rows[-1], flush=True)
    summary = [cells_summary_row(column, errors) for column, errors in cells.items()]
    text = "\n".join([
        "# A GPU calibration by a few timed layers per kind, leave one device out", "",
        f"`.venv/bin/python bench/gpu_calibration_lodo.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; the '{unseen_gpu.SERVED_SET}' candidate, xgboost 300 trees, 1500 rows "
        "per GPU and kind, seed 0, learned and judged on device time), on the held-out rows of at least "
        f"{gpu_calibration.MIN_DEVICE_MS} ms. Per (kind, held-out GPU) cell, the median relative error as predicted, "
        "after scaling by the median measured / predicted of K random rows of the cell (judged on the others; "
        f"median over {DRAWS} draws), and after scaling by that of all its rows.", "",
        "| predictions | median over cells | cells within 15% | worst cell |", "| --- | --- | --- | --- |",
        *summary, "",
        "| kind | held out | rows | " + " | ".join(columns) + " |", "| --- | --- | --- | " +
        " | ".join(["---"] * len(columns)) + " |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
