"""How sure a GPU estimate is: how far the GPU lies from the devices the predictors were fitted on, and an 80%
interval whose factors per layer kind come from the leave-one-device-out evaluation (prenet.unseen_gpu):
quantiles of measured / predicted over all held-out devices, over the narrowest range whose interval covers 80%
of a left-out device's cases on average, stored beside the bundle as intervals.json."""
import functools
import json
import math
from pathlib import Path

from ._native import core
from .catalog import find_gpu, native_catalog

# Specifications the distance is measured in (log scale: ratios, not differences, matter): the native core's.
DISTANCE_SPECS = tuple(core().distance_specs)


@functools.lru_cache(maxsize=8)
def fitted_devices(bundle_folder):
    """Catalog names of the devices the bundle in `bundle_folder` was fitted on (empty without a manifest)."""
    manifest = Path(bundle_folder) / "manifest.json"
    if not manifest.is_file():
        return ()
    return tuple(json.loads(manifest.read_text()).get("fitted_on", {}).get("devices", []))


def extrapolation(gpu, fitted):
    """{"nearest": fitted GPU closest in DISTANCE_SPECS, "distance": root-mean-square log ratio of the specs to
    it (0: a fitted device; 0.69: every spec off by a factor 2), "outside": specs beyond every fitted device's},
    and "other_vendor": the GPU's vendor where no fitted device is of it (an AMD GPU against NVIDIA's: another
    software stack, which no distance in specifications measures)."""
    spec = find_gpu(gpu)
    others = [find_gpu(name) for name in fitted]
    if not others:
        return {"nearest": None, "distance": math.inf, "outside": list(DISTANCE_SPECS)}

    catalog = native_catalog()
    nearest = catalog.nearest(spec["name"], [other["name"] for other in others])
    outside = [k for k in DISTANCE_SPECS
               if spec[k] > max(o[k] for o in others) or spec[k] < min(o[k] for o in others)]
    reach = {"nearest": nearest, "distance": catalog.spec_distance(spec["name"], nearest), "outside": outside}
    if spec["vendor"] not in {o["vendor"] for o in others}:
        reach["other_vendor"] = spec["vendor"]
    return reach


@functools.lru_cache(maxsize=8)
def interval_factors(bundle_folder):
    """{kind: (low, high)} factors on a predicted time, with "*" for kinds not evaluated (the widest); None when
    the bundle has no intervals.json. Read once per folder (cached: do not modify the result)."""
    path = Path(bundle_folder) / "intervals.json"
    if not path.is_file():
        return None
    factors = {kind: tuple(pair) for kind, pair in json.loads(path.read_text())["factors"].items()}
    factors["*"] = (min(low for low, _ in factors.values()), max(high for _, high in factors.values()))
    return factors


def kind_factors(kinds, factors, side):
    """Per op, the low (side 0) or high (1) factor of its kind ("*" for kinds not evaluated, 1 for ops without a
    kind, which cost nothing on the device); errors of one device are taken as moving together."""
    import numpy as np

    return np.array([1.0 if kind is None else factors.get(kind, factors["*"])[side] for kind in kinds])
