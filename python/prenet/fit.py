"""Fits the per-layer predictors, writes the paper-style tables and exports the native bundle.

    .venv/bin/python -m prenet.fit --data cpu --out data/predictors/cpu --results results/predictors_cpu.md
    .venv/bin/python -m prenet.fit --data neusight --out data/predictors/gpu --results results/predictors_gpu.md

For each kind and mode: every feature set (the paper's Baseline, +CO, +CO+CM, +CO+CM+CT, and ours) with every
model family, fitted on 80% of the configurations; the predictor nearest issue 4's target on the validation part
(training.best_on_validation: median and 90th percentile relative error together) is exported; the tables report
the held-out test part. Modes outside --ablation-modes fit our feature set only (every family), and "kernel" where
--sets names it, which is all the bundle needs. Then each kind whose forward the kind table composes of other
kinds' kernels (attention, the recurrent layers, ...) is fitted, every mode, over that composition as the other
kinds' chosen predictors give it ("composed": tree families on ours' inputs, training.OVER_KERNELS), and such a
predictor replaces the one chosen before where it is nearer the target on validation (fit_composed). Each kind is
kept as it finishes: run again with the same settings, an interrupted fit fits only the kinds it had not finished
(--restart: every kind); the bundle folder changes only when all are done.
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import implicit_gemm, training
from ._native import core
from .atomic_file import write_json
from .paper_tables import PAPER_RMSE, PAPER_SELECTION

# The paper's ablation and ours (the reproduction's columns); "efficiency" and "blend" (ours and efficiency averaged,
# prenet.blended_forests) for transfer to unseen GPUs, where blend is chosen (prenet.unseen_gpu.SERVED_SET).
PAPER_AND_OURS = {"baseline": "Baseline", "co": "CO", "cocm": "COCM", "cocmct": "COCMCT", "ours": "ours"}
# "kernel": ours and the kernel the library runs, predicted (training.KernelChoiceModel; linear layers only);
# "composed": ours over the composition of the kind's kernels (training.OVER_KERNELS; fit_composed).
SET_TITLES = {**PAPER_AND_OURS, "efficiency": "efficiency", "blend": "blend", "kernel": "ours+kernel",
              "composed": "ours over kernels"}
# "neusight_device": the NeuSight set as device time (each latency less its host's launch gap, prenet.launch_gap).
DATA_SETS = ("cpu", "neusight", "neusight_device")
# Inside the bundle folder while a fit runs: each finished kind's chosen model files and its tables, so that an
# interrupted fit resumes with the kinds still to fit; the bundle itself is replaced only once every kind is done.
STAGING = ".fit-in-progress"


def subsample(frame, max_rows, seed=0):
    """At most `max_rows` rows of `frame` (0: all), drawn with `seed`: the rows a fit of that size fits a kind on."""
    if max_rows and len(frame) > max_rows:
        return frame.sample(max_rows, random_state=seed).reset_index(drop=True)
    return frame


def load_data(name):
    """{kind: frame} of a data set and its provenance text."""
    from . import datasets

    if name == "neusight":
        return datasets.load_neusight(), f"NeuSight operator latencies (MIT licence), {datasets.neusight_folder()}"
    if name == "neusight_device":
        return datasets.load_neusight(timing="device"), (
            f"NeuSight operator latencies (MIT licence), {datasets.neusight_folder()}, as device time: each latency "
            "less its measuring host's launch gap (data/gpu_launch_gaps.json)")
    if name == "cpu":
        return datasets.load_cpu(), f"prenet CPU layer timings, {', '.join(map(str, datasets.cpu_folders()))}"
    raise ValueError(f"unknown data set {name!r}; known: {', '.join(DATA_SETS)}")


def tables_markdown(kind, mode, results, chosen):
    """RMSE (ms) per family x feature set with the paper's improvement column, the paper's own figures beside
    where it published them, and the chosen predictor."""
    sets = list(dict.fromkeys(r["feature_set"] for r in results))
    families = list(dict.fromkeys(r["family"] for r in results))
    cell = {(r["family"], r["feature_set"]): r["test"] for r in results}  # a set fitted with some families only
    shown = {key: f"{t['rmse_ms']:.4g} ({100 * t['median_rel']:.1f}%)" for key, t in cell.items()}
    paper = PAPER_RMSE.get(kind, {})
    header = "| family | " + " | ".join(SET_TITLES[s] for s in sets) + " | improvement |"
    if paper:
        header += " paper Baseline | paper COCMCT | paper improvement |"
    lines = [f"### {kind}, {mode}", "", "Test RMSE in ms (median relative error in brackets); improvement = Baseline "
             "to COCMCT, as the paper's Tables 4 and 5" + (" (the paper's figures are on its own GPU data)" if paper
                                                          else "") + ".", "", header,
             "| --- |" + " --- |" * (len(sets) + 1 + (3 if paper else 0))]
    for family in families:
        row = [shown.get((family, s), "") for s in sets]
        improvement = ""
        if (family, "baseline") in cell and (family, "cocmct") in cell:
            base, full = cell[(family, "baseline")]["rmse_ms"], cell[(family, "cocmct")]["rmse_ms"]
            improvement = f"{100 * (base - full) / base:.1f}%"
        line = f"| {family} | " + " | ".join(row) + f" | {improvement} |"
        if paper:
            figures = paper.get(family)
            line += (f" {figures[0]} | {figures[1]} | {figures[2]}% |" if figures else " | | |")
        lines.append(line)
    t = chosen["test"]
    lines += ["", f"Chosen on validation: **{chosen['family']} on {SET_TITLES[chosen['feature_set']]}** "
              f"(validation median {100 * chosen['validation']['median_rel']:.2f}%, 90th percentile "
              f"{100 * chosen['validation']['p90_rel']:.2f}%); test: median "
              f"{100 * t['median_rel']:.2f}%, 90th percentile {100 * t['p90_rel']:.2f}%, RMSE {t['rmse_ms']:.4g} ms, "
              f"{t['n']} configurations.", ""]
    return "\n".join(lines)


def selection_markdown(chosen):
    """One row per (kind, mode): the chosen predictor, its test errors, and the paper's choice."""
    lines = ["## Model selection", "", "| kind | mode | chosen (validation) | test median | test p90 | "
             "meets 5% / 15% | paper's choice |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in chosen:
        t = c["test"]
        meets = "yes" if training.meets_target(t) else "no"
        lines.append(f"| {c['kind']} | {c['mode']} | {c['family']} on {SET_TITLES[c['feature_set']]} | "
                     f"{100 * t['median_rel']:.2f}% | {100 * t['p90_rel']:.2f}% | {meets} | "
                     f"{PAPER_SELECTION.get(c['kind'], '')} |")
    return "\n".join(lines + [""])


def result_record(r):
    """A result without its model: what the JSON results file keeps."""
    return {key: r[key] for key in ("kind", "mode", "feature_set", "family", "target", "validation", "test", "fit_s")}


def fit_one_kind(kind, frame, modes, families, sets, ablation_modes, mlp_epochs=300, trees=None):
    """[(kind, mode, results, chosen)] for every mode `frame` times."""
    import torch

    torch.set_num_threads(1)
    fitted = []
    for mode in modes:
        column = f"{mode}_ms"
        if column not in frame or not (frame[column].notna() & (frame[column] > 0)).any():
            continue  # the data set does not time this mode (or the kind has no parameters to update)
        # the other modes: ours, and the kernel set where asked for (fitted only where the data records kernels)
        mode_sets = sets if mode in ablation_modes else ["ours"] + (["kernel"] if "kernel" in sets else [])
        results = training.fit_kind(kind, frame, mode=mode, families=families, sets=mode_sets,
                                    mlp_epochs=mlp_epochs, trees=trees)
        fitted.append((kind, mode, results, training.best_on_validation(results)))
    return fitted


def _start_worker(threads):
    """A worker process's setup: its share of the cores for tree fits, and its end with the fit's process. On
    Linux the kernel signals it when that process ends (PR_SET_PDEATHSIG), so a fit killed outright does not leave
    workers fitting on; without it, they finished their kinds for minutes after a kill."""
    training.set_tree_threads(threads)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG (linux/prctl.h)
        if os.getppid() == 1:  # the fit's process ended before the request was made
            os._exit(1)


def fit_kinds(data, kinds, modes, families, sets, ablation_modes, mlp_epochs=300, trees=None, max_rows=0, jobs=1):
    """Yields (kind, [(kind, mode, results, chosen)] for every mode with data) as each kind finishes, in the order
    of `kinds`; `jobs` worker processes fit kinds side by side."""
    arguments = [(kind, subsample(data[kind], max_rows), modes, families, sets, ablation_modes, mlp_epochs, trees)
                 for kind in kinds]
    if jobs <= 1:
        for args in arguments:
            yield args[0], fit_one_kind(*args)
        return
    import multiprocessing
    import tempfile
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # Each worker reads its kind's rows from a file: a task of a few hundred bytes, where the rows themselves
    # (hundreds of KB) would wait in the pipe to the workers, and should a worker die there, Python 3.11's pool
    # deadlocks writing them instead of reporting the death (a fit hung so, a worker having crashed).
    threads = max(1, (os.cpu_count() or 1) // jobs)  # the cores shared among the workers
    with tempfile.TemporaryDirectory(prefix="prenet-fit-") as folder, \
            ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                initializer=_start_worker, initargs=(threads,)) as pool:
        futures = []
        for kind, frame, *rest in arguments:
            rows = Path(folder) / f"{kind}.pkl"
            frame.to_pickle(rows)
            futures.append((kind, pool.submit(_fit_kind_from_file, kind, str(rows), *rest)))
        for kind, future in futures:
            try:
                fitted = future.result()
            except BrokenProcessPool as error:
                raise RuntimeError(f"a worker process died while fitting {kind} or a kind beside it (see the "
                                   "system log for a crash); the kinds finished before are kept: run the same "
                                   "command again to fit the rest") from error
            yield kind, fitted


def _fit_kind_from_file(kind, rows_path, *rest):
    """fit_one_kind in a worker process, on the rows of `kind` pickled at `rows_path` (fit_kinds)."""
    import pandas as pd

    return fit_one_kind(kind, pd.read_pickle(rows_path), *rest)


def fit_all(data, kinds, modes, families, sets, ablation_modes, mlp_epochs=300, trees=None, max_rows=0, jobs=1):
    """Yields (kind, mode, results, chosen) for every kind and mode with data, in the order of `kinds`
    (fit_kinds)."""
    for _, fitted in fit_kinds(data, kinds, modes, families, sets, ablation_modes, mlp_epochs, trees, max_rows,
                               jobs):
        yield from fitted


class FitProgress:
    """The kinds an interrupted fit of the same settings finished: their manifest entries (model files in the
    staging folder), result records, chosen records and tables. Other settings, `restart` or an unreadable state
    start afresh."""

    def __init__(self, folder, settings, restart=False):
        self.staging = Path(folder) / STAGING
        self.path = self.staging / "progress.json"
        state = None
        if self.path.is_file() and not restart:
            try:
                state = json.loads(self.path.read_text())
            except json.JSONDecodeError:
                state = None
        if not isinstance(state, dict) or state.get("settings") != settings:
            shutil.rmtree(self.staging, ignore_errors=True)
            state = {"settings": settings, "kinds": {}}
        self.staging.mkdir(parents=True, exist_ok=True)
        self.state = state

    @property
    def done(self):
        return self.state["kinds"]

    def add(self, kind, fitted):
        """Keeps a finished kind, [(kind, mode, results, chosen)]: its chosen models written to the staging folder."""
        self.done[kind] = {
            "entries": [training.export_model(self.staging, best) for *_, best in fitted],
            "chosen": [result_record(best) for *_, best in fitted],
            "records": [result_record(r) for _, _, results, _ in fitted for r in results],
            "sections": [tables_markdown(k, mode, results, best) for k, mode, results, best in fitted]}
        write_json(self.path, self.state)

    def composed(self, kind):
        """Whether `kind` went through fit_composed (its "compositions": {mode: the sum of its rows' composed
        times}, empty for a kind not composed of others)."""
        return "compositions" in self.done[kind]

    def add_composed(self, kind, fitted, totals):
        """Keeps what fit_composed made of a kind: [(mode, composed results, chosen)] and its compositions' totals;
        a mode whose chosen predictor is over the composition replaces the one chosen before (its model file
        written to the staging folder), and its tables gain the composed set's row."""
        state = self.done[kind]
        for mode, results, best in fitted:
            index = next(i for i, c in enumerate(state["chosen"]) if c["mode"] == mode)
            if "model" in best:  # nearer the target than the mode's earlier choice
                state["entries"][index] = training.export_model(self.staging, best)
                state["chosen"][index] = result_record(best)
            state["records"] += [result_record(r) for r in results]
            mode_records = [r for r in state["records"] if r["mode"] == mode]
            state["sections"][index] = tables_markdown(kind, mode, mode_records, state["chosen"][index])
        state["compositions"] = totals
        write_json(self.path, self.state)

    def gathered(self, kinds, key):
        return [item for kind in kinds if kind in self.done for item in self.done[kind][key]]

    def finish(self, folder, kinds, provenance, extra=None):
        """Moves the kinds' model files into the bundle `folder`, writes its manifest (with the fields of `extra`),
        removes the staging."""
        entries = self.gathered(kinds, "entries")
        for entry in entries:
            for file in training.model_files(entry):
                (self.staging / file).replace(Path(folder) / file)
        training.write_manifest(folder, entries, provenance, extra)
        shutil.rmtree(self.staging)


def composing_bundle(entries, files, provenance):
    """The native bundle of manifest `entries`, their model files in the folder `files`, loaded through a temporary
    folder of links to them (a bundle reads every model file as it loads)."""
    with tempfile.TemporaryDirectory(prefix="prenet-composing-") as scratch:
        for entry in entries:
            for name in training.model_files(entry):
                (Path(scratch) / name).symlink_to((Path(files) / name).resolve())
        training.write_manifest(scratch, entries, provenance)
        return core().PredictorBundle(scratch, "")


def kind_compositions(progress, kind, frame, kinds, provenance):
    """training.compositions of `kind`'s rows by the chosen predictors of the other `kinds` so far (None, loading
    nothing, for a kind not composed of others)."""
    if not training.composite(kind):
        return None
    others = [entry for other in kinds if other != kind for entry in progress.done[other]["entries"]]
    return training.compositions(kind, frame, composing_bundle(others, progress.staging, provenance))


def fit_composed(kind, frame, composed, chosen, families, trees=None):
    """[(mode, results, best)] for each mode of `chosen` (the kind's chosen records): the composed set fitted over
    `composed` (training.compositions) with the tree families of `families`, and the nearer the target on
    validation (training.validation_rank) of its best and the earlier choice (a record, without a model)."""
    fitted = []
    for record in chosen:
        results = training.fit_kind(kind, frame, mode=record["mode"], families=families, sets=("composed",),
                                    trees=trees, composed=composed)
        best = min([record, training.best_on_validation(results)], key=training.validation_rank)
        fitted.append((record["mode"], results, best))
    return fitted


def check_compositions(progress, data, kinds, provenance, max_rows):
    """Raises RuntimeError where a kind fitted over its kernels' composition would meet another at prediction: one
    of the kinds it is composed of refitted over its own after it was fitted (the composition totals differ)."""
    for kind in kinds:
        totals = progress.done[kind].get("compositions")
        if not totals or not any(e["target"] == training.OVER_KERNELS for e in progress.done[kind]["entries"]):
            continue
        composed = kind_compositions(progress, kind, subsample(data[kind], max_rows), kinds, provenance)
        changed = [mode for mode, total in totals.items()
                   if not math.isclose(float(np.sum(composed[mode])), total, rel_tol=1e-9)]
        if changed:
            raise RuntimeError(f"{kind} was fitted over its kernels' composition, which the final bundle composes "
                               f"otherwise in modes {changed}: a kind it is composed of was refitted over its own "
                               "kernels after it; fit that kind first (--restart)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=DATA_SETS, default="neusight")
    parser.add_argument("--out", required=True, help="bundle folder to write")
    parser.add_argument("--results", required=True, help="markdown file for the tables (a .json beside it)")
    parser.add_argument("--kinds", nargs="*", help="default: every kind in the data")
    parser.add_argument("--modes", nargs="*", default=list(training.MODES))
    parser.add_argument("--ablation-modes", nargs="*", default=["forward", "train"],
                        help="modes that run every feature set (the others: ours, and kernel if in --sets)")
    parser.add_argument("--families", nargs="*", default=list(training.FAMILIES))
    parser.add_argument("--sets", nargs="*", default=list(PAPER_AND_OURS),
                        choices=[s for s in SET_TITLES if s != "composed"],  # fitted after every kind, on its own
                        help="feature sets of the ablation modes (composite kinds are also fitted over their "
                             "kernels' composition after every kind, whatever the sets)")
    parser.add_argument("--mlp-epochs", type=int, default=300)
    parser.add_argument("--trees", type=int, help="tree count of the tree families (default: each family's own)")
    parser.add_argument("--max-rows", type=int, default=0, help="subsample each kind to this many rows (0: all)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes fitting kinds side by side")
    parser.add_argument("--restart", action="store_true",
                        help="fit every kind again, not resuming an interrupted fit of the same settings")
    args = parser.parse_args(argv)

    data, source = load_data(args.data)
    kinds = args.kinds or sorted(data)
    unknown = sorted(set(kinds) - set(data))
    if unknown:
        parser.error(f"no data for kinds {unknown}; this set has {sorted(data)}")
    settings = {key: value for key, value in vars(args).items()
                if key not in ("out", "results", "kinds", "jobs", "restart")}
    settings["rows"] = {kind: int(len(data[kind])) for kind in kinds}
    progress = FitProgress(args.out, settings, restart=args.restart)
    resumed = [kind for kind in kinds if kind in progress.done]
    if resumed:
        print(f"resuming an interrupted fit: {', '.join(resumed)} already fitted (--restart fits them again)",
              flush=True)
    started = time.monotonic()
    todo = [kind for kind in kinds if kind not in progress.done]
    for kind, fitted in fit_kinds(data, todo, args.modes, args.families, args.sets, args.ablation_modes,
                                  args.mlp_epochs, args.trees, args.max_rows, args.jobs):
        progress.add(kind, fitted)
        for _, mode, _, best in fitted:
            print(f"{kind} {mode}: {best['family']} on {best['feature_set']}, test median "
                  f"{100 * best['test']['median_rel']:.2f}% ({time.monotonic() - started:.0f} s)", flush=True)
    provenance = {"data": source, "modes": sorted({c["mode"] for c in progress.gathered(kinds, "chosen")}),
                  "devices": sorted({g for k in kinds for g in data[k]["gpu"].unique()}),
                  "rows": {k: int(min(len(data[k]), args.max_rows or len(data[k]))) for k in kinds},
                  "ranges": {k: training.parameter_ranges(k, data[k]) for k in kinds},
                  "split": "80/10/10 by configuration, seed 0", "mlp_epochs": args.mlp_epochs,
                  "trees": args.trees or "family default",
                  # what the predictors return: a measured latency (with the host's launch gap) or device time
                  "timing": "device" if args.data == "neusight_device" else "latency"}
    composed_families = [family for family in args.families if family in training.TREE_FAMILIES]
    for kind in kinds:
        if progress.composed(kind):
            continue
        frame = subsample(data[kind], args.max_rows)
        composed = kind_compositions(progress, kind, frame, kinds, provenance) if composed_families else None
        fitted = [] if composed is None else fit_composed(kind, frame, composed, progress.done[kind]["chosen"],
                                                          composed_families, args.trees)
        progress.add_composed(kind, fitted, {} if composed is None else
                              {mode: float(np.sum(values)) for mode, values in composed.items()})
        for mode, _, best in fitted:
            print(f"{kind} {mode} over its kernels: {best['family']} on {best['feature_set']}, test median "
                  f"{100 * best['test']['median_rel']:.2f}% ({time.monotonic() - started:.0f} s)", flush=True)
    check_compositions(progress, data, kinds, provenance, args.max_rows)
    chosen, records = progress.gathered(kinds, "chosen"), progress.gathered(kinds, "records")
    sections = progress.gathered(kinds, "sections")
    extra = {}
    if args.data != "cpu" and {"conv2d", "linear"} <= set(kinds):
        # a convolution's implicit GEMM on tensor cores, over its product's time, by the bundle's own predictors
        extra["implicit_gemm_overhead"] = implicit_gemm.manifest_entry(
            composing_bundle(progress.gathered(kinds, "entries"), progress.staging, provenance),
            provenance["timing"] == "latency")
    progress.finish(args.out, kinds, provenance, extra)
    medians = [c["test"]["median_rel"] for c in chosen]
    command = f"`.venv/bin/python -m prenet.fit {' '.join(argv if argv is not None else sys.argv[1:])}`"
    header = [f"# Per-layer predictors: {args.data}", "",
              f"{command} ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s). Data: {source}. "
              f"Median of the per-kind test medians: {100 * float(np.median(medians)):.2f}%.", "",
              selection_markdown(chosen), "## Ablation per kind and mode", ""]
    results_path = Path(args.results)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text("\n".join(header + sections))
    results_path.with_suffix(".json").write_text(json.dumps({"command": command, "provenance": provenance,
                                                             "results": records}, indent=1))


if __name__ == "__main__":
    main()
