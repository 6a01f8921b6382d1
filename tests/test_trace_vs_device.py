"""The operators prenet costs for a CPU training step are the ones the CPU dispatches when the step runs for real
(prenet.dispatched_ops; tests/test_cuda_paths.py checks a GPU's where one is): none dropped, none added. Recurrent
layers are the exception by design (the CPU's layer operator stands for its loop: prenet.fused_recurrent)."""
import pytest
import torch
import torchvision
from torch import nn

from prenet.dispatched_ops import costed_operators, step_operators


class Encoder(nn.Module):
    """A Transformer encoder layer (attention, dropout, layer norm, GELU) and a head on its mean."""

    def __init__(self, width=32):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.1, activation="gelu",
                                                batch_first=True)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


# Under PyTorch 2 the CPU runs scaled_dot_product_attention as its own fused kernel
# (_scaled_dot_product_flash_attention_for_cpu) where the meta trace takes the math path, which the CPU is costed as
# (README, "Not yet built"); not seen here, where torch 1.13 has no such function.
CPU_FUSES_ATTENTION = pytest.mark.xfail(hasattr(torch.nn.functional, "scaled_dot_product_attention"),
                                        reason="the CPU's fused attention under torch 2 is costed as its math path")

CASES = {
    "convolution, batch norm, dropout": (lambda: nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.5), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 8 * 8, 10)), (3, 16, 16)),
    "MLP with in-place dropout": (lambda: nn.Sequential(
        nn.Linear(64, 128), nn.Dropout(0.3, inplace=True), nn.Tanh(), nn.Linear(128, 10)), (64,)),
    "Transformer encoder layer": (Encoder, (12, 32)),
    "ResNet-18": (lambda: torchvision.models.resnet18(num_classes=10), (3, 32, 32)),
}


@pytest.mark.filterwarnings("ignore:this machine.s CPU")
@pytest.mark.parametrize("name", [pytest.param(name, marks=CPU_FUSES_ATTENTION) if "Transformer" in name else name
                                  for name in CASES])
def test_the_cpu_step_costed_is_the_step_the_cpu_runs(name):
    build, shape = CASES[name]
    torch.manual_seed(0)
    model = build()
    costed = costed_operators(model, 4, "cpu", input_shape=shape)
    dispatched = step_operators(model.train(), (torch.randn((4,) + shape),))
    assert costed == dispatched and sum(costed.values()) > 20


def test_a_dropped_or_added_operator_shows():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    dispatched = step_operators(model.train(), (torch.randn(4, 8),))
    assert dispatched["forward", "relu.default"] == 1 and dispatched["backward", "threshold_backward.default"] == 1
    assert dispatched != step_operators(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2)).train(), (torch.randn(4, 8),))
