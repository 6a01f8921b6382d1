"""Which bundle should time a GPU that is a fitted one's twin (the same timing specifications, another memory size,
as the V100 PCIe 16 GB that `gpu="V100"` names is the 32 GB one NeuSight measured)? On the fitted twin's held-out
test configurations (80/10/10 by configuration, seed 0, as prenet.fit splits; neither bundle was fitted on them),
each kernel's device time as predicted (a) by the unseen-GPU bundle for the twin itself (device time learned from
the roofline), which is what such a GPU got before, and (b) by the seen-GPU bundle under the fitted twin's name
(latency learned with the device among its inputs, less the measuring host's launch gap for that kind, as
prenet.predict takes it off), against the measured latency less the same gap (prenet.datasets, timing "device").
Usage: python bench/measured_twin.py [--gpu "Tesla V100-PCIE-16GB"] [--out bench/results/measured_twin.md]"""
import argparse
import time

import numpy as np

from prenet import datasets, launch_gap
from prenet.catalog import device_catalog
from prenet.predictors import PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE, load_bundle, measured_twin
from prenet.training import config_keys, split_by_configuration
from report import RESULTS, write_report


def relative_errors(predicted, measured):
    return np.abs(np.asarray(predicted) / measured - 1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="Tesla V100-PCIE-16GB", help="a catalog GPU that is not fitted itself")
    parser.add_argument("--out", default=RESULTS / "measured_twin.md")
    args = parser.parse_args()
    started = time.time()
    catalog, asked = device_catalog(args.gpu)
    twin = measured_twin(asked)
    if twin is None or twin == asked:
        raise SystemExit(f"{asked} has no fitted twin in {PACKAGED_BUNDLE} (or is fitted itself)")
    seen, unseen = load_bundle(str(PACKAGED_BUNDLE)), load_bundle(str(PACKAGED_UNSEEN_BUNDLE))
    gaps = launch_gap.load()
    rows, all_errors = [], {"unseen": [], "twin": []}
    for kind, frame in sorted(datasets.load_neusight(timing="device").items()):
        keys = config_keys(kind, frame)
        test = frame[(split_by_configuration(frame, keys) == "test") & (frame["gpu"] == twin)]
        if test.empty:
            rows.append(f"| {kind} | 0 | - | - |")  # not measured on the twin
            continue
        configs = test[keys].astype("int64").to_dict("records")
        measured = test["forward_ms"].to_numpy(float)
        gap_ms = 1e-3 * launch_gap.gap_us(twin, gaps, kind)
        as_unseen = unseen.predict(kind, "forward", configs, catalog, asked, "sgd")
        as_twin = np.maximum(np.asarray(seen.predict(kind, "forward", configs, catalog, twin, "sgd")) - gap_ms,
                             datasets.DEVICE_FLOOR_MS)
        errors = {"unseen": relative_errors(as_unseen, measured), "twin": relative_errors(as_twin, measured)}
        for name, values in errors.items():
            all_errors[name].append(values)
        rows.append(f"| {kind} | {len(test)} | " + " | ".join(
            f"{100 * np.median(errors[name]):.1f}% / {100 * np.percentile(errors[name], 90):.1f}%"
            for name in ("unseen", "twin")) + " |")
    pooled = {name: np.concatenate(values) for name, values in all_errors.items()}
    rows.append(f"| all kinds | {len(pooled['twin'])} | " + " | ".join(
        f"{100 * np.median(pooled[name]):.1f}% / {100 * np.percentile(pooled[name], 90):.1f}%"
        for name in ("unseen", "twin")) + " |")
    text = "\n".join([
        f"# Timing {asked} as its fitted twin {twin}", "",
        f"`python bench/measured_twin.py --gpu \"{asked}\"` ({time.strftime('%Y-%m-%d')}, "
        f"{time.time() - started:.0f} s). Device time per kernel on {twin}'s held-out test configurations; "
        "relative error median / 90th percentile.", "",
        f"| kind | test rows | unseen-GPU bundle, as {asked} | seen-GPU bundle, as {twin} |",
        "| --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
