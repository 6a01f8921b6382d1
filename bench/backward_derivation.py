"""Check of the backward and optimizer derivation (cpp/src/layer_time.cpp) where both are measured: our CPU set.

GPU data has forward times only, so on a GPU the backward pass and the optimizer update are composed from forward
kernels of known shapes (the kinds' backward_kernels, the optimizers' element passes). Here the same composition
runs on the CPU: forward predictors are fitted on the training part of the CPU set (xgboost on our features),
then, for every held-out test configuration, the composed backward and optimizer times are compared with the
measured ones. Beside them: a predictor fitted to the measured backward (resp. optimizer) times directly, the
best one can do with those measurements, and the ratio rule "backward = 2 x forward".

Two terms belong to the harness, not to the layer, and the composition adds them here: the harness keeps each
input a leaf of autograd, so its measured backward also accumulates the input gradient (an add over the input's
elements, none for embedding's integer ids); and each measured backward is one `backward()` call, whose fixed
cost (the autograd engine starting on a graph) is taken as the median measured backward of the smallest adds
of the training part (under 4096 elements; an add's backward runs no kernel).

Run:  .venv/bin/python bench/backward_derivation.py [--kinds ...] [--trees 600]
Writes bench/results/backward_derivation.md and prints the table.
"""
import argparse
import tempfile
import time

import numpy as np

from prenet import training
from prenet._native import core
from prenet.catalog import device_catalog
from prenet.datasets import load_cpu
from report import RESULTS, write_report

REPORT = RESULTS / "backward_derivation.md"


def relative_errors(measured, predicted):
    error = np.abs(np.asarray(predicted) - measured) / measured
    return float(np.median(error)), float(np.quantile(error, 0.9))


def fit_forward_bundle(data, folder, trees):
    """A bundle of forward predictors only (xgboost on ours), fitted on each kind's training part."""
    chosen = []
    for kind, frame in data.items():
        chosen += training.fit_kind(kind, frame, mode="forward", families=["xgboost"], sets=["ours"], trees=trees)
    training.export_bundle(folder, chosen, {"data": "CPU set, training parts", "purpose": "derivation check"})
    return core().PredictorBundle(str(folder))


def accumulation_ms(bundle, kind, configs, catalog, gpu):
    """The harness's input-gradient accumulation: one add over the input's elements (PreNeT eq. 11 count)."""
    if kind == "embedding":
        return np.zeros(len(configs))
    elements = [core().layer_features(kind, c, catalog, gpu)["mem_input"] for c in configs]
    adds = [{"batch": 1, "features": int(n)} for n in elements]
    return np.array(bundle.predict("add", "forward", adds, catalog, gpu))


def engine_call_ms(data):
    """Fixed cost of one backward() call: median measured backward of tiny adds (training part only)."""
    adds = data["add"]
    part = training.split_by_configuration(adds, training.config_keys("add", adds))
    tiny = adds[(part == "train") & (adds["batch"] * adds["features"] < 4096)]
    return float(tiny["backward_ms"].median())


def check_kind(kind, frame, bundle, trees, call_ms):
    catalog, gpu = device_catalog(frame["gpu"].iloc[0])
    keys = training.config_keys(kind, frame)
    rows = []
    for mode in ("backward", "optimizer"):
        if not (frame[f"{mode}_ms"] > 0).any():
            continue
        timed = training.ModeRows(kind, frame, mode)
        data, test = timed.frame, timed.frame[timed.part == "test"].reset_index(drop=True)
        measured = test[f"{mode}_ms"].to_numpy(float)
        composed = np.empty(len(test))
        for optimizer, index in test.groupby("optimizer").indices.items():
            configs = test.iloc[index][keys].astype("int64").to_dict("records")
            times = bundle.estimate(kind, configs, catalog, gpu, optimizer)
            composed[index] = [t[f"{mode}_ms"] for t in times]
            if mode == "backward":
                composed[index] += accumulation_ms(bundle, kind, configs, catalog, gpu) + call_ms
        direct = training.fit_kind(kind, data, mode=mode, families=["xgboost"], sets=["ours"], trees=trees)[0]
        row = {"kind": kind, "mode": mode, "n": len(test), "composed": relative_errors(measured, composed),
               "direct": (direct["test"]["median_rel"], direct["test"]["p90_rel"])}
        if mode == "backward":
            forward = np.array(bundle.predict(kind, "forward", test[keys].astype("int64").to_dict("records"),
                                              catalog, gpu))
            row["twice_forward"] = relative_errors(measured, 2 * forward + call_ms)
        rows.append(row)
    return rows


def markdown(rows, command, seconds, call_ms):
    def cell(pair):
        return f"{100 * pair[0]:.1f}% / {100 * pair[1]:.1f}%" if pair else ""

    lines = ["# Backward and optimizer derivation, checked on the CPU set", "",
             f"`{command}` ({time.strftime('%Y-%m-%d')}, {seconds:.0f} s). Held-out test configurations; "
             "each cell: median / 90th percentile relative error against the measured time. Fixed cost of a backward() "
             f"call (added to the composed and 2 x forward columns): {1000 * call_ms:.1f} us.", "",
             "| kind | mode | test rows | composed from forward kernels | fitted directly | 2 x forward |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['mode']} | {r['n']} | {cell(r['composed'])} | {cell(r['direct'])} | "
                     f"{cell(r.get('twice_forward'))} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*")
    parser.add_argument("--trees", type=int, default=None, help="xgboost trees (default: the family's 600)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    data = load_cpu()
    kinds = args.kinds or sorted(data)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        bundle = fit_forward_bundle(data, folder, args.trees)  # every kind: compositions use other kinds
        call_ms = engine_call_ms(data)
        for kind in kinds:
            rows += check_kind(kind, data[kind], bundle, args.trees, call_ms)
            print(f"{kind}: done ({time.monotonic() - started:.0f} s)", flush=True)
    command = "python bench/backward_derivation.py" + (f" --kinds {' '.join(args.kinds)}" if args.kinds else "") + \
        (f" --trees {args.trees}" if args.trees else "")
    text = markdown(rows, command, time.monotonic() - started, call_ms)
    write_report(REPORT, text)


if __name__ == "__main__":
    main()
