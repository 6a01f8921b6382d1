"""A model with parameters a training step gives no gradient (tests of the update and of training memory)."""
import torch
import torch.nn as nn


class WithIdleParameters(nn.Module):
    """A head it does not use, and a teacher it runs without gradients: their parameters require gradients, but
    a step gives them none, so PyTorch's optimizers leave them without an update or state."""

    def __init__(self, width=16, spare=512):
        super().__init__()
        self.student, self.teacher, self.spare_head = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(
            spare, spare)

    def forward(self, x):
        with torch.no_grad():
            target = self.teacher(x)
        return self.student(x) - target
