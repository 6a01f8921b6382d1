"""Fits the per-kind predictors, writes the paper-style tables and exports the native bundle.

    .venv/bin/python -m prenet.fit --data neusight --out data/predictors/gpu --results results/predictors_gpu.md

For each kind: every feature set (the paper's Baseline, +CO, +CO+CM, +CO+CM+CT, and ours) with every model
family, fitted on 80% of the configurations; the predictor with the lowest validation median relative error is
exported; the tables report the held-out test part.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

from . import training

SET_TITLES = {"baseline": "Baseline", "co": "CO", "cocm": "COCM", "cocmct": "COCMCT", "ours": "ours"}


def _subsample(frame, max_rows, seed=0):
    if max_rows and len(frame) > max_rows:
        return frame.sample(max_rows, random_state=seed).reset_index(drop=True)
    return frame


def tables_markdown(kind, results, chosen):
    """RMSE (ms) per family x feature set with the paper's improvement column, and the chosen predictor."""
    sets = list(dict.fromkeys(r["feature_set"] for r in results))
    families = list(dict.fromkeys(r["family"] for r in results))
    cell = {(r["family"], r["feature_set"]): r["test"] for r in results}
    lines = [f"### {kind}", "", "Test RMSE in ms (median relative error in brackets); improvement = Baseline to "
             "COCMCT, as the paper's Tables 4 and 5.", "",
             "| family | " + " | ".join(SET_TITLES[s] for s in sets) + " | improvement |",
             "| --- |" + " --- |" * (len(sets) + 1)]
    for family in families:
        row = [f"{cell[(family, s)]['rmse_ms']:.4g} ({100 * cell[(family, s)]['median_rel']:.1f}%)" for s in sets]
        improvement = ""
        if (family, "baseline") in cell and (family, "cocmct") in cell:
            base, full = cell[(family, "baseline")]["rmse_ms"], cell[(family, "cocmct")]["rmse_ms"]
            improvement = f"{100 * (base - full) / base:.1f}%"
        lines.append(f"| {family} | " + " | ".join(row) + f" | {improvement} |")
    t = chosen["test"]
    lines += ["", f"Chosen on validation: **{chosen['family']} on {SET_TITLES[chosen['feature_set']]}** "
              f"(validation median {100 * chosen['validation']['median_rel']:.2f}%); test: median "
              f"{100 * t['median_rel']:.2f}%, 90th percentile {100 * t['p90_rel']:.2f}%, RMSE {t['rmse_ms']:.4g} ms, "
              f"{t['n']} configurations.", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=["neusight"], default="neusight")
    parser.add_argument("--out", required=True, help="bundle folder to write")
    parser.add_argument("--results", required=True, help="markdown file for the tables")
    parser.add_argument("--kinds", nargs="*", help="default: every kind in the data")
    parser.add_argument("--families", nargs="*", default=list(training.FAMILIES))
    parser.add_argument("--sets", nargs="*", default=list(SET_TITLES))
    parser.add_argument("--mlp-epochs", type=int, default=300)
    parser.add_argument("--trees", type=int, help="tree count of the tree families (default: each family's own)")
    parser.add_argument("--max-rows", type=int, default=0, help="subsample each kind to this many rows (0: all)")
    args = parser.parse_args(argv)

    from .datasets import load_neusight, neusight_folder

    data = load_neusight()
    kinds = args.kinds or sorted(data)
    sections, chosen = [], []
    started = time.monotonic()
    for kind in kinds:
        frame = _subsample(data[kind], args.max_rows)
        results = training.fit_kind(kind, frame, families=args.families, sets=args.sets, mlp_epochs=args.mlp_epochs,
                                     trees=args.trees)
        best = training.best_on_validation(results)
        chosen.append(best)
        sections.append(tables_markdown(kind, results, best))
        print(f"{kind}: {best['family']} on {best['feature_set']}, test median {100 * best['test']['median_rel']:.2f}%"
              f" ({time.monotonic() - started:.0f} s)", flush=True)
    provenance = {"data": f"NeuSight operator latencies (MIT licence), {neusight_folder()}", "mode": "forward",
                  "devices": sorted({g for k in kinds for g in data[k]["gpu"].unique()}),
                  "rows": {k: int(min(len(data[k]), args.max_rows or len(data[k]))) for k in kinds},
                  "split": "80/10/10 by configuration, seed 0", "mlp_epochs": args.mlp_epochs}
    training.export_bundle(args.out, chosen, "forward", provenance)
    medians = [c["test"]["median_rel"] for c in chosen]
    header = [f"# Per-layer predictors: {args.data}", "",
              f"`.venv/bin/python -m prenet.fit {' '.join(argv if argv is not None else sys.argv[1:])}` "
              f"({time.strftime('%Y-%m-%d')}, "
              f"{time.monotonic() - started:.0f} s). Median of the per-kind test medians: "
              f"{100 * float(np.median(medians)):.2f}%.", ""]
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text("\n".join(header + sections))


if __name__ == "__main__":
    main()
