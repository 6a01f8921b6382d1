"""Whether prenet costs what a device runs: the aten operators a training step dispatches when it runs for real on a
device, and the ones prenet.predict costs for that device, each counted by (phase, operator name). `detach` is left
out on both sides: it runs no kernel, and the trace keeps only the ones a step asks for, not autograd's own.
Used by bench/gpu_trace_vs_device.py (on a GPU machine), tests/test_trace_vs_device.py (the CPU) and
tests/test_cuda_paths.py (a CUDA GPU)."""
import collections

DETACH = "detach.default"


def step_operators(model, inputs, precision="fp32", device="cpu"):
    """Counter of (phase, operator) of one training step of `model` (already on `device`, in training mode) on
    `inputs` (a tuple of positional arguments or a dict of keyword arguments, on `device`): forward under
    autocast for "bf16", the loss (op_trace.training_loss, its labels resident as the protocol keeps them),
    backward; no update. Recorded on the second of two steps, the first one's work (cuDNN's choices, the
    allocator's first blocks) out of the way."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from .op_trace import training_loss

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.counts, self.phase, self.paused = collections.Counter(), "forward", False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not self.paused and func.__name__ != DETACH:
                self.counts[(self.phase, func.__name__)] += 1
            return func(*args, **(kwargs or {}))

    counter, made = Counter(), {}

    def labels(count, classes, on):  # resident: made once, outside the count
        if (count, classes) not in made:
            counter.paused = True
            made[count, classes] = torch.zeros(count, dtype=torch.long, device=on)
            counter.paused = False
        return made[count, classes]

    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            output = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        loss = training_loss(output, labels)
        counter.phase = "backward"
        loss.backward()
        counter.phase = "forward"

    step()
    counter.counts.clear()
    with counter:
        step()
    return counter.counts


def costed_operators(model, batch, gpu, precision="fp32", **shape):
    """Counter of (phase, operator) that prenet.predict(model, batch, gpu, precision, **shape) costs in a step (its
    op table: the ops the device runs), the update left out."""
    from .estimate import predict

    table = predict(model, batch=batch, gpu=gpu, precision=precision, progress=False, **shape).ops
    return collections.Counter(key for key in zip(table["phase"], table["op"]) if key[1] != DETACH)
