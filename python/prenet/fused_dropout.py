"""Dropout as each device runs it. On a CUDA GPU PyTorch runs dropout in training (0 < p < 1, out of place, a
non-empty input) as one fused kernel each way: `native_dropout`, which writes the output and a one-byte mask, and
`native_dropout_backward`, which scales the gradient by that mask (aten/src/ATen/native/Dropout.cpp,
is_fused_kernel_acceptable; aten/src/ATen/native/cuda/Dropout.cu). Anywhere else, the CPU and the meta device the
trace runs on included, it runs its composite: noise made (`empty_like`), drawn (`bernoulli_`) and scaled (`div_`),
then multiplied in (`mul`), the noise kept in the input's type for the backward pass's `mul`.

Traced (prenet.op_trace), each such call runs within a boundary (a torch.autograd.Function) that records both: the
composite's operators, as they run, marked runs_on="cpu", and the fused kernels marked "cuda"; the costing keeps the
ones of the device it costs for (prenet.estimate), as for recurrent layers (prenet.fused_recurrent). The memory walk
(prenet.memory, a GPU's memory) runs the fused form: the one-byte mask is what the step keeps. In-place dropout, p of
0 or 1, and feature or alpha dropout run their composite on every device, as they do on a GPU (Dropout.cpp's
dropout_ and feature and alpha forms take no fused path); so does dropout inside TorchScript, which does not call
torch.nn.functional.dropout from Python."""
import contextlib

FORWARD, BACKWARD = "native_dropout.default", "native_dropout_backward.default"


def _boundary():
    import torch

    from .op_trace import TENSOR, device_op, dtype_names, marked

    aten = torch.ops.aten

    def composite(x, p):
        """(noise, output): dropout's composite as aten runs it off CUDA (Dropout.cpp, _dropout_impl)."""
        noise = aten.empty_like.default(x)
        aten.bernoulli_.float(noise, 1.0 - p)
        aten.div_.Scalar(noise, 1.0 - p)
        return noise, aten.mul.Tensor(x, noise)

    class Boundary(torch.autograd.Function):
        """Dropout of `x` with probability `p`, recorded by `recorder` as both devices run it (None: not recorded,
        the mask kept as the GPU keeps it); `records`: autograd records the call (Op.autograd_records)."""

        @staticmethod
        def forward(ctx, recorder, records, p, x):
            ctx.recorder, ctx.scale = recorder, 1.0 / (1.0 - p)
            if recorder is None:  # the memory walk: the GPU's one-byte mask is saved, the output as the CPU has it
                ctx.save_for_backward(torch.empty(x.shape, dtype=torch.bool, device=x.device))
                return composite(x, p)[1]
            ctx.label, module_input = recorder.modules[-1] if recorder.modules else ("", None)
            with marked(recorder, paused=True):
                inner = x.detach().requires_grad_(x.requires_grad)
            # the composite's operators, recorded as autograd would record them in a step; its backward, the
            # product's gradient, is run by hand below
            with marked(recorder, runs_on="cpu"), torch.enable_grad():
                ctx.noise, output = composite(inner, p)
            dtype = dtype_names[x.dtype]
            recorder.ops.append(device_op(recorder.phase, FORWARD, [tuple(x.shape)], [tuple(x.shape)] * 2,
                                          [TENSOR, p, True], ctx.label, [dtype], [dtype, "bool"], module_input,
                                          autograd_records=records))
            with marked(recorder, paused=True):
                return output.detach()

        @staticmethod
        def backward(ctx, grad):
            recorder = ctx.recorder
            if recorder is None:
                return None, None, None, grad * ctx.scale
            with marked(recorder, runs_on="cpu"):
                found = aten.mul.Tensor(grad, ctx.noise)
            dtype, shape = dtype_names[grad.dtype], tuple(grad.shape)
            recorder.ops.append(device_op(recorder.phase, BACKWARD, [shape, shape], [shape],
                                          [TENSOR, TENSOR, ctx.scale], ctx.label, [dtype, "bool"], [dtype]))
            return None, None, None, found

    return Boundary


@contextlib.contextmanager
def dropout_as_devices_run(recorder=None):
    """Within the block, torch.nn.functional.dropout (which torch.nn.Dropout, nn.MultiheadAttention and Hugging Face's
    attention call) runs through the boundary above where a GPU fuses it: recorded by `recorder` for both devices, or
    with `recorder` None keeping the GPU's one-byte mask for the backward pass. Put back as it was after."""
    import torch
    import torch.nn.functional as functional

    torchs = functional.dropout
    boundary = _boundary()

    def dropout(input, p=0.5, training=True, inplace=False):
        if (inplace or not training or not 0.0 < p < 1.0 or not isinstance(input, torch.Tensor)
                or not input.is_floating_point() or input.numel() == 0):
            return torchs(input, p, training, inplace)
        return boundary.apply(recorder, torch.is_grad_enabled() and input.requires_grad, p, input)

    functional.dropout = dropout  # the module's global: its own callers (multi_head_attention_forward) see it too
    try:
        yield
    finally:
        functional.dropout = torchs
