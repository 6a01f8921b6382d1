"""prenet: predict how long training a PyTorch model takes, per step, per epoch and in total, on any GPU.

Importing the package is cheap: torch, pandas and the native core load on first use.
"""
import warnings

# `python -m prenet.<module>` (host_cost, launch_gap, step_frame, gpu_calibration) runs a module that importing the
# package has already loaded, so runpy warns that it runs again as __main__; harmless here, as these modules do
# nothing on import but define.
warnings.filterwarnings("ignore", message=r"'prenet\.\w+' found in sys\.modules after import of package 'prenet'",
                        category=RuntimeWarning)
from ._version import __version__
from .catalog import find_gpu, gpus
from .compare import compare
from .estimate import predict
from .layers import layer_features, layer_kinds
from .linearisation_check import LinearisationWarning
from .measure import measure
from .memory import training_memory
from .model_features import model_features
from .predictors import UnsupportedPrecision, layer_time, predict_layer
from .training_steps import predict_steps
from .training_time import predict_training

__all__ = ["__version__", "LinearisationWarning", "UnsupportedPrecision", "compare", "find_gpu", "gpus",
           "layer_features", "layer_kinds", "layer_time", "measure", "model_features", "predict", "predict_layer",
           "predict_steps", "predict_training", "training_memory"]
