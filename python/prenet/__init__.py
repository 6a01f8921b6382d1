"""prenet: predict how long training a PyTorch model takes, per step, per epoch and in total, on any GPU.

Importing the package is cheap: torch, pandas and the native core load on first use.
"""
from ._version import __version__
from .catalog import find_gpu, gpus
from .compare import compare
from .estimate import predict
from .layers import layer_features, layer_kinds
from .measure import measure
from .memory import training_memory
from .model_features import model_features
from .predictors import UnsupportedPrecision, layer_time, predict_layer
from .training_steps import predict_steps
from .training_time import predict_training

__all__ = ["__version__", "UnsupportedPrecision", "compare", "find_gpu", "gpus", "layer_features", "layer_kinds",
           "layer_time", "measure", "model_features", "predict", "predict_layer", "predict_steps", "predict_training",
           "training_memory"]
