"""Should an unseen GPU be predicted to use its peak no better than the best fitted GPU does on the same layer?

Leave one device out (prenet.unseen_gpu's candidates, xgboost learned on device time, each GPU held out in turn): a
held-out GPU's predicted device time, and again held at or above a floor: for each row, the least over the fitted
GPUs of the candidate's own time for that row on that GPU scaled by the ratio of its peak rate to the held-out
GPU's (fp32 FLOP/s for the products and convolutions, memory bandwidth for the rest: the rate the kind's roofline
bound uses), i.e. the held-out GPU at the best efficiency any fitted GPU is predicted to reach on that layer. Judged
as `python -m prenet.unseen_gpu --timing device` judges, on latency (device time plus the fitted GPUs' median
launch gap): per cell, the median relative error; the issue's target is 15% in every cell.

Run:  .venv/bin/python bench/lodo_efficiency_floor.py [--kinds ...] [--out FILE] (a few minutes).
Writes bench/results/lodo_efficiency_floor.md.
"""
import time

import numpy as np

from prenet import launch_gap, training, unseen_gpu
from prenet.datasets import load_neusight
from report import RESULTS, kinds_and_out, write_report

SETS = ("ours", "blend")
# kinds whose roofline bound is compute (their time scales with FLOP/s); the rest are bound by memory traffic
COMPUTE_KINDS = ("linear", "bmm", "conv2d")


def peak_rate(kind, rows):
    """Per row, the rate of the row's GPU that bounds `kind`: fp32 TFLOP/s or memory GB/s (the catalog's)."""
    column = "gpu_fp32_tflops" if kind in COMPUTE_KINDS else "gpu_memory_bandwidth_gbs"
    return training.model_inputs(kind, rows, [column])[:, 0]


def floor_ms(kind, test, fitted_on, predict):
    """Per held-out row: the least over `fitted_on` of predict(row on that GPU) x its rate / the held-out rate."""
    held_rate = peak_rate(kind, test)
    on_fitted = [test.assign(gpu=gpu) for gpu in fitted_on]
    return np.min([predict(rows) * peak_rate(kind, rows) / held_rate for rows in on_fitted], axis=0)


def main(argv=None):
    args = kinds_and_out(__doc__.splitlines()[0], RESULTS / "lodo_efficiency_floor.md", argv)
    settings = unseen_gpu.committed_settings(SETS)
    started = time.monotonic()
    data, gaps = load_neusight(timing="device"), launch_gap.load()
    rows, errors = [], {(s, floored): [] for s in SETS for floored in (False, True)}
    for kind in args.kinds or sorted(data):
        for held_out, fitted_on, test, set_name, predict in unseen_gpu.held_out_fits(kind, data[kind], settings):
            device_ms = predict(test)
            floor = floor_ms(kind, test, fitted_on, predict)
            gap_ms = unseen_gpu.fitted_gap_ms(kind, fitted_on, gaps)
            measured = test["latency_ms"].to_numpy(float)
            cell = []
            for floored, predicted in ((False, device_ms), (True, np.maximum(device_ms, floor))):
                error = float(np.median(np.abs(predicted + gap_ms - measured) / measured))
                errors[(set_name, floored)].append(error)
                cell.append(f"{error:.1%}")
            raised = float(np.mean(floor > device_ms))
            rows.append(f"| {kind} | {held_out} | {set_name} | {cell[0]} | {cell[1]} | {raised:.0%} |")
            print(rows[-1], flush=True)
    summary = []
    for (set_name, floored), values in errors.items():
        values = np.array(values)
        summary.append(f"- {set_name}{', floored' if floored else ''}: median over the {len(values)} cells "
                       f"{np.median(values):.1%}, cells within 15%: {int((values <= 0.15).sum())}, worst "
                       f"{values.max():.1%}")
    text = "\n".join([
        "# Leave one device out: a held-out GPU at no better efficiency than the best fitted GPU", "",
        f"`.venv/bin/python bench/lodo_efficiency_floor.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; xgboost 300 trees, 1500 rows per GPU and kind, seed 0, learned on "
        "device time and judged on latency, as `python -m prenet.unseen_gpu --timing device`). Per cell, the median "
        "relative error as predicted and with the floor (the least over the fitted GPUs of the candidate's time "
        "for the row on that GPU, scaled by its peak rate over the held-out GPU's: fp32 FLOP/s for "
        f"{', '.join(COMPUTE_KINDS)}, memory bandwidth for the rest), and the share of rows the floor raised.", "",
        *summary, "",
        "| kind | held out | candidate | as predicted | floored | rows raised |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
