"""How much of the leave-one-device-out error of the streaming and normalisation kinds is the measuring host's
launch gap rather than the GPU: the chosen unseen-GPU candidate (prenet.unseen_gpu.SERVED_SET, learned on device
time) fitted without each GPU in turn, its held-out latencies predicted as device time plus (a) the
fitted GPUs' median gap for the kind, as prenet.unseen_gpu does and as a GPU never measured gets, and (b) the
held-out host's own gap (prenet.launch_gap, fitted on that host's rows): the host known, the GPU not.

Run:  .venv/bin/python bench/lodo_host_gap.py [--kinds add relu softmax layer_norm gelu] [--out FILE]
(about a quarter of a minute). Writes bench/results/lodo_host_gap.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from prenet import launch_gap, unseen_gpu
from prenet.datasets import load_neusight
from report import RESULTS, write_report

SET = unseen_gpu.SERVED_SET


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=["add", "relu", "gelu", "softmax", "layer_norm"])
    parser.add_argument("--out", type=Path, default=RESULTS / "lodo_host_gap.md")
    args = parser.parse_args(argv)
    settings = unseen_gpu.committed_settings((SET,))
    started = time.monotonic()
    data, gaps = load_neusight(timing="device"), launch_gap.load()
    rows, cells = [], {"fitted": [], "own": []}
    for kind in args.kinds:
        for held_out, fitted_on, test, _, device_ms in unseen_gpu.held_out_predictions(kind, data[kind], settings):
            latency = test["latency_ms"].to_numpy(float)
            fitted_gap = unseen_gpu.fitted_gap_ms(kind, fitted_on, gaps)
            own_gap = 1e-3 * launch_gap.gap_us(held_out, gaps, kind)
            errors = {label: float(np.median(np.abs(gap + device_ms - latency) / latency))
                      for label, gap in (("fitted", fitted_gap), ("own", own_gap))}
            for label, error in errors.items():
                cells[label].append(error)
            short = held_out.replace("NVIDIA ", "").replace("Tesla ", "")
            rows.append(f"| {kind} | {short} | {1e3 * fitted_gap:.1f} | {1e3 * own_gap:.1f} | "
                        f"{100 * errors['fitted']:.1f}% | {100 * errors['own']:.1f}% |")
            print(rows[-1], flush=True)
    text = "\n".join([
        "# Leave one device out: the GPU's error and the measuring host's gap", "",
        f"`.venv/bin/python bench/lodo_host_gap.py` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s;"
        f" xgboost {settings.trees} trees, {settings.rows_per_gpu} rows per GPU and kind, seed {settings.seed}, as "
        "`python -m prenet.unseen_gpu --timing device`). Median relative error of the held-out GPU's latencies, "
        "predicted as the candidate's device time plus the fitted GPUs' median launch gap (what prenet.unseen_gpu "
        "reports) or plus the held-out host's own gap.", "",
        "| kind | held out | fitted GPUs' gap (us) | its own gap (us) | error, fitted gap | error, own gap |",
        "| --- | --- | --- | --- | --- | --- |", *rows, "",
        f"Cells within 15%: {sum(e <= 0.15 for e in cells['fitted'])} of {len(rows)} with the fitted GPUs' gap, "
        f"{sum(e <= 0.15 for e in cells['own'])} with the host's own.", ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
