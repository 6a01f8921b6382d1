"""Benchmark: per-layer prediction through the native core against Python xgboost and scikit-learn, same rows.

For one layer kind of the GPU set (by default conv2d, forward), an xgboost model (the family's 600 trees, depth 8,
our features) fitted on its NeuSight rows and exported as the bundles are:
- native: `PredictorBundle.predict` (features computed in C++, trees walked natively from the exported model,
  all in one call from Python);
- Python xgboost: the same booster loaded by the xgboost package, `Booster.predict` on a DMatrix of the same
  inputs (the inputs computed beforehand, so this side is not charged for features);
- scikit-learn: a RandomForestRegressor (100 trees) and a LinearRegression fitted on the same inputs, `predict`.
One-layer latency is the median of many single-row calls; throughput is rows per second on 10,000 rows at once.

Run:  .venv/bin/python bench/inference_latency.py [--kind conv2d] [--rows 10000]
Writes bench/results/inference_latency.md and prints the table.
"""
import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from prenet import training  # noqa: E402
from prenet.catalog import native_catalog  # noqa: E402
from prenet.datasets import load_neusight  # noqa: E402
from prenet._native import core  # noqa: E402
from report import RESULTS, write_report  # noqa: E402

REPORT = RESULTS / "inference_latency.md"


def median_seconds(call, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="conv2d")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args(argv)

    import xgboost
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression

    frame = load_neusight()[args.kind]
    gpu = frame["gpu"].iloc[0]
    result = training.fit_kind(args.kind, frame.sample(min(len(frame), 3000), random_state=0), families=["xgboost"],
                               sets=["ours"])[0]
    folder = tempfile.mkdtemp()
    training.export_bundle(folder, [result], {"data": "latency benchmark"})
    entry = {"family": "xgboost", "features": result["features"], "target": result["target"]}
    frame = frame[frame["gpu"] == gpu]
    frame = frame.sample(args.rows, replace=len(frame) < args.rows, random_state=1).reset_index(drop=True)
    configs = frame[training.config_keys(args.kind, frame)].astype("int64").to_dict("records")
    inputs = training.model_inputs(args.kind, frame, entry["features"])
    target = np.log(frame["forward_ms"].to_numpy())

    bundle, catalog = core().PredictorBundle(folder), native_catalog()
    booster = result["model"].get_booster()
    booster.set_param({"nthread": 1})
    forest = RandomForestRegressor(n_estimators=100, random_state=0, n_jobs=1).fit(inputs, target)
    linear = LinearRegression().fit(inputs, target)

    paths = {
        "native (prenet, features included)": (
            lambda rows: bundle.predict(args.kind, "forward", configs[:rows], catalog, gpu)),
        "Python xgboost Booster.predict": (lambda rows: booster.predict(xgboost.DMatrix(inputs[:rows]))),
        "scikit-learn RandomForestRegressor.predict": (lambda rows: forest.predict(inputs[:rows])),
        "scikit-learn LinearRegression.predict": (lambda rows: linear.predict(inputs[:rows])),
    }
    # The two xgboost paths agree on the trees' output (before the target transform).
    native_ms = np.array(paths["native (prenet, features included)"](200))
    python_raw = booster.predict(xgboost.DMatrix(inputs[:200]))
    base = training.model_inputs(args.kind, frame.iloc[:200], [entry["target"].split(":", 1)[1]])[:, 0] \
        if entry["target"].startswith("log_ms_over:") else 1.0
    np.testing.assert_allclose(native_ms, np.exp(python_raw) * base, rtol=1e-5)

    rows = []
    for name, call in paths.items():
        one = median_seconds(lambda: call(1), args.repeats)
        many = median_seconds(lambda: call(args.rows), 5)
        rows.append((name, one * 1e6, args.rows / many))
    native_one = rows[0][1]
    lines = ["# Per-layer prediction latency and throughput", "",
             f"`.venv/bin/python bench/inference_latency.py --kind {args.kind} --rows {args.rows}` "
             f"({time.strftime('%Y-%m-%d')}; one thread; {args.kind} forward, xgboost with 600 trees on our "
             f"{len(entry['features'])} inputs; native and Python xgboost outputs agree to 1e-5).",
             "", "| path | one layer (us, median) | many layers (rows/s) | one layer vs native |",
             "| --- | --- | --- | --- |"]
    for name, one_us, throughput in rows:
        lines.append(f"| {name} | {one_us:.1f} | {throughput:,.0f} | {one_us / native_one:.1f}x |")
    text = "\n".join(lines) + "\n"
    write_report(REPORT, text)


if __name__ == "__main__":
    main()
