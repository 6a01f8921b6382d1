"""CUDA autocast's casting rules, replayed on the CPU while a training step is traced, so that the recorded
operators carry the dtypes, and the casts, that `torch.autocast("cuda", dtype=...)` would give them on a GPU.

PyTorch's CPU autocast follows other lists (and its float16 support on the CPU is partial), so the rules are
applied here at the level of torch functions, before autograd records them, exactly where CUDA autocast applies
them: the lists are those of PyTorch's documentation ("Automatic Mixed Precision package", CUDA op-specific
behavior). Both float16 and bfloat16 use the same lists; the trace runs in bfloat16 (the CPU supports it), whose
element size is float16's. As in CUDA autocast, the low-precision copy of a parameter is made once per step, and
the backward pass runs outside the rules, in the dtypes the forward pass left.

CUDA autocast casts at the dispatcher, so it reaches the operators inside composite functions too (the products of
F.multi_head_attention_forward, which nn.MultiheadAttention and nn.TransformerEncoderLayer train with). A
TorchFunctionMode is off while it handles a call, so the calls a Python-level composite makes would pass it by: such
a function's body is run here with the rules on (COMPOSITE_MODULES, _unguarded).
"""
import functools
import types

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

# Run in the low-precision type: every floating input is cast to it.
LOWER_PRECISION = {
    "__matmul__", "__rmatmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "multi_dot",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "linear", "matmul",
    "mm", "mv", "prelu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "einsum",
    # Whole recurrent layers (nn.LSTM, nn.GRU, nn.RNN call these): CUDA autocast casts cuDNN's RNN inputs and
    # weights to the low-precision type as well (aten/src/ATen/native/cudnn/AutocastRNN.cpp).
    "lstm", "gru", "rnn_tanh", "rnn_relu",
    # PyTorch 2's fused attention (aten/src/ATen/autocast_mode.cpp lists it with the lower-precision kernels)
    "scaled_dot_product_attention",
}
# Run in float32: low-precision floating inputs are cast up.
FLOAT32 = {
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin", "binary_cross_entropy_with_logits", "cosh",
    "cosine_embedding_loss", "cdist", "cosine_similarity", "cross_entropy", "dist", "erfinv", "exp", "expm1",
    "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm", "log", "log10", "log1p", "log2",
    "margin_ranking_loss", "mse_loss", "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm",
    "normalize", "pdist", "poisson_nll_loss", "pow", "reciprocal", "rsqrt", "sinh", "smooth_l1_loss",
    "soft_margin_loss", "softplus", "renorm", "tan", "triplet_margin_loss",
}
# Reductions autocast runs in float32 by asking for a float32 result (no separate cast kernel).
FLOAT32_OUTPUT = {"softmax", "log_softmax", "softmin", "sum", "prod", "cumsum", "cumprod"}
# Run in the widest floating type among the inputs.
PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "scatter_add",
           "tensordot"}

TRACE_DTYPE = torch.bfloat16
# Modules whose Python functions are composites of other torch functions, run with the rules on inside them.
COMPOSITE_MODULES = ("torch.nn.functional", "torch.functional")
# What such a function asks before handing a call to a mode or a tensor subclass (torch.overrides)
HANDLER_CHECKS = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
# Tensors the rules apply to as they are: a subclass with a __torch_function__ of its own keeps its composites whole
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _floating(value):
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


def _composite(func, types_):
    """Whether `func` is a Python-level composite whose body is to run with the rules on (COMPOSITE_MODULES), on
    plain tensors."""
    return (isinstance(func, types.FunctionType) and func.__module__ in COMPOSITE_MODULES and
            all(t in PLAIN_TENSORS for t in types_))


def _no_handler(*_):
    return False


@functools.lru_cache(maxsize=None)
def _unguarded_copy(func):
    """(copy of the Python function `func`, the globals it reads), made once per function."""
    scope = {}
    copy = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    return copy, scope


def _unguarded(func):
    """A copy of the Python function `func` whose checks for a __torch_function__ handler (HANDLER_CHECKS) answer
    no, so that its body runs instead of handing the call back to the mode, with the names of its module as they are
    at this call: a boundary standing in for one of them (prenet.fused_dropout's dropout) is the current trace's,
    not the one in place when the copy was made (a copy of the names at the first call had sent later traces'
    dropout and attention to the first trace's recorder)."""
    copy, scope = _unguarded_copy(func)
    scope.update(func.__globals__)
    scope.update((name, _no_handler) for name in HANDLER_CHECKS)
    return copy


class CudaAutocast(TorchFunctionMode):
    """Within it, torch functions see their inputs cast as CUDA autocast would cast them (to TRACE_DTYPE)."""

    def __init__(self):
        super().__init__()
        self._parameter_copies = {}  # id(parameter) -> (parameter, its low-precision copy) for this step
        # composites whose bodies run here now: one that comes back (a function that hands its call to another
        # name, as F.max_pool2d's flag does) runs as it is
        self._composites_running = set()

    def _to(self, tensor, dtype):
        if tensor.dtype == dtype:
            return tensor
        if dtype == TRACE_DTYPE and tensor.is_leaf and tensor.requires_grad:
            kept = self._parameter_copies.get(id(tensor))
            if kept is None:
                kept = self._parameter_copies[id(tensor)] = (tensor, tensor.to(dtype))
            return kept[1]
        return tensor.to(dtype)

    def _cast(self, args, kwargs, dtype):
        def cast(value):
            return self._to(value, dtype) if _floating(value) else value
        return tree_map(cast, args), tree_map(cast, kwargs)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in LOWER_PRECISION:
            args, kwargs = self._cast(args, kwargs, TRACE_DTYPE)
        elif name in FLOAT32:
            args, kwargs = self._cast(args, kwargs, torch.float32)
        elif name in FLOAT32_OUTPUT:
            if args and _floating(args[0]) and args[0].dtype != torch.float32 and kwargs.get("dtype") is None:
                kwargs = {**kwargs, "dtype": torch.float32}
        elif name in PROMOTE:
            dtypes = [v.dtype for v in list(args) + list(kwargs.values()) if _floating(v)]
            if dtypes:
                args, kwargs = self._cast(args, kwargs, max(dtypes, key=lambda d: torch.finfo(d).bits))
        elif _composite(func, types) and func not in self._composites_running:
            self._composites_running.add(func)
            try:
                with self:  # its own calls meet the rules, as they meet CUDA autocast
                    return _unguarded(func)(*args, **kwargs)
            finally:
                self._composites_running.discard(func)
        return func(*args, **kwargs)
