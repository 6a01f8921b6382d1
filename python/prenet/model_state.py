"""A user's model left as it was after prenet ran real training steps on it: prenet.measure trains it for the
epochs it times (moving it to the device, updating its weights), and a model the meta device cannot run is traced
with real steps (prenet.op_trace), which update BatchNorm statistics, set gradients and draw random numbers. And
every walk that puts a model in training or evaluation mode gives each module its own mode back (in_mode).
"""
import contextlib
import itertools


def _saved(tensor):
    """(the tensor, a copy of its values on the CPU, its device), or None for a missing gradient."""
    return None if tensor is None else (tensor, tensor.detach().to("cpu", copy=True), tensor.device)


@contextlib.contextmanager
def in_mode(model, training=None):
    """Within the block, `model` in training (True) or evaluation (False) mode, as its own train() sets it (None:
    as it is, for a block that sets modes itself); afterwards every module has its own mode back (a frozen
    BatchNorm in a model being fine-tuned stays frozen), also when the block fails."""
    modes = [(module, module.training) for module in model.modules()]
    if training is not None and any(mode != training for _, mode in modes):
        model.train(training)
    try:
        yield model
    finally:
        for module, mode in modes:
            module.training = mode


@contextlib.contextmanager
def forwards_replaced(replacements):
    """Within the block, each module of `replacements` ({module: a forward for it}) calls that forward (an instance
    attribute, as a user's patch would be); afterwards each calls its own again (its instance's own patch, if it had
    one), also when the block fails."""
    own = {module: vars(module).get("forward") for module in replacements}
    for module, forward in replacements.items():
        module.forward = forward
    try:
        yield
    finally:
        for module, forward in own.items():
            if forward is None:
                del module.forward
            else:
                module.forward = forward


@contextlib.contextmanager
def model_kept(model, cuda_devices=()):
    """Within the block, training steps may run on `model`, on another device. Afterwards, also when the block
    fails: every parameter and buffer has its values and device back (the same tensor objects, so an optimizer of
    the caller's still holds them), every parameter its gradient (or none), every module its training mode, and
    the random number generators (the CPU's and those of the CUDA device indices `cuda_devices`) their states."""
    import torch

    tensors = [_saved(t) for t in itertools.chain(model.parameters(), model.buffers())]
    gradients = [(p, _saved(p.grad)) for p in model.parameters()]
    with torch.random.fork_rng(devices=list(cuda_devices)), in_mode(model):
        try:
            yield model
        finally:
            with torch.no_grad():
                for tensor, values, device in tensors:
                    tensor.data = values.to(device)
            for parameter, gradient in gradients:
                parameter.grad = None if gradient is None else gradient[1].to(gradient[2])
