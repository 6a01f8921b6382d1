"""prenet.training_memory: a training step's device memory by part, its activations as autograd saves them."""
import pytest
import torch
import torch.nn as nn

import prenet
from prenet import memory


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class Branching(SmallCnn):
    """A branch on a value: the meta device cannot run it."""

    def forward(self, x):
        return super().forward(x if x.sum() > 0 else -x)


def test_weights_gradients_state_and_data_are_counted_exactly():
    model = SmallCnn()
    got = prenet.training_memory(model, batch=4, input_shape=(3, 16, 16), dataset_size=10, optimizer="adam")
    parameters = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())   # running statistics and step counter
    assert got.weights == 4 * parameters + buffers
    assert got.gradients == 4 * parameters
    assert got.optimizer_state == 2 * 4 * parameters                      # Adam's two moments
    assert got.data == 10 * 3 * 16 * 16 * 4                                # the resident data set
    assert got.total == got.weights + got.gradients + got.optimizer_state + got.data + got.activations
    plain = prenet.training_memory(model, batch=4, input_shape=(3, 16, 16), optimizer="sgd_plain")
    assert plain.optimizer_state == 0 and plain.activations == got.activations
    assert "GiB" in repr(got)


def test_activations_are_what_autograd_saves_on_meta_as_for_real_and_grow_with_the_batch():
    model = SmallCnn().train()
    real = memory.saved_activations(model, torch.randn(4, 3, 16, 16))
    meta = memory.saved_activations(model, torch.empty(4, 3, 16, 16, device="meta"))
    assert real == meta > 0
    # conv saves its input; batch norm its input and statistics; relu its output; linear its (flattened) input:
    # the relu's output and the flattened view of it are one storage
    per_sample = 4 * (3 * 16 * 16 + 2 * 8 * 16 * 16)
    assert meta == 4 * per_sample + 4 * 2 * 8   # + batch norm's saved mean and inverse deviation
    assert memory.saved_activations(model, torch.empty(8, 3, 16, 16, device="meta")) == 8 * per_sample + 4 * 2 * 8


def test_a_model_the_meta_device_cannot_run_is_measured_at_two_small_batches():
    model = Branching()
    got = prenet.training_memory(model, batch=16, input_shape=(3, 16, 16))
    assert got.activations == memory.saved_activations(model.train(), torch.rand(16, 3, 16, 16))


def test_compare_says_where_the_training_memory_fits():
    model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096))
    table = prenet.compare(model, batch=262144, gpus=["P4", "A100"], input_shape=(4096,), dataset_size=262144)
    fits = dict(zip(table["gpu"], table["fits"]))
    assert fits == {"Tesla P4": False, "NVIDIA A100-PCIE-40GB": True}
    expected = prenet.training_memory(model, batch=262144, input_shape=(4096,), dataset_size=262144).gib
    assert list(table["memory_gib"]) == pytest.approx([expected, expected])
    assert 8 < expected < 40
