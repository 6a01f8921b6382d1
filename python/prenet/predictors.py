"""Per-layer time predictions from the native predictor bundles (data/predictors/, fitted by prenet.fit):
`gpu/` for GPUs (forward pass measured, backward and optimizer composed from kernels of known shapes), `cpu/` for
the host CPU our own data was measured on (every mode measured)."""
import functools
import json
import os
from pathlib import Path

from ._native import core
from . import gpu_calibration, host_calibration
from .catalog import device_catalog, find_gpu, host_catalog, unmeasured_host_warning
from .layer_parts import mode_ms
from .layers import _as_int
from .sibling_gpu import SiblingBundle, fitted_sibling
from .uncertainty import extrapolation, fitted_devices

# Bundles shipped with the package: `gpu/` for the GPUs it was fitted on and their twins (chosen on validation,
# device figures and identity among its inputs; measured_twin), `gpu_unseen/` for every other GPU (chosen by
# leave-one-device-out evaluation: the device enters through its roofline only; results/unseen_gpu_full.md), `cpu/`
# for the measured host CPU.
# PRENET_PREDICTORS points to another GPU bundle folder, used for every GPU.
PACKAGED_BUNDLE = Path(__file__).resolve().parent / "data" / "predictors" / "gpu"
PACKAGED_UNSEEN_BUNDLE = Path(__file__).resolve().parent / "data" / "predictors" / "gpu_unseen"
PACKAGED_HOST_BUNDLE = Path(__file__).resolve().parent / "data" / "predictors" / "cpu"
MODES = ("forward", "train")


@functools.lru_cache(maxsize=8)
def load_bundle(folder=None):
    """The native bundle in `folder` (default: PRENET_PREDICTORS or the packaged GPU one); cached in the process,
    and its tree models through binary copies in tree_cache_folder() (the first load of a bundle on a machine reads
    its JSON; later processes load several times faster)."""
    folder = gpu_bundle_folder(folder)
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"no predictor bundle at {folder} (manifest.json missing); fit one with "
                                "`python -m prenet.fit` or set PRENET_PREDICTORS")
    return core().PredictorBundle(str(folder), str(tree_cache_folder() or ""))


def tree_cache_folder():
    """Where binary copies of the bundles' tree models are kept (prenet/regressors/tree_cache.hpp): `trees/` in
    prenet's cache folder (PRENET_CACHE, else $XDG_CACHE_HOME/prenet, else ~/.cache/prenet); about 24 MB for the two
    GPU bundles and 40 MB for the CPU one, each made on first use and remade when its bundle changes; safe to delete.
    None (no copies) where PRENET_NO_TREE_CACHE is set."""
    if os.environ.get("PRENET_NO_TREE_CACHE"):
        return None
    return host_calibration.cache_folder() / "trees"


def gpu_bundle_folder(bundle=None, gpu=None):
    """The GPU bundle's folder: `bundle`, else PRENET_PREDICTORS, else the packaged one for `gpu`: `gpu/` when it
    is one of the devices that bundle was fitted on (or no GPU is named), `gpu_unseen/` otherwise."""
    chosen = bundle or os.environ.get("PRENET_PREDICTORS")
    if chosen:
        return Path(chosen)
    if gpu is None or gpu in fitted_devices(PACKAGED_BUNDLE):
        return PACKAGED_BUNDLE
    return PACKAGED_UNSEEN_BUNDLE


@functools.lru_cache(maxsize=8)
def learned_timing(folder):
    """What the GPU bundle in `folder` predicts: "latency" (as measured, with the measuring host's launch gap; the
    default of bundles that do not say) or "device" (fitted on latency less that gap: prenet.fit --data
    neusight_device)."""
    manifest = Path(folder) / "manifest.json"
    if not manifest.is_file():
        return "latency"
    return json.loads(manifest.read_text()).get("fitted_on", {}).get("timing", "latency")


# The catalog's specifications a kernel's time depends on. A GPU that matches a fitted device in all of them (it
# differs in memory size or name only, as the V100 PCIe of 16 GB from the one of 32 GB that NeuSight measured) is
# timed as that device, by the bundle fitted on it (bench/measured_twin.py: the two bundles on such a twin).
TIMING_SPECS = ("architecture", "sm_count", "cuda_cores", "boost_clock_mhz", "fp32_tflops", "tf32_tflops",
                "fp16_tflops", "bf16_tflops", "memory_type", "memory_bandwidth_gbs", "l2_cache_mb")


def measured_twin(gpu, bundle=None):
    """The device fitted in the GPU bundle (`bundle`, else PRENET_PREDICTORS's or the packaged seen-GPU one) that
    the GPU `gpu` (a canonical catalog name) is, or matches in every TIMING_SPECS; None where there is none."""
    return _measured_twin(gpu, str(gpu_bundle_folder(bundle)))


@functools.lru_cache(maxsize=None)
def _measured_twin(gpu, folder):
    fitted = fitted_devices(folder)
    if gpu in fitted:
        return gpu
    spec = find_gpu(gpu)
    return next((name for name in sorted(fitted)
                 if all(find_gpu(name)[key] == spec[key] for key in TIMING_SPECS)), None)


def served_as(gpu):
    """How the GPU predictors (PRENET_PREDICTORS's, else the packaged ones) serve a catalog GPU (canonical name):
    "measured" (fitted on it), "as <name>" (its fitted twin, measured_twin), "through <name>" (its fitted sibling,
    prenet.sibling_gpu), or "unseen, distance <d>" (beyond the fitted devices, by d from the nearest,
    prenet.uncertainty.extrapolation); ", calibrated" where a calibration of it is in the user's cache
    (prenet.gpu_calibration)."""
    return _served_as(gpu) + (", calibrated" if gpu_bundle_folder() == PACKAGED_BUNDLE and
                              gpu_calibration.calibration_path(gpu).is_file() else "")


def _served_as(gpu):
    twin = measured_twin(gpu)
    if twin == gpu:
        return "measured"
    if twin:
        return f"as {twin}"
    if gpu_bundle_folder() == PACKAGED_BUNDLE and (sibling := fitted_sibling(gpu, fitted_devices(PACKAGED_BUNDLE))):
        return f"through {sibling}"
    return f"unseen, distance {extrapolation(gpu, fitted_devices(gpu_bundle_folder()))['distance']:.2f}"


def resolve(gpu, bundle=None, calibrated=True):
    """(bundle, native catalog, name of the device it times) for a GPU name or "cpu". A GPU is timed as itself, or
    as its fitted twin where it has one (measured_twin), or through its fitted sibling (prenet.sibling_gpu); by the
    packaged bundles calibrated to it where a calibration of it is in the user's cache (prenet.gpu_calibration).
    For "cpu" on a machine other than the measured host, the packaged bundle calibrated to this machine where a
    calibration was made (prenet.host_calibration). `calibrated`: False for the bundles as packaged."""
    catalog, name = device_catalog(gpu)
    if bundle is None and catalog is host_catalog():
        calibration = this_host_calibration(name) if calibrated else None
        native = load_bundle(str(PACKAGED_HOST_BUNDLE))
        return (host_calibration.CalibratedBundle(native, calibration) if calibration else native), catalog, name
    chosen = gpu_bundle_folder(bundle)
    if chosen != PACKAGED_BUNDLE:  # the caller's (or PRENET_PREDICTORS's), loaded first: a corrupt one fails there
        native = load_bundle(str(chosen))
        return native, catalog, measured_twin(name, chosen) or name
    timed = measured_twin(name) or name
    fitted = fitted_devices(PACKAGED_BUNDLE)
    if timed not in fitted and (sibling := fitted_sibling(name, fitted)):
        native, timed = sibling_bundle(sibling), name
    else:
        native = load_bundle(str(gpu_bundle_folder(None, timed)))
    calibration = gpu_calibration.load(name) if calibrated else None
    return (gpu_calibration.CalibratedGpuBundle(native, calibration) if calibration else native), catalog, timed


@functools.lru_cache(maxsize=None)
def sibling_bundle(sibling):
    """The packaged bundles serving a GPU through its fitted `sibling` (prenet.sibling_gpu)."""
    from . import launch_gap

    gaps = launch_gap.load()

    def launch_gaps(device):
        return launch_gap.kind_gaps_ms(device, gaps), 1e-3 * launch_gap.gap_us(device, gaps)

    folders = (PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE)
    return SiblingBundle(*(load_bundle(str(folder)) for folder in folders), sibling, launch_gaps,
                         [learned_timing(str(folder)) == "latency" for folder in folders])


def this_host_calibration(host):
    """This machine's host_calibration.Calibration where it is not the measured `host` and one was made, else
    None."""
    return host_calibration.load() if unmeasured_host_warning(host) else None


# "fp32": PyTorch's defaults (cuDNN convolutions on TF32 tensor cores where the GPU has them, matmuls in full
# fp32); "fp32_strict": TF32 off everywhere (torch.backends.cudnn.allow_tf32 = False); "tf32": TF32 for matmuls
# too (torch.backends.cuda.matmul.allow_tf32 = True, as torch.set_float32_matmul_precision("high") sets it);
# "bf16", "fp16": automatic mixed precision (torch.autocast around forward and loss; prenet.autocast_policy decides
# each op's dtype).
PRECISIONS = ("fp32", "fp32_strict", "tf32", "bf16", "fp16")
MIXED_PRECISIONS = ("bf16", "fp16")
# Precisions that name GPU arithmetic (tensor cores, autocast's CUDA rules), not predicted for the host CPU.
GPU_PRECISIONS = ("tf32",) + MIXED_PRECISIONS


# Names of torch's floating-point types (and their short forms) for the precision that trains in that type.
PRECISION_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}


def _is_dtype(value):
    return type(value).__name__ == "dtype" and type(value).__module__ == "torch"


class UnsupportedPrecision(ValueError):
    """The GPU has no rate for the precision's type in the catalog (it does not support it)."""


def check_precision(precision, gpu=None):
    """The precision's name as PRECISIONS spell it (in any case: "BF16" is "bf16", as optimizer names are taken; a
    torch floating-point type or its name, PRECISION_ALIASES, as training in that type: torch.bfloat16 is "bf16");
    rejects an unknown precision by name, a mixed one on the host CPU (its predictors were measured in fp32 and CPU
    autocast follows other rules), and one the GPU has no rate for (UnsupportedPrecision, naming the GPU and what to
    use instead)."""
    named = precision
    if isinstance(precision, str) or _is_dtype(precision):  # torch.bfloat16, or its name, is bf16
        named = str(precision).lower().removeprefix("torch.")
        named = PRECISION_ALIASES.get(named, named)
    if named not in PRECISIONS:
        hint = ("; automatic mixed precision is 'bf16' or 'fp16' (autocast to that type)"
                if named in ("amp", "mixed", "autocast") else "")
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}{hint}")
    precision = named
    if gpu is None:
        return precision
    catalog, name = device_catalog(gpu)
    if precision in GPU_PRECISIONS and catalog is host_catalog():
        raise ValueError(f"precision {precision!r} is predicted for GPUs only (the host CPU's predictors were "
                         "measured in fp32); use fp32 or fp32_strict for the CPU")
    try:
        core().matrix_tflops("linear", catalog, name, precision)
    except ValueError as error:
        raise UnsupportedPrecision(str(error)) from None
    return precision


def _configs(kind, config):
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string such as 'conv2d', got {type(kind).__name__}")
    return [{key: _as_int(kind, key, value) for key, value in config.items()}]


def layer_time(kind, gpu="V100", optimizer="sgd", precision="fp32", bundle=None, **config):
    """Milliseconds of one layer's training step by part: `step_forward_ms` (the forward pass inside the step,
    autograd recording for the backward), `backward_ms`, `optimizer_ms`, and `forward_ms` (the forward pass alone),
    each with its basis ("predicted" by a fitted predictor, composed of "kernels", a "roofline" bound, or "exact"
    zero)."""
    precision = check_precision(precision, gpu)
    native, catalog, name = resolve(gpu, bundle)
    return native.estimate(kind, _configs(kind, config), catalog, name, optimizer, precision)[0]


def predict_layer(kind, gpu="V100", mode="forward", optimizer="sgd", precision="fp32", bundle=None, **config):
    """Predicted milliseconds of one layer: `mode` "forward" or "train" (forward, backward, optimizer step), with
    the kinds and keys of prenet.layer_features; `gpu` a catalog name or "cpu". A bundle with a predictor of the
    whole step serves "train" directly; otherwise the step's parts of layer_time are summed. `precision`: "fp32"
    (PyTorch's defaults), "fp32_strict" (no TF32), "tf32" (matmuls on TF32 tensor cores too, GPUs only), "bf16" or
    "fp16" (the layer on 2-byte tensors, GPUs only). `optimizer` (mode "train"): the layer data's names, "sgd"
    being plain SGD, as the training steps were timed, and "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad"
    (prenet.predict's "sgd" is SGD with momentum 0.9, the protocol's: "sgd_momentum" here). Unknown kinds, keys,
    devices, modes, optimizers or precisions raise ValueError."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    precision = check_precision(precision, gpu)
    native, catalog, name = resolve(gpu, bundle)
    configs = _configs(kind, config)
    if mode == "train" and native.has(kind, "train"):
        return native.predict(kind, "train", configs, catalog, name, optimizer)[0]
    return mode_ms(native.estimate(kind, configs, catalog, name, optimizer, precision)[0], mode)
