"""prenet.collector_paused: Python's garbage collector held off during predict and compare, and put back after."""
import gc

import pytest
import torch.nn as nn

import prenet
from prenet.collector_paused import collector_paused


class Watched(nn.Module):
    """A linear layer that notes, at each call, whether the collector is on."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.collector_on = []

    def forward(self, x):
        self.collector_on.append(gc.isenabled())
        return self.fc(x)


@pytest.fixture
def collector_state():
    """Runs a test with the collector on, and turns it back on after whatever the test did."""
    gc.enable()
    yield
    gc.enable()


def test_predict_runs_the_model_with_the_collector_paused_and_turns_it_back_on(collector_state):
    model = Watched()
    prenet.predict(model, batch=4, gpu="V100", input_shape=(8,), dataset_size=16)
    assert model.collector_on and not any(model.collector_on)
    assert gc.isenabled()


def test_compare_pauses_the_collector_too(collector_state):
    model = Watched()
    prenet.compare(model, batch=4, gpus=["V100", "T4"], input_shape=(8,), dataset_size=16)
    assert model.collector_on and not any(model.collector_on)
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off(collector_state):
    gc.disable()
    prenet.predict(Watched(), batch=4, gpu="V100", input_shape=(8,), dataset_size=16)
    assert not gc.isenabled()


def test_the_collector_is_back_on_after_a_predict_that_fails(collector_state):
    with pytest.raises(ValueError, match="rejected the input"):
        prenet.predict(Watched(), batch=4, gpu="V100", input_shape=(5,), dataset_size=16)
    assert gc.isenabled()


def test_no_collection_runs_inside_a_paused_function(collector_state):
    passes = []

    def count(phase, info):
        if phase == "start":
            passes.append(info["generation"])

    @collector_paused
    def allocate():
        return len([[i] for i in range(20 * gc.get_threshold()[0])])  # many times the young generation's threshold

    gc.callbacks.append(count)
    try:
        assert allocate() == 20 * gc.get_threshold()[0]
        inside = list(passes)
        [[i] for i in range(20 * gc.get_threshold()[0])]  # the same outside: the collector runs
    finally:
        gc.callbacks.remove(count)
    assert inside == []
    assert passes, "the collector did not run outside the paused function either; the test proves nothing"
