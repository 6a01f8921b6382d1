"""The paper's unseen-GPU experiment (its Figures 2 and 3) on the NeuSight operator set: for each kind and each
of the five GPUs in turn, predictors are fitted on the other four and judged on the one left out (forward pass).

Candidates: the paper's feature sets (Baseline, +CO, +CO+CM, +CO+CM+CT: a direct regression of log time on layer
and GPU specification columns), ours (log of time over the roofline bound, with exact counts and the GPU's
figures: a roofline with a learned efficiency), "efficiency" (ours without any GPU column: the efficiency
depends on the layer alone, so the device enters only through its roofline) and "blend" (the mean of the two in log
time, prenet.blended_forests). One model family (xgboost) for all.

The held-out residuals log(measured / predicted) also calibrate intervals: quantiles of the other devices'
residuals give an interval whose coverage is counted on the device left out, over the narrowest of LEVELS that
covers 80% on average; the quantiles over all five held-out devices at that range (`interval_factors` in the
.json) are what prenet.predict states.

Timing "device" (`--timing device`) fits every candidate on device time (each latency less its measuring host's
launch gap for that operator, prenet.launch_gap: a property of the host that no GPU specification predicts) and
predicts a held-out GPU's latency as that plus the fitted GPUs' median gap for the operator; cases are still judged
on measured latency.

Run by pytest (tests/test_unseen_gpu.py, reduced) and at full size by `python -m prenet.unseen_gpu`.
"""
import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import launch_gap, training
from .fit import SET_TITLES

# Every candidate, titled as the reproduction's tables title them; but "kernel": the kernels a GPU runs are its own
# (cuBLAS's names carry the architecture), so a held-out GPU's cannot be learnt from the others; and "composed": the
# kinds NeuSight measured are none composed of others' kernels (training.compositions).
SETS = tuple(s for s in SET_TITLES if s not in ("kernel", "composed"))
# The candidate the unseen-GPU bundle is fitted with (data/predictors/gpu_unseen, docs/unseen_gpus.md): the one
# with the lowest median over this experiment's cells, learned on device time.
SERVED_SET = "blend"
COVERAGE = 0.8
# Quantile ranges tried for the stated 80% interval: the narrowest whose leave-one-device-out coverage reaches 80%
# on average over the held-out devices is used (residual quantiles of seen devices understate a new one's).
LEVELS = (0.8, 0.85, 0.9, 0.95, 0.98)


@dataclass
class Settings:
    kinds: tuple = ()            # empty: every kind of the data
    sets: tuple = SETS
    trees: int = 200
    rows_per_gpu: int = 600      # 0: all rows
    seed: int = 0
    timing: str = "latency"      # what the candidates learn: "latency" or "device" (see the module's description)


def committed_settings(sets):
    """The settings of the committed experiment (results/unseen_gpu_device.md: 300 trees, 1500 rows per GPU and
    kind, learned on device time) for the candidates `sets`, which the bench/ studies of it share."""
    return Settings(sets=tuple(sets), trees=300, rows_per_gpu=1500, timing="device")


def candidate_inputs(kind, gpus, set_name):
    """(input names, target) of a candidate for `kind` fitted on `gpus`."""
    return training.feature_sets(kind, gpus, "forward")[set_name], training.target_for(set_name)


def _rows(frame, rows_per_gpu, seed):
    if not rows_per_gpu:
        return frame.reset_index(drop=True)
    return (frame.groupby("gpu", group_keys=False)
            .apply(lambda g: g.sample(min(len(g), rows_per_gpu), random_state=seed)).reset_index(drop=True))


def fitted_gap_ms(kind, fitted_on, gaps):
    """The launch gap (ms) a GPU never measured gets for `kind`: the median over the fitted GPUs' measuring hosts
    (prenet.launch_gap; `gaps` from launch_gap.load())."""
    return 1e-3 * float(np.median([launch_gap.gap_us(gpu, gaps, kind) for gpu in fitted_on]))


def held_out_fits(kind, frame, settings):
    """Each GPU of `frame` held out in turn, each candidate of settings.sets fitted on the others: yields (held-out
    GPU, the GPUs fitted on, the held-out rows, candidate, predict) where predict(rows) is the candidate's time for
    `rows` (any GPU's) in what it learned: latency, or device time under settings.timing "device"."""
    frame = _rows(frame[frame["forward_ms"] > 0], settings.rows_per_gpu, settings.seed)
    for held_out in sorted(frame["gpu"].unique()):
        train, test = frame[frame["gpu"] != held_out], frame[frame["gpu"] == held_out]
        fitted_on = sorted(train["gpu"].unique())
        for set_name in settings.sets:
            names, target = candidate_inputs(kind, fitted_on, set_name)
            model = training.make_candidate(set_name, "xgboost", names, seed=settings.seed, trees=settings.trees)
            model.fit(training.model_inputs(kind, train, names),
                      training.target_values(kind, train, target, "forward_ms"))

            def predict(rows, model=model, names=names, target=target):
                return training.to_ms(kind, rows, target, model.predict(training.model_inputs(kind, rows, names)))
            yield held_out, fitted_on, test, set_name, predict


def held_out_predictions(kind, frame, settings):
    """As held_out_fits, with the candidate's time for the held-out rows in place of its predict."""
    for held_out, fitted_on, test, set_name, predict in held_out_fits(kind, frame, settings):
        yield held_out, fitted_on, test, set_name, predict(test)


def leave_one_device_out(kind, frame, settings, bar=None):
    """Cells (one per held-out GPU and candidate) and residuals {(gpu, set): log(measured / predicted)}; `bar`: a
    progress bar (prenet.progress) advanced by one per fit."""
    cells, residuals = [], {}
    device_timing = settings.timing == "device"
    gaps = launch_gap.load() if device_timing else None
    for held_out, fitted_on, test, set_name, learned_ms in held_out_predictions(kind, frame, settings):
        # the latency a held-out case would show: device time predicted plus a typical host's gap for the kind
        predicted = learned_ms + (fitted_gap_ms(kind, fitted_on, gaps) if device_timing else 0.0)
        measured = test["latency_ms" if device_timing else "forward_ms"].to_numpy(float)
        residuals[(held_out, set_name)] = np.log(measured / predicted)
        cells.append({"kind": kind, "held_out": held_out, "fitted_on": fitted_on, "feature_set": set_name,
                      **training.scores(measured, predicted)})
        if bar is not None:
            bar.update()
    return cells, residuals


def fits_bar(data, kinds, settings, description, enabled):
    """A progress bar (prenet.progress) over the fits held_out_predictions makes for `kinds` of `data`: one per kind,
    held-out GPU and candidate of settings.sets."""
    from .progress import progress_bar

    fits = sum(data[kind]["gpu"].nunique() for kind in kinds) * len(settings.sets)
    return progress_bar(fits, description, enabled=enabled, unit="fit")


def interval_coverage(residuals, set_name, coverage=COVERAGE):
    """Per held-out GPU: the interval from the other GPUs' residual quantiles and the share of this GPU's cases it
    covers. Returns {gpu: (low, high, covered)} with low/high as factors on the prediction."""
    gpus = sorted({gpu for gpu, s in residuals if s == set_name})
    tail = (1 - coverage) / 2
    out = {}
    for gpu in gpus:
        others = np.concatenate([residuals[(g, set_name)] for g in gpus if g != gpu])
        low, high = np.quantile(others, [tail, 1 - tail])
        mine = residuals[(gpu, set_name)]
        out[gpu] = (float(np.exp(low)), float(np.exp(high)), float(np.mean((mine >= low) & (mine <= high))))
    return out


def calibrated_level(residuals, set_name):
    """(quantile range, interval_coverage at it): the first of LEVELS whose mean held-out coverage is >= COVERAGE,
    else the widest."""
    for level in LEVELS:
        held_out = interval_coverage(residuals, set_name, level)
        if np.mean([covered for _, _, covered in held_out.values()]) >= COVERAGE:
            break
    return level, held_out


def run(settings, data=None, progress=False):
    """Every kind's leave-one-device-out cells and interval coverage; returns {"cells", "coverage", "markdown"}.
    `progress`: a bar over the fits (one per kind, held-out GPU and candidate)."""
    from .datasets import load_neusight

    data = data if data is not None else load_neusight(timing=settings.timing)
    kinds = [k for k in (settings.kinds or sorted(data)) if k in data]
    started = time.monotonic()
    cells, coverage, factors = [], [], {}
    bar = fits_bar(data, kinds, settings, "Leave one device out", progress)
    for kind in kinds:
        kind_cells, residuals = leave_one_device_out(kind, data[kind], settings, bar)
        cells += kind_cells
        for set_name in settings.sets:
            level, held_out = calibrated_level(residuals, set_name)
            for gpu, (low, high, covered) in held_out.items():
                coverage.append({"kind": kind, "held_out": gpu, "feature_set": set_name, "level": level, "low": low,
                                 "high": high, "covered": covered})
            pooled = np.concatenate([r for (_, s), r in residuals.items() if s == set_name])
            tail = (1 - level) / 2
            factors.setdefault(set_name, {})[kind] = [float(np.exp(q)) for q in np.quantile(pooled, [tail, 1 - tail])]
    bar.close()
    cells, coverage = pd.DataFrame(cells), pd.DataFrame(coverage)
    return {"settings": asdict(settings), "cells": cells, "coverage": coverage, "factors": factors,
            "markdown": markdown(cells, coverage, settings, time.monotonic() - started)}


def markdown(cells, coverage, settings, seconds):
    short = {gpu: gpu.replace("NVIDIA ", "").replace("Tesla ", "") for gpu in cells["held_out"].unique()}
    lines = ["# Unseen GPUs: leave one device out (NeuSight forward pass)", "",
             f"Each GPU in turn is left out of fitting and judged on; xgboost ({settings.trees} trees), "
             f"{settings.rows_per_gpu or 'all'} rows per GPU and kind, seed {settings.seed} ({seconds:.0f} s); "
             + ("candidates learn latency. " if settings.timing == "latency" else "candidates learn device time "
                "(latency less the measuring host's launch gap) and add the fitted GPUs' median gap back; judged "
                "on latency. ") +
             "Written by `pytest tests/test_unseen_gpu.py` (reduced) or `python -m prenet.unseen_gpu` (full).", "",
             "## Which candidate transfers (median over kinds and held-out GPUs)", "",
             "| candidate | median relative error | cells <= 15% | worst cell |", "|---|---|---|---|"]
    for set_name in settings.sets:
        mine = cells[cells["feature_set"] == set_name]
        lines.append(f"| {SET_TITLES[set_name]} | {100 * mine['median_rel'].median():.1f}% | "
                     f"{int((mine['median_rel'] <= 0.15).sum())} of {len(mine)} | "
                     f"{100 * mine['median_rel'].max():.0f}% |")
    for metric, title, scale, unit in (("median_rel", "Median relative error", 100, "%"),
                                       ("rmse_ms", "RMSE", 1, " ms")):
        lines += ["", f"## {title} per kind and held-out GPU", "",
                  "| kind | held out | " + " | ".join(SET_TITLES[s] for s in settings.sets) + " |",
                  "|---|---|" + "---|" * len(settings.sets)]
        for (kind, gpu), group in cells.groupby(["kind", "held_out"], sort=True):
            values = group.set_index("feature_set")[metric]
            lines.append(f"| {kind} | {short[gpu]} | " + " | ".join(
                f"{scale * values[s]:.{1 if unit == '%' else 4}f}{unit}" for s in settings.sets) + " |")
    shown = SERVED_SET if SERVED_SET in settings.sets else settings.sets[-1]
    lines += ["", f"## {COVERAGE:.0%} intervals ({SET_TITLES[shown]}): share of the held-out GPU's cases inside the "
              "interval fitted on the other GPUs' residuals", "",
              f"Quantile range: the narrowest of {', '.join(f'{l:.0%}' for l in LEVELS)} whose mean coverage over "
              "the held-out GPUs reaches 80% (the range was chosen seeing every device, so this is slightly "
              "optimistic).", "", "| kind | range | " + " | ".join(short[g] for g in sorted(short)) + " | mean |",
              "|---|---|" + "---|" * (len(short) + 1)]
    mine = coverage[coverage["feature_set"] == shown]
    for kind, group in mine.groupby("kind", sort=True):
        values = group.set_index("held_out")["covered"]
        lines.append(f"| {kind} | {group['level'].iloc[0]:.0%} | " + " | ".join(
            "-" if g not in values else f"{100 * values[g]:.0f}%" for g in sorted(short))
            + f" | {100 * values.mean():.0f}% |")
    lines.append("\n(every candidate's coverage is in the .json beside this file)")
    return "\n".join(lines) + "\n"


def write(outcome, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(outcome["markdown"])
    path.with_suffix(".json").write_text(json.dumps(
        {"settings": outcome["settings"], "cells": outcome["cells"].to_dict("records"),
         "coverage": outcome["coverage"].to_dict("records"), "interval_factors": outcome["factors"]},
        indent=1, default=str))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description="Leave-one-device-out evaluation on the NeuSight set")
    parser.add_argument("--rows-per-gpu", type=int, default=0, help="rows per GPU and kind (0: all)")
    parser.add_argument("--trees", type=int, default=600)
    parser.add_argument("--kinds", nargs="*", default=())
    parser.add_argument("--out", default="results/unseen_gpu_full.md")
    parser.add_argument("--intervals", help="also write the interval factors of --interval-set here (the GPU "
                        "bundle's intervals.json, read by prenet.predict)")
    parser.add_argument("--interval-set", default=SERVED_SET, choices=SETS)
    parser.add_argument("--timing", default="latency", choices=("latency", "device"),
                        help="what the candidates learn (see the module's description)")
    args = parser.parse_args(argv)
    outcome = run(Settings(kinds=tuple(args.kinds), trees=args.trees, rows_per_gpu=args.rows_per_gpu,
                           timing=args.timing), progress=True)
    print(outcome["markdown"])
    print(f"written {write(outcome, args.out)}")
    if args.intervals:
        command = " ".join(argv if argv is not None else sys.argv[1:])
        write_intervals(outcome, args.interval_set, args.intervals, command)


def write_intervals(outcome, set_name, path, arguments):
    """intervals.json: the 80% factors per kind of one candidate, with how they were obtained and how often the
    interval fitted without a device covered that device's cases."""
    coverage = outcome["coverage"]
    mine = coverage[coverage["feature_set"] == set_name]
    Path(path).write_text(json.dumps({
        "coverage": COVERAGE, "feature_set": set_name, "factors": outcome["factors"][set_name],
        "quantile_range": {kind: float(group["level"].iloc[0]) for kind, group in mine.groupby("kind")},
        "held_out_coverage": {kind: float(group["covered"].mean()) for kind, group in mine.groupby("kind")},
        "made_by": f"python -m prenet.unseen_gpu {arguments}", "settings": outcome["settings"]}, indent=1))
    print(f"written {path}")


if __name__ == "__main__":
    main()
