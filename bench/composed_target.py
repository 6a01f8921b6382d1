"""Would the CPU predictors of composite kinds meet issue 4's target as time over their kernels' composition?

A composite kind (attention, the recurrent layers, an embedding, batch norm, pooling) has its forward pass written in
the kind table as kernels of other kinds (cpp/src/kinds: attention as projections, batched products and a softmax;
a recurrent layer as its input projection, a product of the hidden state and a cell per step), which prenet's
layer timing composes where a bundle has no predictor of the kind (prenet/layer_time.hpp). Here each composite
kind's predictor is fitted, per mode, to its time over that composition, the composition taken from the packaged
CPU bundle with the kind's own predictors left out (so the other kinds' predictors, fitted on their own data,
supply it and none of the kind's rows), beside the bundle's way: time over the mode's bound. Both are fitted with
the tree families on our features, on the bundle's split (80/10/10 by configuration), chosen by the bundle's rule
(training.best_on_validation: nearest the target on validation) and judged on the test part.

Left out: linear, bmm and conv2d, whose backward composes their own forward predictor, fitted on another split of
the same configurations (the forward part's training rows hold most of the training step's test configurations);
and the MLP family (most of a full fit's time).

Run:  .venv/bin/python bench/composed_target.py [--kinds lstm rnn ...] [--modes train ...]
      [--out bench/results/composed_target.md]   (about four minutes)
"""
import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from prenet import datasets, training
from prenet._native import core
from prenet.predictors import PACKAGED_HOST_BUNDLE, resolve
from report import RESULTS, write_report

ROOT = Path(__file__).resolve().parents[1]

MODES = ("forward", "train_forward", "backward", "optimizer", "train")
# Each bundle mode's time among layer_time's parts (prenet.predictors.layer_time); "train" is their step's sum.
PARTS = {"forward": ("forward_ms",), "train_forward": ("step_forward_ms",), "backward": ("backward_ms",),
         "optimizer": ("optimizer_ms",), "train": ("step_forward_ms", "backward_ms", "optimizer_ms")}


def bundle_without(kind, folder):
    """The bundle at `folder` without `kind`'s predictors, loaded through a temporary folder of links to its files
    (a bundle reads every model file as it loads)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["predictors"] = [p for p in manifest["predictors"] if p["kind"] != kind]
    with tempfile.TemporaryDirectory(prefix=f"prenet-without-{kind}-") as scratch:
        for path in folder.iterdir():
            if path.name != "manifest.json":
                (Path(scratch) / path.name).symlink_to(path)
        (Path(scratch) / "manifest.json").write_text(json.dumps(manifest))
        return core().PredictorBundle(scratch, "")


def compositions(kind, frame, bundle, catalog, name):
    """({mode: ms of each row composed of the kind's kernels}, whether the forward is so composed at all)."""
    keys = training.config_keys(kind, frame)
    optimizers = frame["optimizer"].fillna("sgd").to_numpy()
    parts = {part: np.zeros(len(frame)) for part in ("forward_ms", "step_forward_ms", "backward_ms", "optimizer_ms")}
    composed = True
    for optimizer in sorted(set(optimizers)):
        rows = np.flatnonzero(optimizers == optimizer)
        configs = frame.iloc[rows][keys].astype("int64").to_dict("records")
        times = bundle.estimate(kind, configs, catalog, name, optimizer, "fp32")
        composed &= all(t["forward_basis"] == "kernels" for t in times)
        for part, values in parts.items():
            values[rows] = [t[part] for t in times]
    return {mode: sum(parts[part] for part in PARTS[mode]) for mode in MODES}, composed


def over_composition(kind, frame, mode, composed):
    """The tree families fitted to log(time / composed) on our features, on the bundle's split: result dicts as
    training.fit_kind makes them (validation and test scores)."""
    ms_column = f"{mode}_ms"
    optimizer_column = "optimizer" if mode in ("optimizer", "train") else None
    keys = training.config_keys(kind, frame) + ([optimizer_column] if optimizer_column else [])
    part = training.split_by_configuration(frame, keys, 0)
    names = training.feature_sets(kind, frame["gpu"].unique(), mode,
                                  frame[optimizer_column].unique() if optimizer_column else ())["ours"]
    x = training.model_inputs(kind, frame, names, optimizer_column)
    y = np.log(frame[ms_column].to_numpy(float) / composed)
    train = part == "train"
    results = []
    for family in training.TREE_FAMILIES:
        result = {"family": family, "target": "log_ms_over:kernels",
                  "model": training.make_model(family).fit(x[train], y[train]),
                  "target_range": training.target_range("log_ms_over:kernels", y[train])}
        for which in ("validation", "test"):
            rows = part == which
            predicted = composed[rows] * np.exp(training.clipped_targets(result, x[rows]))
            result[which] = training.scores(frame.loc[rows, ms_column].to_numpy(float), predicted)
        results.append(result)
    return results, part


def cell(scores):
    return f"{100 * scores['median_rel']:.1f}% / {100 * scores['p90_rel']:.1f}%"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=None,
                        help="default: every kind whose forward the kind table composes of other kinds")
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--out", type=Path, default=RESULTS / "composed_target.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    data = datasets.load_cpu()
    _, catalog, name = resolve("cpu", calibrated=False)
    rows, chosen_ours, chosen_any = [], [], []
    for kind in args.kinds or sorted(data):
        bundle = bundle_without(kind, PACKAGED_HOST_BUNDLE)
        composed, is_composite = compositions(kind, data[kind], bundle, catalog, name)
        if not is_composite:
            if args.kinds:
                raise SystemExit(f"{kind}: its forward is not composed of other kinds' kernels")
            continue
        for mode in args.modes:
            ms_column = f"{mode}_ms"
            timed = (data[kind][ms_column].notna() & (data[kind][ms_column] > 0)).to_numpy()
            if timed.sum() < 100:
                continue
            frame = data[kind][timed].reset_index(drop=True)
            ours = training.fit_kind(kind, frame, mode, families=training.TREE_FAMILIES, sets=("ours",))
            over, part = over_composition(kind, frame, mode, composed[mode][timed])
            best_ours = training.best_on_validation(ours)
            best_any = training.best_on_validation(ours + over)
            chosen_ours.append((mode, best_ours["test"]))
            chosen_any.append((mode, best_any["test"]))
            tested = part == "test"
            alone = training.scores(frame.loc[tested, ms_column].to_numpy(float), composed[mode][timed][tested])
            best_over = training.best_on_validation(over)
            rows.append(f"| {kind} | {mode} | {tested.sum()} | {cell(alone)} | {best_ours['family']}: "
                        f"{cell(best_ours['validation'])}, {cell(best_ours['test'])} | {best_over['family']}: "
                        f"{cell(best_over['validation'])}, {cell(best_over['test'])} | "
                        f"{'over the composition' if best_any is best_over else 'over the bound'} | "
                        f"{'yes' if training.meets_target(best_any['test']) else 'no'} |")
            print(rows[-1], flush=True)

    def met(chosen, modes=MODES):
        picked = [scores for mode, scores in chosen if mode in modes]
        return f"{sum(map(training.meets_target, picked))} of {len(picked)}"

    command = " ".join([".venv/bin/python bench/composed_target.py"]
                       + ([f"--kinds {' '.join(args.kinds)}"] if args.kinds else [])
                       + ([f"--modes {' '.join(args.modes)}"] if tuple(args.modes) != MODES else []))
    write_report(args.out, "\n".join([
        "# Composite kinds on the CPU: time over the bound, or over the composition of their kernels", "",
        f"`{command}` ({time.strftime('%Y-%m-%d', time.gmtime())}, {time.monotonic() - started:.0f} s; data: "
        f"{', '.join(str(f.resolve().relative_to(ROOT)) for f in datasets.cpu_folders())}, each configuration's "
        "fastest of its timings). "
        + " ".join(__doc__.split("\n\n")[1].split()), "",
        "Kind and mode pairs meeting issue 4's target (test median <= 5%, 90th percentile <= 15%), the predictor "
        f"chosen by the bundle's rule: over the bound alone {met(chosen_ours)}, with the candidates over the "
        f"composition {met(chosen_any)}; training steps {met(chosen_ours, ('train',))} and "
        f"{met(chosen_any, ('train',))}.", "",
        "Cells: median / 90th percentile relative error; the best family of each target chosen on validation, its "
        "validation then test errors. The composition alone: the kind's kernels predicted by the bundle's other "
        "kinds, unscaled.", "",
        "| kind | mode | test rows | composition alone, test | over the bound (the bundle's) | over the composition "
        "| chosen | meets |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""]))


if __name__ == "__main__":
    main()
