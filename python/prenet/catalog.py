"""The hardware catalog: GPU specifications from datasheets (data/gpus.csv), looked up by any common name, and
the host CPUs our own layer data was measured on (data/hosts.csv, same columns)."""
import functools
import os
from pathlib import Path

from ._native import core

# The catalogs shipped with the package; PRENET_GPU_CATALOG points to another GPU file of the same format, and
# PRENET_HOST_CATALOG to another host file (one that adds the host of a second CPU data set, for fitting on it).
PACKAGED_CATALOG = Path(__file__).resolve().parent / "data" / "gpus.csv"
PACKAGED_HOSTS = Path(__file__).resolve().parent / "data" / "hosts.csv"


def catalog_path():
    return Path(os.environ.get("PRENET_GPU_CATALOG", PACKAGED_CATALOG))


def host_catalog_path():
    return Path(os.environ.get("PRENET_HOST_CATALOG", PACKAGED_HOSTS))


@functools.lru_cache(maxsize=4)
def _load(path, variable="PRENET_GPU_CATALOG"):
    if not Path(path).is_file():
        raise FileNotFoundError(f"hardware catalog not found at {path}; reinstall prenet or set {variable}")
    return core().GpuCatalog(str(path))


def native_catalog():
    """The loaded native GPU catalog object (cached per path)."""
    return _load(str(catalog_path()))


def host_catalog():
    """The native catalog of measured host CPUs."""
    return _load(str(host_catalog_path()), "PRENET_HOST_CATALOG")


def find_gpu(name):
    """Specifications of one GPU as a dict. Accepts names like "V100", "h100 sxm" or what
    `torch.cuda.get_device_name()` reports, and "cuda" or "cuda:N" for this machine's GPU (this_machines_gpu);
    raises ValueError naming the closest known GPUs."""
    if not isinstance(name, str):
        raise TypeError(f"gpu must be a string such as 'V100', got {type(name).__name__}")
    if name.lower() == "cuda" or name.lower().startswith("cuda:"):
        name = this_machines_gpu(name)
    return native_catalog().find(name)


def this_machines_gpu(device):
    """The name torch reports for this machine's CUDA GPU `device` ("cuda" or "cuda:N"), so that prenet.predict
    can take gpu="cuda" as prenet.measure takes device="cuda"; ValueError where there is none."""
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"gpu={device!r} names this machine's CUDA GPU, and it has none (torch.cuda.is_available() "
                         "is False); name a GPU of the catalog, such as 'V100' (prenet.gpus() lists them)")
    try:
        return torch.cuda.get_device_name(torch.device(device.lower()))
    except (RuntimeError, AssertionError, ValueError) as error:  # an index beyond this machine's GPUs
        raise ValueError(f"gpu={device!r}: {error}") from None


def device_catalog(name):
    """(native catalog, canonical name) of a GPU, or of a measured host CPU ("cpu")."""
    try:
        return native_catalog(), find_gpu(name)["name"]
    except ValueError as gpu_error:
        try:
            return host_catalog(), host_catalog().find(name)["name"]
        except ValueError:
            hosts = ", ".join(repr(row["name"]) for row in host_catalog().rows())
            raise ValueError(f"{gpu_error} (host CPUs: 'cpu' = {hosts})") from None


def unmeasured_host_warning(host):
    """None when this machine's CPU is the measured host `host` (a host catalog name: its last alias is the CPU as
    prenet.host_cost.cpu_model gives it, model name with CPUID family and model), else a sentence saying the
    estimate is for that host, not this CPU."""
    from .host_cost import cpu_model

    here = cpu_model()
    row = host_catalog().find(host)
    if here in row["aliases"] or here == row["name"]:
        return None
    return (f"this machine's CPU ({here}) is not the host the CPU predictors were measured on ({row['name']}, "
            f"'{row['aliases'][-1]}'): the estimate is that host's time, not this machine's")


def gpus():
    """The whole catalog as a pandas DataFrame, one row per accelerator."""
    import pandas as pd

    frame = pd.DataFrame(native_catalog().rows())
    frame["aliases"] = frame["aliases"].map("; ".join)
    return frame


# The catalog's figures a GPU must match or beat in every one to outclass another in a precision (outclasses).
OUTCLASS_FIGURES = ("fp32_tflops", "memory_bandwidth_gbs", "sm_count", "l2_cache_mb")


def outclasses(faster, slower, precision="fp32"):
    """Whether the catalog row `faster` (a mapping or a row of gpus()) outclasses `slower` in `precision`: the same
    vendor, at least as good in every one of OUTCLASS_FIGURES and in the precision's matrix rate (bf16's or fp16's,
    else TF32's, a GPU without TF32 counting its FP32 rate), and better in one. Such a GPU should never be estimated
    slower; bench/gpu_ranking.py counts where it is."""
    rate = {"bf16": "bf16_tflops", "fp16": "fp16_tflops"}.get(precision, "tf32_tflops")

    def figure(gpu, name):
        value = gpu[name]
        if value is None or value != value:  # missing (NaN): no TF32 rate runs fp32 on CUDA cores
            return gpu["fp32_tflops"] if name == "tf32_tflops" else float("-inf")
        return value

    names = OUTCLASS_FIGURES + (rate,)
    return (faster["vendor"] == slower["vendor"]
            and all(figure(faster, name) >= figure(slower, name) for name in names)
            and any(figure(faster, name) > figure(slower, name) for name in names))
