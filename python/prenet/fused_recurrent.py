"""Recurrent layers (torch.nn.RNN, LSTM, GRU) and fused cells (torch.nn.LSTMCell, GRUCell) as each device runs them. On
the CPU PyTorch runs a layer as aten's layer operator (`lstm.input`, `gru.input`, `rnn_tanh.input`,
`rnn_relu.input`; `.data` for a packed sequence), a loop of operators inside, a handful per step, and a cell as a
dozen operators; on a GPU it makes one call to cuDNN for a layer, whose kernels (one GEMM projecting the inputs of
every step, then per step a GEMM of the hidden state and a fused cell) are those of the native recurrent kinds
(cpp/src/kinds/recurrent.cpp), and one for the backward pass; a cell is two products and one fused pointwise kernel
forward (aten/src/ATen/native/RNN.cpp, its CUDA branch: `_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`), the fused
kernel's backward and the products' gradients backward.

Traced, each layer or cell runs within a boundary (a torch.autograd.Function) that records both devices' operators:
for a layer, the CPU's layer operator once each way (the backward phase's: autograd's gradients of its loop), marked
runs_on="cpu", and cuDNN's call each way (`_cudnn_rnn`, `_cudnn_rnn_backward`), marked "cuda", all with arguments
that give its configuration: the CPU's operator is costed whole, as the CPU set times the layer (its loop of small
operators, each costed by its own kind, came to three quarters of a layer's measured forward,
bench/cpu_recurrent_composition.py); for a cell, the CPU's operators, forward and backward, marked "cpu", and
the GPU's products (costed as any matrix product, in fp32 unless TF32 matmuls are asked for: they are not cuDNN's)
and fused kernels (costed by their traffic), marked "cuda". The costing keeps the ones of the device it costs for
(prenet.estimate). A packed sequence is recorded as the steps cuDNN runs over its mean batch. LSTMs with
projections keep their operators on every device (not modelled here), as does torch.nn.RNNCell, which has no fused
kernel.
"""
import contextlib

# Op.arguments of a fused operator: the layer kind and these configuration keys, in order; batch and seq_len
# come from its input's shape.
ARGUMENTS = ("input_size", "hidden_size", "num_layers", "bidirectional", "bias", "batch_first")
# torch's RNNBase.mode -> layer kind of the native table (a ReLU RNN costs what a tanh RNN does).
KINDS = {"RNN_TANH": "rnn", "RNN_RELU": "rnn", "LSTM": "lstm", "GRU": "gru"}
FORWARD, BACKWARD = "_cudnn_rnn.default", "_cudnn_rnn_backward.default"
# torch's RNNBase.mode -> the CPU's layer operator (aten; overload "input", "data" for a packed sequence), recorded
# in both phases.
CPU_OPERATORS = {"RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu", "LSTM": "lstm", "GRU": "gru"}


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


def _record(recorder, phase, label, ops, dtype, module_input=None, runs_on="cuda"):
    """Appends `ops`, (name, input shapes, output shapes, arguments or None for tensors only), as the ops of the
    device `runs_on` names."""
    from .op_trace import TENSOR, device_op, dtype_names

    dtype = dtype_names[dtype]
    for name, inputs, outputs, arguments in ops:
        recorder.ops.append(device_op(phase, name, inputs, outputs, arguments or [TENSOR] * len(inputs), label,
                                      [dtype] * len(inputs), [dtype] * len(outputs), module_input, runs_on))


# torch.nn cell class -> (weight blocks per hidden unit, the CUDA fused kernel forward and backward, the workspace
# the forward keeps for the backward in hidden units per sample, the state tensors it takes)
CELLS = {
    "LSTMCell": (4, "_thnn_fused_lstm_cell.default", "_thnn_fused_lstm_cell_backward_impl.default", 4, 2),
    "GRUCell": (3, "_thnn_fused_gru_cell.default", "_thnn_fused_gru_cell_backward.default", 5, 1),
}


def _cell_ops(cell, phase, shape, input_grad, state_grad, new_state):
    """The GPU's operators of a fused cell on an input of `shape` (aten/src/ATen/native/RNN.cpp, CUDA branch; fused
    kernels in aten/src/ATen/native/cuda/RNN.cu): forward, the zero state where none is given (`new_state`), the
    products of the input and of the hidden state with their weights, then the fused kernel (gates, biases, new
    state, workspace); backward, the fused kernel's backward (gate gradients, the state's own, biases' sums), then
    the products giving the gradients of the weights, and of the input and state where they need one (`input_grad`,
    `state_grad`)."""
    gates, fused, fused_backward, workspace, states = _cell_traits(cell)
    b, n, h = (shape[0] if len(shape) == 2 else 1), cell.input_size, cell.hidden_size
    g, kept = gates * h, (b, workspace * h)
    biases = [(g,), (g,)] if cell.bias else []
    if phase == "forward":
        zeros = [("zeros.default", [], [(b, h)], [])] * (states if new_state else 0)
        # fused: (input gates, hidden gates, the cell state c or the GRU's h, biases) -> (new states, workspace)
        return zeros + [("mm.default", [(b, n), (n, g)], [(b, g)], None),
                        ("mm.default", [(b, h), (h, g)], [(b, g)], None),
                        (fused, [(b, g), (b, g), (b, h), *biases], [*[(b, h)] * states, kept], None)]
    if states == 2:  # LSTM: (dh, dc, c, new c, workspace) -> (gate gradients, dc before, one bias gradient)
        ops = [(fused_backward, [(b, h)] * 4 + [kept], [(b, g), (b, h), *biases[:1]], None)]
    else:  # GRU: (dh, workspace) -> (input gate and hidden gate gradients, dh before, both bias gradients)
        ops = [(fused_backward, [(b, h), kept], [(b, g), (b, g), (b, h), *biases], None)]
    ops += [("mm.default", [(g, b), (b, n)], [(g, n)], None), ("mm.default", [(g, b), (b, h)], [(g, h)], None)]
    if input_grad:
        ops.append(("mm.default", [(b, g), (g, n)], [(b, n)], None))
    if state_grad:
        ops.append(("mm.default", [(b, g), (g, h)], [(b, h)], None))
        if states == 1:  # the GRU's: the product's share and the fused kernel's own, summed
            ops.append(("add.Tensor", [(b, h), (b, h)], [(b, h)], None))
    return ops


def _gpu_ops(layer, phase, shape, input_grad=False, state_grad=False, new_state=False):
    """The operators a GPU runs for `layer` on an input of `shape` (as cuDNN takes it, _cudnn_shape) in `phase`:
    a layer's zero initial states where none is given (`new_state`; the CPU's layer predictors time them within the
    layer), then cuDNN's call."""
    if _cell_traits(layer):
        return _cell_ops(layer, phase, shape, input_grad, state_grad, new_state)
    zeros = _initial_states(layer, shape) if new_state and phase == "forward" else []
    return zeros + [(FORWARD if phase == "forward" else BACKWARD, [shape], [_output_shape(layer, shape)],
                     arguments_of(layer))]


def _initial_states(layer, shape):
    """The zero states a recurrent layer makes where none is given (torch.nn.RNNBase.forward): h_0, and c_0 for an
    LSTM, each (layers x directions, batch, hidden), without the batch for an unbatched input (for a packed sequence,
    its mean batch over its steps, as the layer's call records it: _cudnn_shape)."""
    stacked = layer.num_layers * (2 if layer.bidirectional else 1)
    state = ((stacked, layer.hidden_size) if len(shape) == 2 else
             (stacked, shape[0] if layer.batch_first else shape[1], layer.hidden_size))
    return [("zeros.default", [], [state], [])] * (2 if layer.mode == "LSTM" else 1)


def _cpu_layer_op(layer, shape, packed):
    """The CPU's one operator of a recurrent layer (not a cell) on an input of `shape` (_cudnn_shape), `packed` or
    not, either phase."""
    name = f"{CPU_OPERATORS[layer.mode]}.{'data' if packed else 'input'}"
    return [(name, [shape], [_output_shape(layer, shape)], arguments_of(layer))]


def _output_shape(layer, shape):
    return (*shape[:-1], layer.hidden_size * (2 if layer.bidirectional else 1))


def _cudnn_shape(layer, input):
    """The input's shape as a layer's fused operator records it: a tensor's own; for a packed sequence (its
    samples' steps stacked, `batch_sizes` samples at each of its steps) the steps cuDNN runs and the mean batch
    over them, so that the (sample, step) pairs are the sequence's, in the layer's layout."""
    if not hasattr(input, "batch_sizes"):
        return tuple(input.shape)
    steps = len(input.batch_sizes)
    batch = max(1, round(input.data.shape[0] / steps))
    return (batch, steps, input.data.shape[1]) if layer.batch_first else (steps, batch, input.data.shape[1])


def _boundary():
    import torch

    from .op_trace import marked

    class Boundary(torch.autograd.Function):
        """The layer run on (x, its initial states) with its own weights, recorded as above; the weights are
        inputs too, so that their gradients reach them as any layer's do (autograd accumulates them, on every
        device)."""

        @staticmethod
        def forward(ctx, run, layer, label, recorder, shape, packed, states, x, *tensors):
            ctx.set_materialize_grads(False)
            with marked(recorder, paused=True):  # the boundary's own operators are no layer's
                inner = [t.detach().requires_grad_(t.requires_grad) for t in (x, *tensors[:states])]
            # a layer, not a cell: its loop is the CPU's one operator, recorded as such each way
            ctx.whole = whole = _cell_traits(layer) is None
            with marked(recorder, paused=whole, runs_on="cpu"), torch.enable_grad():
                outputs = run(inner[0], _state(layer, inner[1:]))
            if whole:
                _record(recorder, "forward", label, _cpu_layer_op(layer, shape, packed), outputs[0].dtype, shape,
                        "cpu")
            _record(recorder, "forward", label, _gpu_ops(layer, "forward", shape, new_state=not states),
                    outputs[0].dtype, shape)
            ctx.inner, ctx.outputs, ctx.weights = inner, outputs, tensors[states:]
            ctx.layer, ctx.label, ctx.recorder, ctx.shape, ctx.packed = layer, label, recorder, shape, packed
            with marked(recorder, paused=True):
                return tuple(t.detach() for t in outputs)

        @staticmethod
        def backward(ctx, *grads):
            pairs = [(t, g) for t, g in zip(ctx.outputs, grads) if g is not None and t.requires_grad]
            sources = [*ctx.inner, *ctx.weights]
            wanted = [t for t in sources if t.requires_grad]
            # the gradients themselves, none accumulated here (autograd does that with those returned)
            with marked(ctx.recorder, paused=ctx.whole, runs_on="cpu"):
                found = torch.autograd.grad([t for t, _ in pairs], wanted, [g for _, g in pairs],
                                            allow_unused=True) if pairs and wanted else [None] * len(wanted)
            if ctx.whole:
                _record(ctx.recorder, "backward", ctx.label, _cpu_layer_op(ctx.layer, ctx.shape, ctx.packed),
                        ctx.outputs[0].dtype, runs_on="cpu")
            x, states = ctx.inner[0], ctx.inner[1:]
            _record(ctx.recorder, "backward", ctx.label,
                    _gpu_ops(ctx.layer, "backward", ctx.shape, x.requires_grad, any(t.requires_grad for t in states)),
                    ctx.outputs[0].dtype)
            by_source = dict(zip(map(id, wanted), found))
            return (None,) * 7 + tuple(by_source.get(id(t)) for t in sources)

    return Boundary


def _state(layer, tensors):
    """The initial state as the layer takes it: None, h_0, or (h_0, c_0) for an LSTM or LSTMCell."""
    if not tensors:
        return None
    traits = _cell_traits(layer)
    states = traits[4] if traits else 2 if layer.mode == "LSTM" else 1
    return tuple(tensors) if states == 2 else tensors[0]


def _cell_traits(layer):
    """CELLS' entry for an LSTM or GRU cell that runs its class's forward (a subclass's included), else None."""
    import torch

    for cell in (torch.nn.LSTMCell, torch.nn.GRUCell):
        if isinstance(layer, cell) and type(layer).forward is cell.forward:
            return CELLS[cell.__name__]
    return None


def _fused(layer):
    """Whether a GPU runs `layer` fused: a recurrent layer of KINDS, an LSTM or GRU cell."""
    import torch

    return (isinstance(layer, torch.nn.RNNBase) and layer.mode in KINDS) or _cell_traits(layer) is not None


@contextlib.contextmanager
def fused_recurrent_layers(named_modules, recorder):
    """Within the block, every recurrent layer and cell among `named_modules` ((name, module) pairs) that a GPU
    runs fused records as described above (a forward of its own in place of the class's; its own again after,
    model_state.forwards_replaced)."""
    import torch
    from torch.nn.utils.rnn import PackedSequence

    from .model_inputs import module_label
    from .model_state import forwards_replaced
    from .op_trace import marked

    boundary = _boundary()

    def forward_of(layer, label):
        cell = _cell_traits(layer) is not None

        def forward(input, hx=None):
            packed = isinstance(input, PackedSequence)
            x = input.data if packed else input
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or getattr(layer, "proj_size", 0):
                # an LSTM with projections, or not floating-point input: its operators everywhere
                return type(layer).forward(layer, input, hx)

            def as_given(data):  # a packed sequence's data packed again as it came
                return input._replace(data=data) if packed else data

            def run(x, hx):  # the layer as its class runs it, its outputs as one tuple
                if not cell and x.dtype != layer._flat_weights[0].dtype:
                    # autocast emulated (prenet.autocast_policy) casts the layer's kernel's inputs and weights,
                    # but torch >= 2 refuses an input of another dtype than the weights before it gets there
                    # unless autocast is on: handed over in the weights' dtype (a cast no GPU step makes)
                    with marked(recorder, paused=True):
                        dtype = layer._flat_weights[0].dtype
                        x = x.to(dtype)
                        hx = None if hx is None else tuple(h.to(dtype) for h in hx) if isinstance(hx, tuple) \
                            else hx.to(dtype)
                outputs = type(layer).forward(layer, as_given(x), hx)
                if cell:
                    return outputs if isinstance(outputs, tuple) else (outputs,)
                output, state = outputs
                return (output.data if packed else output, *(state if isinstance(state, tuple) else (state,)))

            states = [] if hx is None else list(hx) if isinstance(hx, tuple) else [hx]
            weights = [layer.weight_ih, layer.weight_hh, layer.bias_ih, layer.bias_hh] if cell else layer._flat_weights
            outputs = boundary.apply(run, layer, label, recorder, _cudnn_shape(layer, input), packed, len(states),
                                     x, *states, *(w for w in weights if w is not None))
            if cell:
                return outputs if len(outputs) > 1 else outputs[0]
            return as_given(outputs[0]), _state(layer, list(outputs[1:]))
        return forward

    with forwards_replaced({layer: forward_of(layer, module_label(name, layer)) for name, layer in named_modules
                            if _fused(layer)}):
        yield
