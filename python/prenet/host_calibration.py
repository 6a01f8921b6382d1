"""The CPU predictors calibrated to this machine, when its CPU is not the host they were measured on.

The CPU predictors learned one host (data/hosts.csv); another CPU can be several times faster or slower, and not by
one factor: on an AMD EPYC, against what predictors fitted on an Intel Xeon predicted for it, the smallest linear
layers ran 1.5 to 3 times slower and the largest about twice as fast, large attention layers three times as fast.
`calibrate()` times reference layers here with the same native harness and settings the CPU set was collected with
(`prenet collect`, one thread) and records them beside what the predictors say for the measured host; per layer
kind, the ratio of the two is taken as one of FITS, whichever predicts the kind's reference layers best left out one
at a time: none (the measured host's predictions kept), one factor, or a curve in log time through the medians of
runs of reference layers in order of predicted time (Curve), constant beyond its ends; kinds never timed take the
median ratio of all. The reference layers are drawn by the collection's sampler at indices the CPU set never used,
`PER_KIND` per kind among `CANDIDATES` predicted at most `MAX_TRAIN_MS`: half spread over the predicted time, half
over the arithmetic intensity. Spread over time alone, they were mostly thin products: the large dense ones a model
runs (a Transformer's 1,024 x 128 x 512) ran 4 to 8 times faster here than predicted, the reference layers at most 3
times, and the Transformer was over-predicted by 65%. With both spreads, leave-one-out over the reference layers
(the ratio of each predicted from the others of its kind; each selection on its own layers) has median error 16%,
90th percentile 65% in the forward pass, against 21% and 72% before (with the Theil-Sen lines calibrations were then
fitted with); a second input to the fitted ratio (the intensity, by ridge regression) did no better and is not used.

A calibration lives in the user's cache (`PRENET_CACHE`, else `$XDG_CACHE_HOME/prenet`, else `~/.cache/prenet`),
one file per CPU model; `calibrate()` writes it after every timed layer, so an interrupted run resumes where it
stopped. Predictions for "cpu" use it whenever this machine is not the measured host (prenet.predictors.resolve).
A calibration records the packaged CPU bundle it paired its measurements with; read beside another (a
refitted one), its reference layers are predicted again by that one, their measured times kept.
"""
import functools
import json
import math
import os
import re
import statistics
from pathlib import Path

from . import host_memory
from ._native import core
from .calibration_record import read_record, time_layers
from .layer_parts import STEP_PARTS, mode_ms

FORMAT = "prenet-host-calibration"
VERSION = 1
# Sample indices of the reference layers: far beyond the committed set's (0..1999), so never measured there.
FIRST_INDEX = 100_000
CANDIDATES = 400  # configurations drawn per harness kind
# Timed per native kind. 40 rather than 20: on this project's AMD EPYC, two calibrations of 40 against three of 20
# judged layers neither used (bench/calibration_heldout.py's) at 16.0-17.9% against 17.9-18.5% median error forward
# and 14.0-15.8% against 16.2-17.4% for the training step, and the CPU validation's ResNet-18 at batch 32 at
# +13-15% against +29-41% (bench/calibration_spread.py); a calibration takes about two minutes instead of one.
PER_KIND = 40
MAX_TRAIN_MS = 100.0  # the largest predicted training step of a reference layer (keeps a calibration near two minutes)
HARNESS_TIMEOUT_S = 60.0
INTENSITY_GPU = "V100"  # any catalog GPU: a layer's operations and bytes do not depend on it


def cache_folder():
    root = os.environ.get("PRENET_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prenet"


def calibration_path(cpu=None):
    """This machine's calibration file (or that of CPU model `cpu`)."""
    from .host_cost import cpu_model

    slug = re.sub(r"[^a-z0-9]+", "-", (cpu or cpu_model()).lower()).strip("-") or "unknown-cpu"
    return cache_folder() / f"host-{slug}.json"


def native_layer(kind, config):
    """(native kind, native configuration) of a harness configuration: an `activation` row is its op's kind, a
    linear layer is timed without a fused activation (as the CPU set's linear predictor learned it)."""
    from .sampling import _native_keys

    native = config["op"] if kind == "activation" else kind
    keys = _native_keys()[native]
    return native, {key: value for key, value in config.items() if key in keys}


def candidate_layers(first_index=None, count=None, profile="wide"):
    """{native kind: [(harness kind, harness configuration, native kind, native configuration, predicted {forward,
    train} ms on the measured host)]} of the sampler's configurations at `count` (default CANDIDATES) indices per
    harness kind of the sampling `profile` (5 times as many activations, one kind per op) from `first_index`
    (default FIRST_INDEX), in index order, those predicted at most MAX_TRAIN_MS a step."""
    from .sampling import PROFILES, sample_config

    first_index = FIRST_INDEX if first_index is None else first_index
    count = CANDIDATES if count is None else count
    by_kind = {}
    for kind in PROFILES[profile]:
        for index in range(first_index, first_index + count * (5 if kind == "activation" else 1)):
            config = sample_config(kind, index, profile=profile)
            if kind == "linear":
                config["activation"] = "none"
            native, native_config = native_layer(kind, config)
            predicted = predicted_on_measured_host(native, native_config, config["optimizer"])
            if predicted["train"] <= MAX_TRAIN_MS:
                by_kind.setdefault(native, []).append((kind, config, native, native_config, predicted))
    return by_kind


def predicted_on_measured_host(native, native_config, optimizer):
    """{"forward", "train"}: the milliseconds the packaged CPU bundle predicts for a layer on the measured host (the
    training step with its optimizer's update)."""
    bundle, catalog, host = _measured_host()
    t = bundle.estimate(native, [native_config], catalog, host, optimizer, "fp32", {})[0]
    return {mode: mode_ms(t, mode) for mode in ("forward", "train")}


@functools.lru_cache(maxsize=1)
def _measured_host():
    """(the packaged CPU bundle, the catalog of measured hosts, the measured host's name)."""
    from .catalog import host_catalog
    from .predictors import PACKAGED_HOST_BUNDLE, load_bundle

    catalog = host_catalog()
    return load_bundle(str(PACKAGED_HOST_BUNDLE)), catalog, catalog.rows()[0]["name"]


def bundle_stamp():
    """The packaged CPU bundle's creation time (its manifest's "created"): a calibration records the bundle whose
    predictions it paired its measurements with."""
    from .predictors import PACKAGED_HOST_BUNDLE

    return json.loads((PACKAGED_HOST_BUNDLE / "manifest.json").read_text())["created"]


# The CPU bundle every calibration made before calibrations recorded theirs was made with.
UNSTAMPED_BUNDLE = "2026-11-22T21:06:08+0000"


def with_current_predictions(record):
    """`record` with each reference layer's predicted times those of the packaged CPU bundle, re-predicted where
    the calibration was made with another (a refitted bundle predicts otherwise; the measured times stay valid)."""
    current = bundle_stamp()
    if record.get("bundle", UNSTAMPED_BUNDLE) == current:
        return record
    layers = []
    for row in record["layers"]:
        predicted = predicted_on_measured_host(row["kind"], row["native_config"], row["config"]["optimizer"])
        layers.append({**row, "predicted_forward_ms": predicted["forward"], "predicted_train_ms": predicted["train"]})
    return {**record, "layers": layers, "bundle": current}


def reference_layers():
    """[(harness kind, harness configuration, native kind, native configuration, predicted {forward, train} ms on
    the measured host)]: per native kind, up to PER_KIND of candidate_layers(), half evenly spaced in the order
    of their predicted step, half in the order of their arithmetic intensity (one that both pick counts once);
    ordered by predicted step."""
    by_kind = candidate_layers()
    chosen = []
    for candidates in by_kind.values():
        picked = set()
        # half spread over the predicted step, half over the arithmetic intensity (a library's efficiency differs
        # most between hosts on the large dense products, which few sampled configurations are)
        for key, count in ((lambda c: c[4]["train"], PER_KIND - PER_KIND // 2),
                           (lambda c: intensity(c[2], c[3]), PER_KIND // 2)):
            ordered = sorted(range(len(candidates)), key=lambda i: key(candidates[i]))
            picked |= {ordered[round(i * (len(ordered) - 1) / max(1, count - 1))] for i in range(count)}
        chosen += [candidates[i] for i in sorted(picked, key=lambda i: candidates[i][4]["train"])]
    return chosen


@functools.lru_cache(maxsize=None)
def _intensity(kind, config):
    from .catalog import native_catalog

    features = core().layer_features(kind, dict(config), native_catalog(), INTENSITY_GPU)
    return features["forward_flops"] / max(features["forward_bytes"], 1.0)


def intensity(kind, config):
    """A layer's forward floating-point operations per byte moved (the same on every device in fp32)."""
    return _intensity(kind, tuple(sorted(config.items())))


def measured_host_notice():
    """None on a CPU other than the measured host; there, a sentence saying that its predictions come from
    predictors fitted on it and use no calibration (one made anyway shows how far today's speed is from the data's)."""
    from .catalog import unmeasured_host_warning

    _, _, host = _measured_host()
    if unmeasured_host_warning(host):
        return None
    return (f"this CPU is the measured host ({host}): predictions for 'cpu' come from predictors fitted on its own "
            "layer data and use no calibration; one made anyway shows how far today's speed is from the data's")


def calibrate(path=None, progress=True):
    """Times the reference layers on this machine (resuming a calibration left unfinished) with the native
    harness, measures the host costs (prenet.host_cost), and writes the calibration; returns its path."""
    from . import host_cost
    from .collect import Harness

    path = Path(path) if path else calibration_path()
    record = _read(path) if path.is_file() else None
    if record is None or record["host_cpu"] != host_cost.cpu_model():
        record = {"format": FORMAT, "version": VERSION, "host_cpu": host_cost.cpu_model(), "layers": [],
                  "bundle": bundle_stamp()}
    record = with_current_predictions(record)  # a resumed calibration's layers as the packaged bundle predicts

    def row_of(layer, result):
        kind, config, native, native_config, predicted = layer
        return {"harness_kind": kind, "config": config, "kind": native, "native_config": native_config,
                "predicted_forward_ms": predicted["forward"], "predicted_train_ms": predicted["train"],
                "status": result["status"], "error": result.get("error", ""),
                "forward_ms": result.get("forward_ms"), "train_ms": result.get("train_step_ms")}

    return time_layers(path, record, reference_layers(), lambda: Harness("cpu", threads=1),
                       ("host_cpu", "threads", "blas", "torch_version"), "calibrating the CPU predictors", progress,
                       row_of, HARNESS_TIMEOUT_S, unit="config")


def _read(path):
    return read_record(path, FORMAT, VERSION, "host calibration", "prenet calibrate", {"layers": list})


# Reference layers per run of a Curve. Most of an elementwise kind's reference layers are tiny (the sampler draws
# few large ones): a Theil-Sen line through all of them, as calibrations were fitted before 2026-11-26's evening,
# carried the slope the tiny ones set to the kind's largest, where it put a ReLU predicted at 10 ms at 27.5 times
# that (the harness times the largest ReLUs at 2-4 times their predictions). Ad hoc, on this project's Intel Xeon of
# CPUID model 167: two calibrations, each judged on layers timed near it (228 drawn as the reference ones are, and 35
# elementwise ones of 0.1-8 million elements, bench/calibration_heldout.py's), median / 90th percentile error. The
# large ones' forward pass: 15.1% / 39.8% and 14.5% / 37.0% with runs of 8, against 23.8% / 113.2% and 17.9% / 124.7%
# for the line; their training step: 19.6% / 39.9% and 16.1% / 34.5% against 19.3% / 129.3% and 17.0% / 51.8%. The
# drawn ones: medians 0.3-1.2 points lower, 90th percentiles 1.2-2.3 points lower but one, 3.1 higher. In a first
# version of the comparison, runs of 5 and of 13, and the line held constant beyond the middle 60-90% of its points,
# each fell behind runs of 8 by 5 points or more on at least one of these figures.
PER_RUN = 8


class Curve:
    """log(time here / time predicted) against log predicted time, from (x, y) points: the median x and median y
    of each run of about PER_RUN points in order of x, joined by straight lines, constant beyond the first and last
    runs' medians."""

    def __init__(self, points):
        ordered = sorted(points)
        runs = max(1, round(len(ordered) / PER_RUN))
        edges = [round(i * len(ordered) / runs) for i in range(runs + 1)]
        chunks = [ordered[a:b] for a, b in zip(edges, edges[1:])]
        self.xs = [statistics.median(x for x, _ in chunk) for chunk in chunks]
        self.ys = [statistics.median(y for _, y in chunk) for chunk in chunks]

    def factor(self, predicted_ms):
        x = math.log(max(predicted_ms, 1e-9))
        if x <= self.xs[0]:
            return math.exp(self.ys[0])
        for (x0, y0), (x1, y1) in zip(zip(self.xs, self.ys), zip(self.xs[1:], self.ys[1:])):
            if x <= x1:
                return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1)
        return math.exp(self.ys[-1])


class Constant:
    """A factor that does not follow the predicted time: `ratio` (1: the measured host's prediction kept)."""

    def __init__(self, ratio=1.0):
        self.ratio = ratio

    def factor(self, predicted_ms):
        return self.ratio


# The fits a kind's ratios may take, simplest first: none (predictions kept as the measured host's), one factor
# (the median ratio), or a Curve. Each kind and group, per part, takes the one whose leave-one-out errors over its
# reference layers have the least median plus 90th percentile (the two figures whole-model targets judge; the
# simpler on a tie). The ratio between two CPUs follows the predicted time for elementwise kinds, but for
# convolutions it follows the algorithm each configuration gets, which no fit of time carries from one configuration
# to the next. Ad hoc, on this project's Intel Xeon of CPUID model 167 against the AMD EPYC's predictors (one
# calibration; bench/calibration_heldout.py's layers and 120 more convolutions of the "models" profile), median /
# 90th percentile error of the training step: on 180 convolutions as models build them 13.2% / 39.0% chosen so,
# 19.1% / 47.1% with a curve for every kind; on 228 layers drawn as the reference ones are 11.5% / 35.0% against
# 10.5% / 35.8%. Chosen by the median alone, the drawn layers predicted at 0.5 ms or more had 14.4% / 40.0% in the
# forward pass, against 11.1% / 39.2% so and 11.3% / 38.3% with curves.
FITS = {"none": lambda points: Constant(),
        "one factor": lambda points: Constant(math.exp(statistics.median(y for _, y in points))),
        "curve": Curve}


def leave_one_out_error(fit, points):
    """The median plus the 90th percentile of the relative errors of each point's time here, predicted by `fit`
    (FITS) of the other points."""
    import numpy as np

    errors = [abs(FITS[fit](points[:i] + points[i + 1:]).factor(math.exp(x)) / math.exp(y) - 1.0)
              for i, (x, y) in enumerate(points)]
    return float(np.median(errors) + np.quantile(errors, 0.9))


def chosen_fit(points):
    """The name of the FITS with the least leave_one_out_error over `points` ("one factor" for a single point)."""
    if len(points) < 2:
        return "one factor"
    errors = {name: leave_one_out_error(name, points) for name in FITS}
    return min(errors, key=errors.get)


# Layers of one kind that libraries run by different algorithms, whose ratio between two hosts differs: calibrated
# apart where the reference layers hold at least MIN_GROUP of the group. A 1x1 convolution is a matrix product (a
# GEMM); larger kernels take im2col, direct or Winograd algorithms. On this project's AMD EPYC against the measured
# Intel host, 1x1 convolutions ran 0.3-0.5 times their predicted time, larger kernels 0.6-2.5 times; one line for
# both had leave-one-out median error 38% (forward) on the convolution reference layers, a line for each 27% (the
# Theil-Sen lines calibrations were then fitted with).
KIND_GROUPS = {"conv2d": lambda config: "1x1" if config.get("kernel_size") == 1 else "larger kernels"}
MIN_GROUP = 4


# A kind with no predictor of its own, timed by another kind's predictor on its kernels (the general convolution:
# the linear one's, on its implicit GEMM), is calibrated by that kind's fit.
CALIBRATED_AS = {"convolution": "linear"}


def calibration_group(kind, config):
    """The group `kind` with `config` is calibrated in: "conv2d 1x1", the kind whose kernels it runs, or the kind
    itself."""
    group = KIND_GROUPS.get(kind)
    return f"{kind} {group(config)}" if group else CALIBRATED_AS.get(kind, kind)


class Calibration:
    """Per native kind (and group of a kind, KIND_GROUPS), a fit of the ratio of time here to predicted time for
    the forward pass and one for the training step, each chosen among FITS by leave-one-out over its reference
    layers (`chosen`; every fit in `fits`); `host_costs`: this machine's (prenet.host_cost)."""

    def __init__(self, record, path):
        self.path, self.host_cpu, self.date = path, record["host_cpu"], record.get("date", "")
        ok = [row for row in record["layers"] if row["status"] == "ok" and row["forward_ms"] and row["train_ms"]]
        if not ok or "host_costs" not in record:
            raise ValueError(f"{path} holds an unfinished calibration; run `prenet calibrate` to complete it")
        self.layers = len(ok)
        from .host_cost import checked

        self.host_costs = checked(record["host_costs"], f"the calibration {path}")
        self.fits, self.points, self.chosen, self.untimed = {}, {}, {}, {}
        for part, measured, predicted in (("forward", "forward_ms", "predicted_forward_ms"),
                                          ("train", "train_ms", "predicted_train_ms")):
            points, grouped = {}, {}
            for row in ok:
                point = (math.log(row[predicted]), math.log(row[measured] / row[predicted]))
                points.setdefault(row["kind"], []).append(point)
                grouped.setdefault(calibration_group(row["kind"], row["native_config"]), []).append(point)
            self.points[part] = {**points, **{group: p for group, p in grouped.items()
                                              if group not in points and len(p) >= MIN_GROUP}}
            self.chosen[part], self.fits[part] = {}, {}
            for key, p in self.points[part].items():
                self.chosen[part][key] = chosen_fit(p)
                self.fits[part][key] = {name: fit(p) for name, fit in FITS.items()}
            every = [y for p in points.values() for _, y in p]
            self.untimed[part] = Constant(math.exp(statistics.median(every)))  # kinds never timed

    def factor(self, part, kind, predicted_ms, config=None, fit=None):
        """Time here over the predicted `predicted_ms` of a `part` ("forward" or "train") of a `kind` layer
        (with `config`: its group's where calibrated apart), by its chosen fit or the FITS named `fit`."""
        fits = self.fits[part]
        group = calibration_group(kind, config) if config is not None else CALIBRATED_AS.get(kind, kind)
        key = group if group in fits else kind if kind in fits else None
        if key is None:
            return self.untimed[part].factor(predicted_ms)
        return fits[key][fit or self.chosen[part][key]].factor(predicted_ms)

    def describe(self):
        note = host_memory.costly_pages_note(self.host_costs.get("first_touch_us_per_page"))
        return f"calibrated to this CPU ({self.host_cpu}, {self.layers} reference layers, {self.date}){note}"

    def plot(self, part="forward", columns=5):
        """A matplotlib Figure: per kind (and group), the reference layers' time here over the predicted time
        against the predicted time (log axes), with the chosen fit (named in the panel's title); `part` "forward" or
        "train"."""
        import matplotlib.pyplot as plt

        keys = sorted(self.points[part])
        rows = math.ceil(len(keys) / columns)
        figure, axes = plt.subplots(rows, columns, figsize=(3 * columns, 2.4 * rows), squeeze=False,
                                    sharey=True)
        for ax, key in zip(axes.flat, keys):
            xs, ys = zip(*self.points[part][key])
            ax.scatter([math.exp(x) for x in xs], [math.exp(y) for y in ys], s=10)
            chosen = self.chosen[part][key]
            fit = self.fits[part][key][chosen]
            grid = [math.exp(min(xs) + (max(xs) - min(xs)) * i / 20) for i in range(21)]
            ax.plot(grid, [fit.factor(ms) for ms in grid], color="C1")
            ax.axhline(1.0, color="grey", linewidth=0.5)
            ax.set(xscale="log", yscale="log", title=f"{key}: {chosen}")
        for ax in list(axes.flat)[len(keys):]:
            ax.set_visible(False)
        figure.supxlabel(f"predicted {part} ms on the measured host")
        figure.supylabel("time here / predicted")
        figure.suptitle(self.describe())
        figure.tight_layout()
        return figure


@functools.lru_cache(maxsize=4)
def _load_cached(path, modified, size):
    return Calibration(with_current_predictions(_read(path)), path)


def load(path=None):
    """This machine's Calibration (or that in the file `path`), or None where none was made."""
    path = Path(path) if path else calibration_path()
    if not path.is_file():
        return None
    stat = path.stat()
    return _load_cached(str(path), stat.st_mtime_ns, stat.st_size)


class CalibratedBundle:
    """A native predictor bundle whose estimates are scaled to this machine by a Calibration: each layer's forward
    by its kind's forward curve, the parts of its training step (its forward within the step, backward and optimizer
    step) by the training-step curve (at the layer's predicted step), an optimizer's update (add-shaped kernels) by
    the add kind's forward curve."""

    def __init__(self, bundle, calibration):
        self._bundle, self.calibration = bundle, calibration

    def __getattr__(self, name):
        return getattr(self._bundle, name)

    def estimate(self, kind, configs, *args):
        times = self._bundle.estimate(kind, configs, *args)
        scaled = []
        for t, config in zip(times, configs):
            rest = self.calibration.factor("train", kind, mode_ms(t, "train"), config)
            forward = self.calibration.factor("forward", kind, t["forward_ms"], config)
            scaled.append({**t, "forward_ms": t["forward_ms"] * forward,
                           **{part: t[part] * rest for part in STEP_PARTS}})
        return scaled

    def predict(self, kind, mode, configs, *args):
        part = "forward" if mode == "forward" else "train"
        return [ms * self.calibration.factor(part, kind, ms, config)
                for ms, config in zip(self._bundle.predict(kind, mode, configs, *args), configs)]

    def update_ms(self, groups, *args):
        return [ms * self.calibration.factor("forward", "add", ms) for ms in self._bundle.update_ms(groups, *args)]
