"""Scaled dot-product attention as each device runs it. On a CUDA GPU, PyTorch 2's
torch.nn.functional.scaled_dot_product_attention runs one fused kernel each way (flash, memory-efficient or
cuDNN's, chosen by dtype, shape and GPU; on the H100 under torch 2.11, the memory-efficient kernel in fp32 and
cuDNN's in bf16: bench/results/gpu_trace_vs_device_h100.md), the dropout of its weights inside and the score matrix
never written to memory. On the meta device, where the trace runs, it takes the math path instead: the scaled
product of queries and keys, a softmax over the scores, dropout's composite on them, the product with the values.

Traced (prenet.op_trace), each call runs within a boundary (a torch.autograd.Function) that records both: the math
path's operators as they run, marked runs_on="cpu", and the fused kernel each way, marked "cuda", which
op_costs.fused_attention costs as its products; the costing keeps the ones of the device it costs for
(prenet.estimate), as for dropout (prenet.fused_dropout) and recurrent layers (prenet.fused_recurrent). The memory
walk (prenet.memory, a GPU's memory) keeps what the fused kernel saves for its backward pass: the queries, keys and
values, the output and a float32 log-sum-exp of each query's scores, not the weights. Nothing changes for the CPU,
whose predictors cost the math path's operators as before.

`scaled_dot_product_attention` is the function for models written here to call (prenet.reference_models): torch's
where it has one, else (torch 1.13) the math path written out, so that such a model is traced as PyTorch 2 runs
it on a GPU whichever torch traces it."""
import contextlib
import math

# the fused kernel a GPU runs: flash takes 2-byte types without an explicit mask, memory-efficient the rest (cuDNN's,
# which the H100 picks in bf16, is costed the same way: op_costs.fused_attention)
FLASH, EFFICIENT = "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"


def fused_kernel(dtype, masked):
    """The aten name of the forward kernel a CUDA GPU runs for attention over `dtype` tensors (with an explicit
    mask: `masked`)."""
    import torch

    return FLASH if dtype in (torch.float16, torch.bfloat16) and not masked else EFFICIENT


def _math_path(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v with dropout on the weights (Vaswani et al., 2017, eq. 1), as
    scaled_dot_product_attention computes it; the mask is causal, boolean (True: attended) or added to the scores.
    Dropout through torch.dropout, the operator, which a boundary does not take over."""
    import torch

    scores = torch.matmul(query, key.transpose(-1, -2))
    scores = scores / math.sqrt(query.shape[-1]) if scale is None else scores * scale
    if is_causal:  # a query attends to the keys up to its own position
        future = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
    elif attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, torch.finfo(scores.dtype).min) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    weights = torch.softmax(scores, dim=-1).type(value.dtype)
    if dropout_p > 0.0:
        weights = torch.dropout(weights, dropout_p, True)
    return torch.matmul(weights, value)


def _torchs():
    """torch's own scaled_dot_product_attention, or the math path where torch has none (torch 1.13)."""
    import torch.nn.functional as functional

    return getattr(functional, "scaled_dot_product_attention", _math_path)


def _boundary(run):
    """The autograd.Function through which `run` (torch's attention) is traced for both devices."""
    import torch

    from .op_trace import TENSOR, device_op, dtype_names, marked

    class Boundary(torch.autograd.Function):
        """Attention of `query`, `key` and `value` (further arguments as `run` takes them, in `given`), recorded by
        `recorder` as both devices run it, a GPU as the fused `kernel` (None: not recorded, the fused kernel's
        tensors saved); `records`: autograd records the call (Op.autograd_records)."""

        @staticmethod
        def forward(ctx, recorder, records, kernel, given, query, key, value):
            args, kwargs = given
            ctx.recorder, ctx.given = recorder, given
            if recorder is None:  # the memory walk: what the fused kernel keeps, with a log-sum-exp by query
                output = run(query, key, value, *args, **kwargs)
                lse = torch.empty(query.shape[:-1], dtype=torch.float32, device=query.device)
                ctx.save_for_backward(query, key, value, output, lse)
                return output
            ctx.label, module_input = recorder.modules[-1] if recorder.modules else ("", None)
            with marked(recorder, paused=True):
                ctx.inner = [t.detach().requires_grad_(t.requires_grad) for t in (query, key, value)]
            with marked(recorder, runs_on="cpu"), torch.enable_grad():
                ctx.output = run(*ctx.inner, *args, **kwargs)
            ctx.shapes = [tuple(t.shape) for t in (query, key, value, ctx.output)] + [tuple(query.shape[:-1])]
            ctx.dtypes = [dtype_names[t.dtype] for t in (query, key, value, ctx.output)] + ["float32"]
            ctx.kernel = kernel
            recorder.ops.append(device_op(recorder.phase, ctx.kernel + ".default", ctx.shapes[:3], ctx.shapes[3:],
                                          [TENSOR] * 3, ctx.label, ctx.dtypes[:3], ctx.dtypes[3:], module_input,
                                          autograd_records=records))
            with marked(recorder, paused=True):
                return ctx.output.detach()

        @staticmethod
        def backward(ctx, grad):
            recorder = ctx.recorder
            if recorder is None:  # gradients by running the attention again
                inner = [t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors[:3]]
                with torch.enable_grad():
                    output = run(*inner, *ctx.given[0], **ctx.given[1])
                wanted = [t for t in inner if t.requires_grad]
                found = iter(torch.autograd.grad(output, wanted, grad))
            else:
                wanted = [t for t in ctx.inner if t.requires_grad]
                start = len(recorder.ops)
                with marked(recorder, runs_on="cpu"):
                    found = iter(torch.autograd.grad(ctx.output, wanted, grad))
                # autograd.grad's check of the gradient's shape is this boundary's, not the step's
                recorder.ops[start:] = [op for op in recorder.ops[start:] if op.name != "is_same_size.default"]
                shapes, dtypes = ctx.shapes, ctx.dtypes
                recorder.ops.append(device_op(recorder.phase, ctx.kernel + "_backward.default",
                                              [shapes[3]] + shapes[:3] + shapes[3:],
                                              shapes[:3], [TENSOR] * 6, ctx.label, [dtypes[3]] + dtypes,
                                              dtypes[:3]))
                inner = ctx.inner
            return (None,) * 4 + tuple(next(found) if t.requires_grad else None for t in inner)

    return Boundary


def _fusible(query, key, value):
    import torch

    tensors = (query, key, value)
    return (all(isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() >= 3 for t in tensors)
            and all(t.numel() > 0 for t in tensors))


_active = []  # the attention function in use within attention_as_devices_run, innermost last


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """torch.nn.functional.scaled_dot_product_attention's arguments and result, on any torch: torch's own where it
    has one, else the math path; within attention_as_devices_run, through its boundary."""
    run = _active[-1] if _active else _torchs()
    given = {} if scale is None else {"scale": scale}  # torch 2.0's has no `scale`
    return run(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **given)


@contextlib.contextmanager
def attention_as_devices_run(recorder=None):
    """Within the block, torch.nn.functional.scaled_dot_product_attention (where torch has it: nn.MultiheadAttention,
    nn.TransformerEncoderLayer and Hugging Face's "sdpa" attention call it) and scaled_dot_product_attention above
    run through the boundary: recorded by `recorder` for both devices, or with `recorder` None keeping the fused
    kernel's saved tensors for the backward pass. Put back as it was after."""
    import torch
    import torch.nn.functional as functional

    torchs = _active[0].torchs if _active else _torchs()  # within another such block, torch's own still
    boundary = _boundary(torchs)

    def attention(query, key, value, *args, **kwargs):
        mask = kwargs.get("attn_mask", args[0] if args else None)
        if not _fusible(query, key, value) or (isinstance(mask, torch.Tensor) and mask.requires_grad):
            # a learned bias as the mask (relative positions) needs its gradient: the math path, on every device
            return torchs(query, key, value, *args, **kwargs)
        records = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
        kernel = fused_kernel(query.dtype, mask is not None)
        return boundary.apply(recorder, records, kernel, (args, kwargs), query, key, value)

    attention.torchs = torchs
    before = getattr(functional, "scaled_dot_product_attention", None)  # torch's, or an outer block's
    if before is not None:  # the module's global: its own callers (multi_head_attention_forward) see it too
        functional.scaled_dot_product_attention = attention
    _active.append(attention)
    try:
        yield
    finally:
        _active.pop()
        if before is not None:
            functional.scaled_dot_product_attention = before
