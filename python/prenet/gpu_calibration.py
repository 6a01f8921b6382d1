"""The GPU predictors calibrated to a GPU the user can reach, by a few timed layers per kind.

Left out of fitting, a GPU's error is mostly one factor per layer kind (bench/lodo_offsets.py): its clocks under
load and its libraries' kernels, which its specifications do not give. Leave one device out, that factor taken from
10 random layers of the held-out GPU per kind brings the median error over (kind, GPU) cells from 13.1% to 6.9%
(bench/gpu_calibration_lodo.py). `calibrate()` times, on this machine's CUDA GPU with the native harness (as `prenet
collect --device cuda`), PER_KIND reference layers per kind the GPU predictors have, drawn by the collection's
sampler at indices no collection uses and spread over their predicted device time; a kind's factor is the median
ratio of measured device time (latency less the launch gap, prenet.launch_gap) to predicted; it also measures the
machine's dispatch costs (prenet.host_cost). Predictions for that GPU use both wherever a calibration file for it is
in the user's cache (prenet.predictors.resolve); a kind without a factor keeps its prediction. The file keeps
measured times only, predictions are made again when it is read, so it stays valid when the predictors are refitted;
it is written after every timed layer, so an interrupted calibration resumes.
"""
import functools
import json
import math
import re
import statistics
import time
from pathlib import Path

from .atomic_file import write_json
from .calibration_record import read_record, time_layers

FORMAT = "prenet-gpu-calibration"
VERSION = 1
# Sample indices of the reference layers: beyond those of the data sets (0..1999) and of host calibrations
# (100,000 on), so never measured for fitting.
FIRST_INDEX = 200_000
CANDIDATES = 1000  # configurations drawn per kind (elementwise ones over 0.1 ms are rare)
PER_KIND = 10
# Reference layers are predicted to keep the device busy at least this long (below it a latency is mostly the
# launch gap: bench/lodo_offsets.py) and at most MAX_DEVICE_MS (a calibration of a few minutes).
MIN_DEVICE_MS = 0.1
MAX_DEVICE_MS = 50.0
HARNESS_TIMEOUT_S = 120.0


def calibration_path(gpu):
    """The calibration file of catalog GPU `gpu` (its canonical name) in the user's cache."""
    from .host_calibration import cache_folder

    return cache_folder() / f"gpu-{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}.json"


def _predicted_ms(kind, configs, gpu):
    """Predicted device milliseconds (forward) of `configs` of native `kind` on `gpu`, by the uncalibrated GPU
    predictors, the launch gap taken off as prenet.predict takes it off."""
    from . import launch_gap
    from .predictors import gpu_bundle_folder, learned_timing, resolve

    native, catalog, device = resolve(gpu, calibrated=False)
    folder = gpu_bundle_folder(None, device)
    gaps = launch_gap.kind_gaps_ms(device) if learned_timing(str(folder)) == "latency" else {}
    return [t["forward_ms"] for t in native.estimate(kind, configs, catalog, device, "sgd", "fp32", gaps)]


def reference_layers(gpu, per_kind=PER_KIND):
    """[(harness kind, harness configuration, native kind, native configuration)]: per kind the GPU predictors
    have, `per_kind` of the collection's CUDA configurations from FIRST_INDEX (prenet.sampling, within its memory
    budget) predicted between MIN_DEVICE_MS and MAX_DEVICE_MS of device time on `gpu`, spread evenly over that time
    on a log scale (spread_in_time; they had been evenly spaced by rank, which after the batch scaling below left 8
    of the H100's 10 linear layers under 0.25 ms, GPU session of 2026-11-27)."""
    from .host_calibration import native_layer
    from .predictors import resolve
    from .sampling import BUDGETS, SAMPLERS, _work, sample_config

    native, _, _ = resolve(gpu, calibrated=False)
    max_elements = BUDGETS["cuda"][1]
    chosen = []
    for harness_kind in SAMPLERS:
        by_kind = {}
        for index in range(FIRST_INDEX, FIRST_INDEX + CANDIDATES * (5 if harness_kind == "activation" else 1)):
            config = sample_config(harness_kind, index, device="cuda")
            if harness_kind == "linear":
                config["activation"] = "none"
            kind, native_config = native_layer(harness_kind, config)
            if native.has(kind, "forward"):
                by_kind.setdefault(kind, []).append((harness_kind, config, kind, native_config))
        for kind, candidates in by_kind.items():
            times = _predicted_ms(kind, [c[3] for c in candidates], gpu)
            # the sampler's sizes suit a CPU: on a fast GPU most layers take less than MIN_DEVICE_MS, and are
            # timed at a batch that many times larger, where they take about twice it
            candidates = [_with_batch(c, math.ceil(2 * MIN_DEVICE_MS / t)) if 0 < t < MIN_DEVICE_MS else c
                          for c, t in zip(candidates, times)]
            candidates = [c for c in candidates if _work(c[0], c[1])[1] <= max_elements]  # the collection's memory cap
            times = _predicted_ms(kind, [c[3] for c in candidates], gpu)
            chosen += [candidates[i] for i in spread_in_time(times, per_kind)]
    return chosen


def spread_in_time(times, count):
    """Indices of `count` of the layers whose predicted device `times` lie within [MIN_DEVICE_MS, MAX_DEVICE_MS]:
    those nearest to `count` times evenly spaced in log time over the span the layers inside cover (distinct; all of
    them where fewer lie inside), so that large layers, where a model spends its time, are among them."""
    inside = [(math.log(t), i) for i, t in enumerate(times) if MIN_DEVICE_MS <= t <= MAX_DEVICE_MS]
    if len(inside) <= count:
        return sorted(i for _, i in inside)
    low, high = min(inside)[0], max(inside)[0]
    chosen = set()
    for j in range(count):
        target = low + (high - low) * j / max(1, count - 1)
        chosen.add(min((abs(log_t - target), i) for log_t, i in inside if i not in chosen)[1])
    return sorted(chosen)


def _with_batch(layer, factor):
    """A reference layer (harness kind, harness configuration, native kind, native configuration) at `factor`
    times its batch."""
    harness_kind, config, kind, native_config = layer
    return (harness_kind, {**config, "batch": config["batch"] * factor}, kind,
            {**native_config, "batch": native_config["batch"] * factor})


def calibrate(gpu=None, path=None, per_kind=PER_KIND, progress=True):
    """Times the reference layers on this machine's CUDA GPU (catalog name `gpu`, default the one torch reports),
    resuming a calibration left unfinished, and writes the calibration; returns its path. ValueError without a
    CUDA GPU, or for one the catalog does not know."""
    import torch

    from .catalog import find_gpu
    from .collect import Harness

    if not torch.cuda.is_available():
        raise ValueError("calibrating the GPU predictors needs a CUDA GPU, and torch sees none on this machine; "
                         "on a CPU, `prenet calibrate` calibrates the CPU predictors")
    name = find_gpu(gpu or torch.cuda.get_device_name())["name"]  # an unknown GPU is named, with the closest
    path = Path(path) if path else calibration_path(name)
    record = _read(path) if path.is_file() else None
    if record is None or record["gpu"] != name:
        record = {"format": FORMAT, "version": VERSION, "gpu": name, "layers": []}

    def row_of(layer, result):
        harness_kind, config, kind, native_config = layer
        return {"harness_kind": harness_kind, "config": config, "kind": kind, "native_config": native_config,
                "status": result["status"], "error": result.get("error", ""), "forward_ms": result.get("forward_ms")}

    # the calibration also records this machine's dispatch costs (prenet.host_cost), for the host side of its
    # steps: a torch 2 host spends 1.3-3.9 times what the packaged file (torch 1.13) holds (docs/validation.md,
    # "Measured on an H100 ourselves")
    return time_layers(path, record, reference_layers(name, per_kind), lambda: Harness("cuda"),
                       ("device_name", "host_cpu", "torch_version", "cuda_runtime", "cudnn"),
                       f"calibrating the GPU predictors to {name}", progress, row_of, HARNESS_TIMEOUT_S)


def _read(path):
    return read_record(path, FORMAT, VERSION, "GPU calibration", "prenet calibrate --gpu", {"layers": list, "gpu": str})


class Calibration:
    """Per kind, the factor on the GPU predictors' device time (the median of measured over predicted over its
    timed reference layers), from a calibration record; `layers`: timed reference layers per kind; `host_costs`:
    the machine's own dispatch costs (prenet.host_cost), used for the host side of its steps."""

    def __init__(self, record):
        from . import launch_gap

        self.gpu, self.date = record["gpu"], record.get("date", "")
        # this machine's dispatch costs, measured by the calibration (None in a file without them)
        self.host_costs = record.get("host_costs")
        gaps = launch_gap.load()
        timed = {}
        for row in record["layers"]:
            if row.get("status") == "ok" and isinstance(row.get("forward_ms"), (int, float)) and row["forward_ms"] > 0:
                timed.setdefault(row["kind"], []).append(row)
        self.factors, self.layers = {}, {}
        for kind, rows in timed.items():
            predicted = _predicted_ms(kind, [row["native_config"] for row in rows], self.gpu)
            gap_ms = 1e-3 * launch_gap.gap_us(self.gpu, gaps, kind)
            # measured device time: the latency less the launch gap, never below half the latency
            ratios = [math.log(max(row["forward_ms"] - gap_ms, 0.5 * row["forward_ms"]) / p)
                      for row, p in zip(rows, predicted)]
            self.factors[kind], self.layers[kind] = math.exp(statistics.median(ratios)), len(ratios)

    def factor(self, kind):
        return self.factors.get(kind, 1.0)

    def describe(self):
        factors = ", ".join(f"{kind} x{f:.2f}" for kind, f in sorted(self.factors.items()))
        return (f"calibrated to this {self.gpu} by {sum(self.layers.values())} timed layers"
                f"{' (' + self.date + ')' if self.date else ''}: {factors}")


def from_file(path):
    """The Calibration in the file at `path`; ValueError naming the file where it is not one."""
    return Calibration(_read(path))


@functools.lru_cache(maxsize=8)
def _load_cached(path, modified, size):
    return from_file(path)


def load(gpu):
    """The Calibration of catalog GPU `gpu` from the user's cache, or None where there is none."""
    path = calibration_path(gpu)
    if not path.is_file():
        return None
    stat = path.stat()
    return _load_cached(str(path), stat.st_mtime_ns, stat.st_size)


class CalibratedGpuBundle:
    """A GPU bundle's interface whose times are scaled per layer kind by a Calibration (a layer's backward and
    optimizer step by its kind's factor too; an optimizer's update, add-shaped kernels, by the add kind's)."""

    def __init__(self, bundle, calibration):
        self._bundle, self.calibration = bundle, calibration

    def __getattr__(self, name):
        return getattr(self._bundle, name)

    @property
    def bundle(self):
        """The bundle calibrated (a sibling's, prenet.sibling_gpu, among them)."""
        return self._bundle

    def estimate(self, kind, configs, *args, **kwargs):
        factor = self.calibration.factor(kind)
        return [{key: value * factor if key.endswith("_ms") else value for key, value in t.items()}
                for t in self._bundle.estimate(kind, configs, *args, **kwargs)]

    def predict(self, kind, mode, configs, *args, **kwargs):
        return [ms * self.calibration.factor(kind) for ms in self._bundle.predict(kind, mode, configs, *args, **kwargs)]

    def update_ms(self, groups, *args, **kwargs):
        return [ms * self.calibration.factor("add") for ms in self._bundle.update_ms(groups, *args, **kwargs)]


# The 80% interval of a calibrated GPU's estimates, per kind: beside the GPU bundles' intervals.json.
INTERVALS_FILE = "calibrated_intervals.json"


def interval_factors_after_calibration(settings, set_name=None, per_kind=PER_KIND, draws=20, data=None,
                                       progress=False):
    """Leave one device out (prenet.unseen_gpu, candidate `set_name`, device time, rows of at least MIN_DEVICE_MS),
    each held-out GPU calibrated by `per_kind` of its rows drawn at random (`draws` times, the residuals of the
    other rows pooled): per kind the factors (low, high) of an 80% interval after calibration, at the narrowest
    quantile range whose coverage, fitted without a GPU, reaches 80% on that GPU on average (unseen_gpu's rule).
    Returns {"factors", "quantile_range", "held_out_coverage"}; `set_name` None: unseen_gpu.SERVED_SET; `progress`:
    a bar over the fits (one per kind, held-out GPU and candidate of settings.sets)."""
    import numpy as np

    from . import unseen_gpu
    from .datasets import load_neusight

    set_name = set_name or unseen_gpu.SERVED_SET
    data = data if data is not None else load_neusight(timing="device")
    rng = np.random.default_rng(settings.seed)
    out = {"factors": {}, "quantile_range": {}, "held_out_coverage": {}}
    kinds = settings.kinds or sorted(data)
    bar = unseen_gpu.fits_bar(data, kinds, settings, "Leave one device out, calibrated", progress)
    for kind in kinds:
        residuals = {}
        for held_out, _, test, name, predicted in unseen_gpu.held_out_predictions(kind, data[kind], settings):
            bar.update()
            if name != set_name:
                continue
            measured = test["forward_ms"].to_numpy(float)
            kept = measured >= MIN_DEVICE_MS
            log_ratio = np.log(measured[kept] / predicted[kept])
            pooled = []
            for _ in range(draws):
                order = rng.permutation(len(log_ratio))
                pooled.append(log_ratio[order[per_kind:]] - np.median(log_ratio[order[:per_kind]]))
            residuals[(held_out, set_name)] = np.concatenate(pooled)
        level, held_out = unseen_gpu.calibrated_level(residuals, set_name)
        tail = (1 - level) / 2
        everything = np.concatenate(list(residuals.values()))
        out["factors"][kind] = [float(np.exp(q)) for q in np.quantile(everything, [tail, 1 - tail])]
        out["quantile_range"][kind] = level
        out["held_out_coverage"][kind] = float(np.mean([covered for _, _, covered in held_out.values()]))
    bar.close()
    return out


@functools.lru_cache(maxsize=1)
def _interval_factors_after_calibration():
    from .predictors import PACKAGED_UNSEEN_BUNDLE

    path = PACKAGED_UNSEEN_BUNDLE / INTERVALS_FILE
    return json.loads(path.read_text())["factors"] if path.is_file() else {}


def interval_factors(factors, calibration):
    """`factors` (prenet.uncertainty.interval_factors: {kind: (low, high)}) with the kinds `calibration` timed
    given the narrower factors of a calibrated GPU (INTERVALS_FILE, from interval_factors_after_calibration)."""
    after = _interval_factors_after_calibration()
    return {**factors, **{kind: tuple(after[kind]) for kind in calibration.factors if kind in after}}


def main(argv=None):
    """Writes the calibrated GPUs' interval factors (INTERVALS_FILE) into the unseen-GPU bundle's folder."""
    import argparse
    import sys
    from dataclasses import asdict

    from .unseen_gpu import SERVED_SET, Settings

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--rows-per-gpu", type=int, default=1500)
    parser.add_argument("--trees", type=int, default=300)
    parser.add_argument("--out", default=f"data/predictors/gpu_unseen/{INTERVALS_FILE}",
                        help="where to write them (the repository's unseen-GPU bundle folder, packaged with prenet)")
    args = parser.parse_args(argv)
    settings = Settings(sets=(SERVED_SET,), trees=args.trees, rows_per_gpu=args.rows_per_gpu, timing="device")
    started = time.monotonic()
    outcome = interval_factors_after_calibration(settings, progress=True)
    write_json(args.out, {"coverage": 0.8, "feature_set": SERVED_SET, "per_kind": PER_KIND, **outcome,
                          "made_by": "python -m prenet.gpu_calibration " + " ".join(
                              argv if argv is not None else sys.argv[1:]),
                          "settings": asdict(settings), "seconds": round(time.monotonic() - started)}, indent=1)
    print(json.dumps(outcome, indent=1))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
