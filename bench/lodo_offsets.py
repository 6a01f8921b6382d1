"""How much of the leave-one-device-out error is one factor per GPU and kind: the unseen-GPU candidates of
prenet.unseen_gpu ("ours", "efficiency" and their blend, xgboost learned on device time, each GPU held out in turn)
judged on the held-out GPU's device time where the device's work dominates (at least MIN_DEVICE_MS, several times a
launch gap; below it a latency less its host's gap is mostly the host's noise), as they are, and again after each
(kind, held-out GPU) cell's median ratio of measured to predicted is taken out, as a few timed layers per kind on
that GPU could tell. The remainder is what the candidates get wrong within a GPU; the difference, what a GPU's
specifications do not say about it (its clocks under load, its libraries' kernels for it).

Run:  .venv/bin/python bench/lodo_offsets.py [--kinds ...] [--out FILE] (about three minutes).
Writes bench/results/lodo_offsets.md.
"""
import time

import numpy as np

from prenet import unseen_gpu
from prenet.datasets import load_neusight
from report import RESULTS, kinds_and_out, write_report

SETS = ("ours", "efficiency", "blend")
MIN_DEVICE_MS = 0.1


def main(argv=None):
    args = kinds_and_out(__doc__.splitlines()[0], RESULTS / "lodo_offsets.md", argv)
    settings = unseen_gpu.committed_settings(SETS)
    started = time.monotonic()
    data = load_neusight(timing="device")
    rows, within = [], {name: [] for name in SETS}
    for kind in args.kinds or sorted(data):
        cells = {}
        for held_out, _, test, set_name, device_ms in unseen_gpu.held_out_predictions(kind, data[kind], settings):
            kept = test["forward_ms"].to_numpy(float) >= MIN_DEVICE_MS
            measured, device_ms = test["forward_ms"].to_numpy(float)[kept], device_ms[kept]
            log_ratio = np.log(measured / device_ms)
            offset = float(np.median(log_ratio))
            scaled = device_ms * np.exp(offset)
            cells[(held_out, set_name)] = (int(kept.sum()), offset,
                                           float(np.median(np.abs(device_ms - measured) / measured)),
                                           float(np.median(np.abs(scaled - measured) / measured)))
        for held_out in sorted({gpu for gpu, _ in cells}):
            parts = []
            for set_name in SETS:
                kept, offset, error, rest = cells[(held_out, set_name)]
                within[set_name].append((error, rest))
                parts.append(f"x{np.exp(offset):.2f} | {error:.1%} | {rest:.1%}")
            rows.append(f"| {kind} | {held_out} | {kept} | " + " | ".join(parts) + " |")
    summary = []
    for set_name, pairs in within.items():
        errors, rests = np.array(pairs).T
        summary.append(f"- {set_name}: median over the {len(pairs)} cells {np.median(errors):.1%} as predicted, "
                       f"{np.median(rests):.1%} with the cell's factor taken out; cells within 15%: "
                       f"{int((errors <= 0.15).sum())} and {int((rests <= 0.15).sum())}")
    header = " | ".join(f"{s}: measured / predicted | {s}: error | {s}: error, factor out" for s in SETS)
    text = "\n".join([
        "# Leave one device out: how much of the error is one factor per GPU and kind", "",
        f"`.venv/bin/python bench/lodo_offsets.py` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} "
        "s; xgboost 300 trees, 1500 rows per GPU and kind, seed 0, learned and judged on device time, as "
        "`python -m prenet.unseen_gpu --timing device`), on the held-out rows whose device time is at least "
        f"{MIN_DEVICE_MS} ms. Per cell: the median ratio of measured to predicted "
        "device time on the held-out GPU, the median relative error, and the median relative error after the "
        "predictions are scaled by that ratio (what one factor per kind, timed on the GPU, would leave).", "",
        *summary, "",
        f"| kind | held out | rows | {header} |", "| --- | --- | --- | " + " | ".join(["---"] * 3 * len(SETS)) + " |",
        *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
