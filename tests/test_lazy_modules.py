"""Models with lazy modules not yet run (prenet.lazy_modules): each entry point works on a shaped copy and leaves the
caller's model without shapes, as it was; what cannot be shaped is refused by name."""
import pytest
import torch.nn as nn

import prenet
from prenet.lazy_modules import uninitialized

pytestmark = pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")


def lazy_cnn():
    return nn.Sequential(nn.LazyConv2d(8, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))


def shaped_cnn():  # the same layers for inputs of (3, 16, 16), with their shapes given
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def test_a_lazy_model_is_predicted_as_the_same_model_with_its_shapes_given_and_left_without_shapes():
    model = lazy_cnn()
    lazy = prenet.predict(model, batch=8, gpu="V100", input_shape=(3, 16, 16), dataset_size=64, progress=False)
    shaped = prenet.predict(shaped_cnn(), batch=8, gpu="V100", input_shape=(3, 16, 16), dataset_size=64,
                            progress=False)
    assert lazy.step_seconds == pytest.approx(shaped.step_seconds, rel=1e-9)
    assert list(lazy.layers["name"]) == list(shaped.layers["name"])
    assert uninitialized(model) == ["0", "1", "4"]


def test_compare_memory_features_and_measure_take_a_lazy_model_and_leave_it_as_it_was():
    model = lazy_cnn()
    table = prenet.compare(model, batch=8, gpus=["V100", "T4"], input_shape=(3, 16, 16), dataset_size=64,
                           progress=False)
    assert (table["epoch_seconds"] > 0).all()
    memory = prenet.training_memory(model, batch=8, input_shape=(3, 16, 16))
    assert memory == prenet.training_memory(shaped_cnn(), batch=8, input_shape=(3, 16, 16))
    assert memory.weights > 8 * 14 * 14 * 10 * 4
    features = prenet.model_features(model, batch=8, input_shape=(3, 16, 16))
    assert set(features["kind"].dropna()) >= {"conv2d", "linear"}
    measured = prenet.measure(model, batch=8, input_shape=(3, 16, 16), dataset_size=16, device="cpu",
                              progress=False)
    assert measured.epoch_seconds > 0
    assert uninitialized(model) == ["0", "1", "4"]


def test_a_sample_the_lazy_model_rejects_names_the_module_and_an_uncalled_lazy_module_is_refused_by_name():
    model = nn.Sequential(nn.LazyLinear(5), nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"failed in module '1'"):
        prenet.predict(model, batch=4, gpu="V100", input_shape=(7,))

    class Unused(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.spare = nn.Linear(4, 4), nn.LazyLinear(3)

        def forward(self, x):
            return self.used(x)

    with pytest.raises(ValueError, match=r"lazy modules spare still have no weights' shapes"):
        prenet.predict(Unused(), batch=4, gpu="V100", input_shape=(4,))


def test_a_lazy_model_off_the_cpu_is_refused_with_what_to_do():
    model = lazy_cnn().to("meta")
    with pytest.raises(ValueError, match=r"lazy modules \(.+\) have no weights' shapes yet and the model is on meta: "
                                         "run it once on a sample batch"):
        prenet.predict(model, batch=8, gpu="V100", input_shape=(3, 16, 16))
