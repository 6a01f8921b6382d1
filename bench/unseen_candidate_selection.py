"""Is one unseen-GPU candidate for every kind (the served blend, prenet.unseen_gpu.SERVED_SET) better than choosing a
candidate per kind? Nested leave one device out on device time: each NeuSight GPU in turn is held out (outer); on
the other four, each is held out in turn (inner) and, per kind, the candidate of ours, efficiency and blend with the
lowest median over the inner cells is chosen; the outer GPU then judges the chosen one beside each fixed candidate.
The blend's prediction is the geometric mean of ours' and efficiency's (prenet.blended_forests), so it is derived
from their fits here rather than fitted a third time.

Run:  .venv/bin/python bench/unseen_candidate_selection.py [--kinds ...] [--out FILE] (about five minutes).
Writes bench/results/unseen_candidate_selection.md.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from prenet import launch_gap, unseen_gpu
from prenet.datasets import load_neusight
from report import RESULTS, cells_summary_row, write_report

CANDIDATES = ("ours", "efficiency", "blend")


def cell_errors(kind, frame, settings, gaps):
    """{held-out GPU: {candidate: median relative error of its latencies}}, each GPU of `frame` held out in turn
    (prenet.unseen_gpu.held_out_predictions, which samples the same rows of a GPU however many others it has)."""
    predicted, held_out_rows = {}, {}
    for held_out, fitted_on, test, set_name, device_ms in unseen_gpu.held_out_predictions(kind, frame, settings):
        predicted[(held_out, set_name)] = device_ms
        held_out_rows[held_out] = (unseen_gpu.fitted_gap_ms(kind, fitted_on, gaps), test["latency_ms"].to_numpy(float))
    cells = {}
    for held_out, (gap, latency) in held_out_rows.items():
        ours, efficiency = predicted[(held_out, "ours")], predicted[(held_out, "efficiency")]
        cells[held_out] = {name: float(np.median(np.abs(device + gap - latency) / latency)) for name, device in
                           (("ours", ours), ("efficiency", efficiency), ("blend", np.sqrt(ours * efficiency)))}
    return cells


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=None, help="default: every kind of the data")
    parser.add_argument("--out", type=Path, default=RESULTS / "unseen_candidate_selection.md")
    args = parser.parse_args(argv)
    settings = unseen_gpu.committed_settings(("ours", "efficiency"))
    started = time.monotonic()
    data, gaps = load_neusight(timing="device"), launch_gap.load()
    rows, judged = [], {name: [] for name in (*CANDIDATES, "chosen per kind")}
    for kind in args.kinds or sorted(data):
        frame = data[kind]
        outer = cell_errors(kind, frame, settings, gaps)
        for held_out, errors in outer.items():
            inner = cell_errors(kind, frame[frame["gpu"] != held_out], settings, gaps).values()
            chosen = min(CANDIDATES, key=lambda name: np.median([cell[name] for cell in inner]))
            for name in CANDIDATES:
                judged[name].append(errors[name])
            judged["chosen per kind"].append(errors[chosen])
            short = held_out.replace("NVIDIA ", "").replace("Tesla ", "")
            rows.append(f"| {kind} | {short} | " + " | ".join(f"{100 * errors[n]:.1f}%" for n in CANDIDATES)
                        + f" | {chosen} | {100 * errors[chosen]:.1f}% |")
            print(rows[-1], flush=True)
    summary = [cells_summary_row(name, errors) for name, errors in judged.items()]
    text = "\n".join([
        "# Unseen GPUs: one candidate for every kind, or one chosen per kind", "",
        f"`.venv/bin/python bench/unseen_candidate_selection.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; xgboost {settings.trees} trees, {settings.rows_per_gpu} rows per GPU "
        f"and kind, seed {settings.seed}, learned on device time, judged on latency as `python -m prenet.unseen_gpu "
        "--timing device`). Nested leave one device out: per kind and held-out GPU, the candidate chosen on the other "
        "four GPUs alone (each held out in turn there) is judged on the held-out one, beside the fixed candidates.",
        "", "| predictions | median over cells | cells within 15% | worst cell |", "| --- | --- | --- | --- |",
        *summary, "", "| kind | held out | ours | efficiency | blend | chosen on the other four | its error |",
        "| --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
