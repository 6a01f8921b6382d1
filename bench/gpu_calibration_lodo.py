"""What a GPU calibration by a few timed layers per kind (prenet.gpu_calibration) would leave, leave one device out:
the candidate the unseen-GPU bundle is fitted with (prenet.unseen_gpu.SERVED_SET; xgboost learned on device time,
each NeuSight GPU held out in turn), on the held-out GPU's rows whose device time is at least MIN_DEVICE_MS (as
prenet.gpu_calibration times them), as predicted and after each (kind, held-out GPU) cell's predictions are scaled
by the median ratio of measured to predicted over K of its rows drawn at random (the calibration's reference layers;
judged on the other rows; the median over DRAWS draws), by that of SPREAD_ROWS rows spread over the predicted time
as prenet calibrate --gpu picks its reference layers, and by the median over all of its rows (the best one factor
can do); judged both by the median relative error and by the share of the measured time mispredicted.

Run:  .venv/bin/python bench/gpu_calibration_lodo.py [--out FILE] (about a minute).
Writes bench/results/gpu_calibration_lodo.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from prenet import gpu_calibration, unseen_gpu
from prenet.datasets import load_neusight
from report import RESULTS, cells_summary_row, write_report

REFERENCE_ROWS = (5, 10, 20)
# as prenet calibrate --gpu picks them: spread over the predicted time (gpu_calibration.spread_in_time)
SPREAD_ROWS = 10
DRAWS = 20


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_calibration_lodo.md")
    args = parser.parse_args(argv)
    settings = unseen_gpu.committed_settings((unseen_gpu.SERVED_SET,))
    started = time.monotonic()
    data = load_neusight(timing="device")
    rng = np.random.default_rng(0)
    columns = ["as predicted", *(f"{k} timed" for k in REFERENCE_ROWS), f"{SPREAD_ROWS} spread",
               "all rows' factor"]
    cells, weighted, rows = {column: [] for column in columns}, {column: [] for column in columns}, []
    for kind in sorted(data):
        for held_out, _, test, _, predicted in unseen_gpu.held_out_predictions(kind, data[kind], settings):
            measured = test["forward_ms"].to_numpy(float)
            kept = measured >= gpu_calibration.MIN_DEVICE_MS
            measured, predicted = measured[kept], predicted[kept]
            log_ratio = np.log(measured / predicted)
            every = np.arange(len(measured))

            def judged(factor, rest):  # (median relative error, share of the measured time mispredicted)
                miss = np.abs(predicted[rest] * factor - measured[rest])
                return float(np.median(miss / measured[rest])), float(miss.sum() / measured[rest].sum())

            errors = {"as predicted": judged(1.0, every), "all rows' factor": judged(np.exp(np.median(log_ratio)),
                                                                                     every)}
            spread = gpu_calibration.spread_in_time(predicted, SPREAD_ROWS)
            errors[f"{SPREAD_ROWS} spread"] = judged(np.exp(np.median(log_ratio[spread])), np.setdiff1d(every, spread))
            for k in REFERENCE_ROWS:
                draws = []
                for _ in range(DRAWS):
                    order = rng.permutation(len(measured))
                    draws.append(judged(np.exp(np.median(log_ratio[order[:k]])), order[k:]))
                errors[f"{k} timed"] = tuple(np.median(draws, axis=0))
            for column in columns:
                cells[column].append(errors[column][0])
                weighted[column].append(errors[column][1])
            rows.append(f"| {kind} | {held_out} | {int(kept.sum())} | "
                        + " | ".join(f"{errors[c][0]:.1%} ({errors[c][1]:.1%})" for c in columns) + " |")
            print(rows[-1], flush=True)
    summary = [cells_summary_row(column, errors) for column, errors in cells.items()]
    summary_weighted = [cells_summary_row(column, errors) for column, errors in weighted.items()]
    text = "\n".join([
        "# A GPU calibration by a few timed layers per kind, leave one device out", "",
        f"`.venv/bin/python bench/gpu_calibration_lodo.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; the '{unseen_gpu.SERVED_SET}' candidate, xgboost 300 trees, 1500 rows "
        "per GPU and kind, seed 0, learned and judged on device time), on the held-out rows of at least "
        f"{gpu_calibration.MIN_DEVICE_MS} ms. Per (kind, held-out GPU) cell, the median relative error as predicted, "
        "after scaling by the median measured / predicted of K random rows of the cell (judged on the others; "
        f"median over {DRAWS} draws), after scaling by that of {SPREAD_ROWS} rows spread over the predicted time as "
        "`prenet calibrate --gpu` picks its reference layers (gpu_calibration.spread_in_time), and after scaling by "
        "that of all its rows. In brackets, and in the second table: the share of the judged rows' measured time "
        "that is mispredicted (the sum of absolute errors over the sum of measured times), where large layers count "
        "as they count in a model's step.", "",
        "| predictions | median over cells | cells within 15% | worst cell |", "| --- | --- | --- | --- |",
        *summary, "",
        "| predictions, share of time mispredicted | median over cells | cells within 15% | worst cell |",
        "| --- | --- | --- | --- |", *summary_weighted, "",
        "| kind | held out | rows | " + " | ".join(columns) + " |", "| --- | --- | --- | " +
        " | ".join(["---"] * len(columns)) + " |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
