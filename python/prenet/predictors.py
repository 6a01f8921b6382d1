"""Per-layer time predictions from the native predictor bundle (data/predictors/, fitted by prenet.training)."""
import functools
import os
from pathlib import Path

from ._native import core
from .catalog import find_gpu, native_catalog
from .layers import _as_int

# The bundle shipped with the package; PRENET_PREDICTORS points to another bundle folder.
PACKAGED_BUNDLE = Path(__file__).resolve().parent / "data" / "predictors" / "gpu"
MODES = ("forward", "train")


@functools.lru_cache(maxsize=4)
def load_bundle(folder=None):
    """The native bundle in `folder` (default: PRENET_PREDICTORS or the packaged one); cached."""
    folder = Path(folder or os.environ.get("PRENET_PREDICTORS", PACKAGED_BUNDLE))
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"no predictor bundle at {folder} (manifest.json missing); fit one with "
                                "`python -m prenet.fit` or set PRENET_PREDICTORS")
    return core().PredictorBundle(str(folder))


def predict_layer(kind, gpu="V100", mode="forward", optimizer="sgd", bundle=None, **config):
    """Predicted milliseconds of one layer: `mode` "forward" or "train" (forward, backward, optimizer step),
    with the kinds and keys of prenet.layer_features. Unknown kinds, keys, GPUs or modes raise ValueError."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    find_gpu(gpu)
    values = {key: _as_int(kind, key, value) for key, value in config.items()}
    return load_bundle(bundle).predict(kind, mode, [values], native_catalog(), gpu, optimizer)[0]
