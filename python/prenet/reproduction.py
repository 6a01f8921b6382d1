"""Reproduction of the PreNeT paper's predictor experiments on our data: Tables 4 and 5 (test RMSE per layer kind x
model family x feature set, with the improvement column), the model selection of its README, and the paper's
figures printed beside ours. Driven by pytest (tests/test_reproduction.py) and by notebooks/reproduction.ipynb.

The settings here are reduced (rows per kind, trees, MLP epochs) so that the whole reproduction runs in minutes
inside the test suite; `python -m prenet.fit` runs the same experiment at full size. A kind the kind table composes
of other kinds' kernels (attention, the recurrent layers, embedding) also has the candidates `prenet.fit` adds for it
(the "composed" set: time over that composition, fit.fit_composed), composed as the packaged bundle of the data set
composes it (its predictors of the other kinds, fitted on their own rows only), and the choice weighs them too.
"""
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from . import fit, predictors, training
from .paper_tables import PAPER_RMSE

# The kinds of the paper's Tables 4 and 5, plus LayerNorm, which its model selection names.
PAPER_KINDS = ("multihead_attention", "conv2d", "embedding", "linear", "rnn", "layer_norm")


@dataclass
class Settings:
    data: str = "cpu"
    kinds: tuple = PAPER_KINDS
    modes: tuple = ("train",)   # the paper times the training step
    families: tuple = training.FAMILIES
    sets: tuple = tuple(fit.PAPER_AND_OURS)
    max_rows: int = 800
    trees: int = 60
    mlp_epochs: int = 30
    extra: dict = field(default_factory=dict)


# The packaged bundle whose predictors of the other kinds compose a kind's rows, per data set (the served one).
COMPOSING_BUNDLES = {"cpu": predictors.PACKAGED_HOST_BUNDLE, "neusight": predictors.PACKAGED_BUNDLE}


def packaged_compositions(data_set, kind, frame):
    """training.compositions of `kind`'s rows (`frame`) by the packaged bundle of `data_set` without its
    predictors of `kind` (as layer timing composes the kind); None for a kind not composed of others or a data set
    without a packaged bundle."""
    folder = COMPOSING_BUNDLES.get(data_set)
    if folder is None or not training.composite(kind):
        return None
    manifest = json.loads((folder / "manifest.json").read_text())
    others = [entry for entry in manifest["predictors"] if entry["kind"] != kind]
    return training.compositions(kind, frame, fit.composing_bundle(others, folder, manifest["fitted_on"]))


def run(settings):
    """Fits every cell; returns {"settings", "cells": DataFrame, "chosen": [result records], "markdown"}."""
    data, source = fit.load_data(settings.data)
    kinds = [k for k in settings.kinds if k in data]
    started = time.monotonic()
    records, chosen, sections = [], [], []
    composed_families = [f for f in settings.families if f in training.TREE_FAMILIES]
    compositions = {}  # kind -> (the rows fit_all fitted it on, their compositions): one per kind, for every mode
    for kind, mode, results, best in fit.fit_all(data, kinds, settings.modes, settings.families, settings.sets,
                                                 settings.modes, settings.mlp_epochs, settings.trees,
                                                 settings.max_rows):
        if composed_families and kind not in compositions:
            frame = fit.subsample(data[kind], settings.max_rows)
            compositions[kind] = frame, packaged_compositions(settings.data, kind, frame)
        frame, composed = compositions.get(kind, (None, None))
        if composed:
            [(_, over_kernels, best)] = fit.fit_composed(kind, frame, composed, [fit.result_record(best)],
                                                         composed_families, settings.trees)
            results = results + over_kernels
        records += [fit.result_record(r) for r in results]
        chosen.append(fit.result_record(best))
        sections.append(fit.tables_markdown(kind, mode, results, best))
    cells = pd.DataFrame([{**{k: r[k] for k in ("kind", "mode", "family", "feature_set", "target")},
                           **{f"test_{m}": r["test"][m] for m in ("rmse_ms", "median_rel", "p90_rel", "n")},
                           **{f"validation_{m}": r["validation"][m] for m in ("median_rel", "p90_rel", "n")}}
                          for r in records])
    header = [f"# Reproduction of the paper's Tables 4 and 5: {settings.data}", "",
              f"Data: {source}. Reduced settings: {settings.max_rows} rows per kind at most, {settings.trees} trees, "
              f"{settings.mlp_epochs} MLP epochs ({time.monotonic() - started:.0f} s; "
              "`python -m prenet.fit` runs it at full size). Written by `pytest tests/test_reproduction.py`.", "",
              fit.selection_markdown(chosen), "## Tables", ""]
    return {"settings": asdict(settings), "source": source, "cells": cells, "chosen": chosen,
            "markdown": "\n".join(header + sections)}


def paper_comparison(cells):
    """Our Baseline and COCMCT test RMSE beside the paper's, per kind and family, with both improvements (and ours
    and the composed set's, where fitted)."""
    rows = []
    for (kind, mode, family), group in cells.groupby(["kind", "mode", "family"], sort=False):
        rmse = dict(zip(group["feature_set"], group["test_rmse_ms"]))
        if "baseline" not in rmse or "cocmct" not in rmse:
            continue
        paper = PAPER_RMSE.get(kind, {}).get(family)
        rows.append({"kind": kind, "mode": mode, "family": family, "baseline_ms": rmse["baseline"],
                     "cocmct_ms": rmse["cocmct"], "ours_ms": rmse.get("ours"), "composed_ms": rmse.get("composed"),
                     "improvement_pct": 100 * (rmse["baseline"] - rmse["cocmct"]) / rmse["baseline"],
                     "paper_baseline_ms": paper[0] if paper else None, "paper_cocmct_ms": paper[1] if paper else None,
                     "paper_improvement_pct": paper[2] if paper else None})
    return pd.DataFrame(rows)


def write(outcome, path):
    """Writes the markdown tables to `path` and the cells and choices to the .json beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(outcome["markdown"])
    path.with_suffix(".json").write_text(json.dumps({"settings": outcome["settings"], "source": outcome["source"],
                                                     "cells": outcome["cells"].to_dict("records"),
                                                     "chosen": outcome["chosen"]}, indent=1, default=str))
    return path
