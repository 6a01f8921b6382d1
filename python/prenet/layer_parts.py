"""What each predictor mode's time is made of among the parts layer timing gives one layer
(prenet/layer_time.hpp's estimate: forward_ms, step_forward_ms, backward_ms, optimizer_ms): the one place that says
a training step is the forward pass inside it, the backward pass and the update."""

# The parts, in the order the estimate gives them.
PARTS = ("forward_ms", "step_forward_ms", "backward_ms", "optimizer_ms")
MODE_PARTS = {"forward": ("forward_ms",), "train_forward": ("step_forward_ms",), "backward": ("backward_ms",),
              "optimizer": ("optimizer_ms",), "train": ("step_forward_ms", "backward_ms", "optimizer_ms")}
STEP_PARTS = MODE_PARTS["train"]


def mode_ms(times, mode):
    """Milliseconds of `mode` from one layer's parts `times` (an estimate's dict; arrays of rows work alike)."""
    return sum(times[part] for part in MODE_PARTS[mode])
