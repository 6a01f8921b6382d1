"""Would the CPU predictors of composite kinds meet issue 4's target as time over their kernels' composition?

A composite kind (attention, the recurrent layers, an embedding, batch norm, pooling) has its forward pass written in
the kind table as kernels of other kinds (cpp/src/kinds: attention as projections, batched products and a softmax;
a recurrent layer as its input projection, a product of the hidden state and a cell per step), which prenet's
layer timing composes where a bundle has no predictor of the kind (prenet/layer_time.hpp). Here each composite
kind's predictor is fitted, per mode, to its time over that composition, the composition taken from the packaged
CPU bundle with the kind's own predictors left out (so the other kinds' predictors, fitted on their own data,
supply it and none of the kind's rows), beside time over the mode's bound. Both are fitted with the tree families on
our features, on the bundle's split (80/10/10 by configuration), chosen as prenet.fit chooses between them (the
nearer the target on validation, training.validation_rank) and judged on the test part: what prenet.fit's step over
the composition (training.OVER_KERNELS) gains, kind by kind.

Left out: linear, bmm and conv2d, whose backward composes their own forward predictor, fitted on another split of
the same configurations (the forward part's training rows hold most of the training step's test configurations);
and the MLP family (most of a full fit's time).

Run:  .venv/bin/python bench/composed_target.py [--kinds lstm rnn ...] [--modes train ...]
      [--out bench/results/composed_target.md]   (about four minutes)
"""
import argparse
import json
import time
from pathlib import Path

from prenet import datasets, fit, training
from prenet.predictors import PACKAGED_HOST_BUNDLE
from report import RESULTS, write_report

ROOT = Path(__file__).resolve().parents[1]


def bundle_without(kind, folder):
    """The bundle at `folder` without `kind`'s predictors (prenet.fit.composing_bundle)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    entries = [entry for entry in manifest["predictors"] if entry["kind"] != kind]
    return fit.composing_bundle(entries, folder, manifest["fitted_on"])


def cell(scores):
    return f"{100 * scores['median_rel']:.1f}% / {100 * scores['p90_rel']:.1f}%"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=None,
                        help="default: every kind whose forward the kind table composes of other kinds")
    parser.add_argument("--modes", nargs="*", default=list(training.MODES), choices=training.MODES)
    parser.add_argument("--out", type=Path, default=RESULTS / "composed_target.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    data = datasets.load_cpu()
    rows, chosen_ours, chosen_any = [], [], []
    for kind in args.kinds or sorted(data):
        if not training.composite(kind):
            if args.kinds:
                raise SystemExit(f"{kind}: its forward is not composed of other kinds' kernels")
            continue
        composed = training.compositions(kind, data[kind], bundle_without(kind, PACKAGED_HOST_BUNDLE))
        for mode in args.modes:
            if (data[kind][f"{mode}_ms"] > 0).sum() < 100:
                continue
            rows_of = training.ModeRows(kind, data[kind], mode)
            fitted = {name: training.fit_kind(kind, data[kind], mode, families=training.TREE_FAMILIES,
                                              sets=(name,), composed=composed) for name in ("ours", "composed")}
            best_ours, best_over = (training.best_on_validation(fitted[name]) for name in ("ours", "composed"))
            best_any = min([best_ours, best_over], key=training.validation_rank)  # prenet.fit's rule
            chosen_ours.append((mode, best_ours["test"]))
            chosen_any.append((mode, best_any["test"]))
            tested = rows_of.part == "test"
            alone = training.scores(rows_of.ms[tested], composed[mode][rows_of.timed][tested])
            rows.append(f"| {kind} | {mode} | {tested.sum()} | {cell(alone)} | {best_ours['family']}: "
                        f"{cell(best_ours['validation'])}, {cell(best_ours['test'])} | {best_over['family']}: "
                        f"{cell(best_over['validation'])}, {cell(best_over['test'])} | "
                        f"{'over the composition' if best_any is best_over else 'over the bound'} | "
                        f"{'yes' if training.meets_target(best_any['test']) else 'no'} |")
            print(rows[-1], flush=True)

    def met(chosen, modes=training.MODES):
        picked = [scores for mode, scores in chosen if mode in modes]
        return f"{sum(map(training.meets_target, picked))} of {len(picked)}"

    command = " ".join([".venv/bin/python bench/composed_target.py"]
                       + ([f"--kinds {' '.join(args.kinds)}"] if args.kinds else [])
                       + ([f"--modes {' '.join(args.modes)}"] if tuple(args.modes) != training.MODES else []))
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
