"""Recurrent layers (torch.nn.RNN, LSTM, GRU) as each device runs them. On the CPU PyTorch runs a layer as a loop
of operators, a handful per step, each dispatched on its own; on a GPU it makes one call to cuDNN, whose kernels
(one GEMM projecting the inputs of every step, then per step a GEMM of the hidden state and a fused cell) are
those of the native recurrent kinds (cpp/src/kinds/recurrent.cpp), and one for the backward pass.

Traced for real, each layer runs within a boundary (a torch.autograd.Function) that records both: the CPU's
operators, forward and backward, marked runs_on="cpu", and one operator for the forward and one for the
backward as cuDNN's (`_cudnn_rnn`, `_cudnn_rnn_backward`), marked "cuda", whose arguments give the layer's
configuration. The costing keeps the ones of the device it costs for (prenet.estimate). Layers cuDNN does not
run this way here (packed sequences, LSTM projections) keep their operators on every device.
"""
import contextlib
import functools

# Op.arguments of a fused operator: the layer kind and these configuration keys, in order; batch and seq_len
# come from its input's shape.
ARGUMENTS = ("input_size", "hidden_size", "num_layers", "bidirectional", "bias", "batch_first")
# torch's RNNBase.mode -> layer kind of the native table (a ReLU RNN costs what a tanh RNN does).
KINDS = {"RNN_TANH": "rnn", "RNN_RELU": "rnn", "LSTM": "lstm", "GRU": "gru"}
FORWARD, BACKWARD = "_cudnn_rnn.default", "_cudnn_rnn_backward.default"


def arguments_of(layer):
    """A fused operator's arguments for a recurrent layer: its kind, then its ARGUMENTS."""
    return [KINDS[layer.mode], *(int(getattr(layer, key)) for key in ARGUMENTS)]


def configuration(arguments, shape):
    """(layer kind, configuration) of a recurrent layer from a fused operator's arguments and its input's shape:
    (batch, steps, features) batch first, else (steps, batch, features); (steps, features) unbatched."""
    kind, *values = arguments
    config = dict(zip(ARGUMENTS, values))
    batch_first = config.pop("batch_first")
    steps, batch = (shape[0], 1) if len(shape) == 2 else (shape[1], shape[0]) if batch_first else shape[:2]
    return kind, {"batch": batch, "seq_len": steps, **config}


def _record(recorder, phase, name, layer, label, x, output):
    from .op_trace import Op, dtype_names

    dtype = dtype_names[x.dtype]
    recorder.ops.append(Op(phase, name, [tuple(x.shape)], [tuple(output.shape)], arguments_of(layer), label, dtype,
                           [dtype], [dtype_names[output.dtype]], False,
                           tuple(x.shape) if phase == "forward" else None, "cuda"))


@contextlib.contextmanager
def _marked(recorder, paused=False, runs_on=""):
    """Within the block the recorder skips operators (`paused`) or marks them with `runs_on`; as before after."""
    before = recorder.paused, recorder.runs_on
    recorder.paused, recorder.runs_on = paused, runs_on
    try:
        yield
    finally:
        recorder.paused, recorder.runs_on = before


def _boundary():
    import torch

    class Boundary(torch.autograd.Function):
        """The layer run on (x, its initial states) with its own weights, recorded as above; the weights are
        inputs too, so that their gradients reach them as any layer's do (autograd accumulates them, on every
        device)."""

        @staticmethod
        def forward(ctx, run, layer, label, recorder, states, x, *tensors):
            ctx.set_materialize_grads(False)
            with _marked(recorder, paused=True):  # the boundary's own operators are no layer's
                inner = [t.detach().requires_grad_(t.requires_grad) for t in (x, *tensors[:states])]
            with _marked(recorder, runs_on="cpu"), torch.enable_grad():
                output, state = run(inner[0], _state(layer, inner[1:]))
            _record(recorder, "forward", FORWARD, layer, label, x, output)
            outputs = (output, *(state if isinstance(state, tuple) else (state,)))
            ctx.inner, ctx.outputs, ctx.weights = inner, outputs, tensors[states:]
            ctx.layer, ctx.label, ctx.recorder = layer, label, recorder
            with _marked(recorder, paused=True):
                return tuple(t.detach() for t in outputs)

        @staticmethod
        def backward(ctx, *grads):
            pairs = [(t, g) for t, g in zip(ctx.outputs, grads) if g is not None and t.requires_grad]
            sources = [*ctx.inner, *ctx.weights]
            wanted = [t for t in sources if t.requires_grad]
            # the gradients themselves, none accumulated here (autograd does that with those returned)
            with _marked(ctx.recorder, runs_on="cpu"):
                found = torch.autograd.grad([t for t, _ in pairs], wanted, [g for _, g in pairs],
                                            allow_unused=True) if pairs and wanted else [None] * len(wanted)
            _record(ctx.recorder, "backward", BACKWARD, ctx.layer, ctx.label, ctx.inner[0], ctx.outputs[0])
            by_source = dict(zip(map(id, wanted), found))
            return (None, None, None, None, None, *(by_source.get(id(t)) for t in sources))

    return Boundary


def _state(layer, tensors):
    """The initial state as the layer takes it: None, h_0, or (h_0, c_0) for an LSTM."""
    if not tensors:
        return None
    return tuple(tensors) if layer.mode == "LSTM" else tensors[0]


@contextlib.contextmanager
def fused_recurrent_layers(model, recorder):
    """Within the block, every recurrent layer of `model` that cuDNN runs as one call records as described above
    (a forward of its own in place of the class's, removed after)."""
    import torch

    boundary = _boundary()
    patched = []

    def forward_of(layer, label):
        run = functools.partial(type(layer).forward, layer)

        def forward(input, hx=None):
            if (not isinstance(input, torch.Tensor) or not input.is_floating_point() or
                    getattr(layer, "proj_size", 0)):
                return run(input, hx)  # a packed sequence, or an LSTM with projections: its operators everywhere
            states = [] if hx is None else list(hx) if isinstance(hx, tuple) else [hx]
            outputs = boundary.apply(run, layer, label, recorder, len(states), input, *states,
                                     *layer._flat_weights)
            return outputs[0], _state(layer, list(outputs[1:]))
        return forward

    try:
        for name, layer in model.named_modules():
            if isinstance(layer, torch.nn.RNNBase) and layer.mode in KINDS:
                layer.forward = forward_of(layer, name or type(layer).__name__)
                patched.append(layer)
        yield
    finally:
        for layer in patched:
            del layer.forward
