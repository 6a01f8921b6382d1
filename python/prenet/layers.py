"""Features of single layers, computed by the native core from the table of layer kinds."""
import numbers

from ._native import core
from .catalog import device_catalog


def layer_kinds():
    """The table of layer kinds: name, the paper's name, description, parameters and feature names."""
    return core().layer_kinds()


def _as_int(kind, key, value):
    """PyTorch-style values: ints, bools, and square tuples such as kernel_size=(3, 3)."""
    if isinstance(value, (tuple, list)):
        if len(value) == 0 or any(v != value[0] for v in value):
            raise ValueError(f"{kind}: {key}={tuple(value)!r} is not square; only equal sizes per side are supported")
        value = value[0]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    raise TypeError(f"{kind}: {key} must be an integer, got {value!r} ({type(value).__name__})")


def layer_features(kind, gpu="V100", **config):
    """Feature dict of one layer on one GPU.

    >>> layer_features("conv2d", gpu="V100", batch=32, in_channels=64, out_channels=128,
    ...                kernel_size=3, stride=1, padding=1, height=56, width=56)["co"]
    7398752256.0
    """
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string such as 'conv2d', got {type(kind).__name__}")
    catalog, name = device_catalog(gpu)  # "cpu": the measured host's figures; an unknown name: the closest GPUs
    values = {key: _as_int(kind, key, value) for key, value in config.items()}
    return core().layer_features(kind, values, catalog, name)
