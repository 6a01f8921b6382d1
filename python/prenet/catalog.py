"""The hardware catalog (data/gpus.csv): GPU specifications from datasheets, looked up by any common name."""
import functools
import os
from pathlib import Path

from ._native import core

# The catalog shipped with the package; PRENET_GPU_CATALOG points to another file of the same format.
PACKAGED_CATALOG = Path(__file__).resolve().parent / "data" / "gpus.csv"


def catalog_path():
    return Path(os.environ.get("PRENET_GPU_CATALOG", PACKAGED_CATALOG))


@functools.lru_cache(maxsize=4)
def _load(path):
    if not Path(path).is_file():
        raise FileNotFoundError(f"GPU catalog not found at {path}; reinstall prenet or set PRENET_GPU_CATALOG")
    return core().GpuCatalog(str(path))


def native_catalog():
    """The loaded native catalog object (cached per path)."""
    return _load(str(catalog_path()))


def find_gpu(name):
    """Specifications of one GPU as a dict. Accepts names like "V100", "h100 sxm" or what
    `torch.cuda.get_device_name()` reports; raises ValueError naming the closest known GPUs."""
    if not isinstance(name, str):
        raise TypeError(f"gpu must be a string such as 'V100', got {type(name).__name__}")
    return native_catalog().find(name)


def gpus():
    """The whole catalog as a pandas DataFrame, one row per accelerator."""
    import pandas as pd

    frame = pd.DataFrame(native_catalog().rows())
    frame["aliases"] = frame["aliases"].map("; ".join)
    return frame
