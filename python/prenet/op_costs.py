"""What each recorded operator costs: one table from aten operator to the work it does, as a layer kind of the
native table (so its predictor times it) or as memory traffic (an add-shaped kernel moving the same elements).

Views and metadata operators run no kernel. Everything else is counted: an operator this table does not name
is costed by the elements it reads and writes and listed as such, never dropped.
"""
import math
from dataclasses import dataclass

from .fused_recurrent import CPU_OPERATORS, configuration
from .op_trace import ALIGNED_ELEMENTS, TENSOR

# Operators that only make views, allocate or read metadata: no kernel runs (the dispatcher is still paid on the host).
VIEWS = {"view", "_reshape_alias", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze",
         "squeeze", "unsqueeze_", "squeeze_", "slice", "select", "as_strided", "detach", "alias", "split",
         "split_with_sizes", "chunk", "unbind", "empty", "empty_like", "empty_strided", "lift_fresh", "numpy_T",
         "_to_copy_noop", "new_empty", "new_empty_strided", "expand_as", "view_as", "narrow", "unflatten", "flatten",
         "is_same_size", "as_strided_", "t_", "transpose_", "swapaxes", "swapdims", "movedim", "moveaxis",
         "diagonal", "unfold", "view_as_real", "view_as_complex", "_conj", "conj", "_neg_view", "real", "imag",
         # a sparse gradient (an embedding with sparse=True) is wrapped around its indices and values, no copy
         "_sparse_coo_tensor_with_dims_and_tensors", "_indices", "_values", "indices", "values", "_coalesced_",
         "_nnz", "sparse_dim", "dense_dim", "is_coalesced"}


# The 2-byte floating types, by the precision their kernels run in.
NARROW_FLOATS = {"bfloat16": "bf16", "float16": "fp16"}
# Bytes per element by dtype name as op_trace records it; a dtype not named (or not recorded) counts 4.
ITEMSIZE = {"float64": 8, "int64": 8, "complex64": 8, "float32": 4, "int32": 4, "bfloat16": 2, "float16": 2,
            "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
FP32_BYTES = 4


@dataclass
class Work:
    """A piece of device work: `part` ("forward" or "backward") of a layer `kind` with `config`, `count` times;
    `narrow`: the precision ("bf16", "fp16") of the 2-byte floating tensors it runs on (under autocast, or in a
    model whose weights are 2-byte), "" for wider ones; it is costed in that precision."""
    kind: str
    config: dict
    part: str = "forward"
    count: float = 1.0
    how: str = "layer"  # "layer": a layer kind's own predictor; "traffic": elements moved, as an add
    narrow: str = ""
    kernels: int = 1  # library calls the host issues for it, each paying its kind's launch gap
    # a matrix product's: the elements its matrices are aligned to (Op.matrix_alignment)
    alignment: int = ALIGNED_ELEMENTS


def numel(shape):
    return math.prod(shape) if shape else 1


# The add kind's longest row (kMaxSize, cpp/src/kinds/kinds.hpp; tests/test_predict.py checks the two agree).
ADD_ROW_LIMIT = 2 ** 31


def traffic(elements):
    """An add-shaped kernel moving `elements` 4-byte elements (an add moves 3 per output element), in rows of at
    most ADD_ROW_LIMIT (as kinds::streaming_add makes them natively)."""
    outputs = max(1, math.ceil(elements / 3))
    rows = math.ceil(outputs / ADD_ROW_LIMIT)
    return Work("add", {"batch": rows, "features": math.ceil(outputs / rows)}, how="traffic")


def _tensors(op):
    """(shape, dtype name or None) of every tensor the op reads and writes."""
    dtypes_in = op.input_dtypes or [None] * len(op.inputs)
    dtypes_out = op.output_dtypes or [None] * len(op.outputs)
    return [(s, d) for s, d in zip(op.inputs, dtypes_in)] + [
        (s, d) for s, d in zip(op.outputs, dtypes_out) if s is not None]


def _bytes(shape, dtype):
    """Bytes of a tensor of `shape` at its recorded element size."""
    return numel(shape) * ITEMSIZE.get(dtype, FP32_BYTES)


def moved_bytes(op):
    """Bytes of every tensor the op reads and writes, at their recorded element sizes."""
    return sum(_bytes(s, d) for s, d in _tensors(op))


def narrow_precision(op):
    """"bf16" or "fp16" where the op's floating tensors are mostly (by elements) of that 2-byte type: a kernel of
    that type; else ""."""
    names = [NARROW_FLOATS[d] for d in (*op.input_dtypes, *op.output_dtypes) if d in NARROW_FLOATS]
    if not names:
        return ""
    floating = [(numel(s), ITEMSIZE[d]) for s, d in _tensors(op) if d and d.startswith(("float", "bfloat"))]
    elements = sum(n for n, _ in floating)
    if not elements or sum(n * size for n, size in floating) >= 3 * elements:
        return ""
    return max(sorted(set(names)), key=names.count)


def convolution_work(x, w, out, stride, padding, dilation, transposed, groups, bias, channels_last,
                     part="forward", count=1.0, kernels=1):
    """A convolution's Work from its input, weight and output shapes: the conv2d kind where that describes it
    (two-dimensional, not transposed, no dilation, a square kernel, stride and padding), else the general
    convolution kind by its positions (exact multiply-adds). `padding`: None where it is not a number per side
    (a module's "same", or a padding mode that pads the input before the convolution)."""
    if len(x) == len(w) - 1:  # an unbatched input
        x, out = (1, *x), (1, *out)
    if (len(x) == 4 and not transposed and set(dilation) == {1} and w[2] == w[3] and len(set(stride)) == 1
            and padding is not None and len(set(padding)) == 1):
        return Work("conv2d", {"batch": x[0], "in_channels": x[1], "out_channels": w[0], "kernel_size": w[2],
                               "stride": stride[0], "padding": padding[0], "height": x[2], "width": x[3],
                               "groups": groups, "bias": int(bias), "channels_last": int(channels_last)},
                    part, count, kernels=kernels)
    return Work("convolution", {"batch": x[0], "in_channels": x[1], "out_channels": out[1],
                                "in_positions": numel(x[2:]), "out_positions": numel(out[2:]),
                                "kernel_positions": numel(w[2:]), "groups": groups, "transposed": int(transposed),
                                "bias": int(bias), "channels_last": int(channels_last)}, part, count, kernels=kernels)


def convolution(op):
    _, _, bias, stride, padding, dilation, transposed, _, groups = op.arguments[:9]
    return convolution_work(op.inputs[0], op.inputs[1], op.outputs[0], stride, padding, dilation, transposed,
                            groups, bias == TENSOR, op.channels_last)


def convolution_backward(op):
    dy, x, w = op.inputs[:3]
    bias_sizes, stride, padding, dilation, transposed, _, groups, mask = op.arguments[3:11]
    # The composed backward has an input- and a weight-gradient convolution, each its own library call; the first
    # layer needs no dX.
    return convolution_work(x, w, dy, stride, padding, dilation, transposed, groups, bool(mask[2]),
                            op.channels_last, "backward", 1.0 if mask[0] else 0.5,
                            kernels=int(bool(mask[0])) + int(bool(mask[1])))


def addmm(op):
    _, a, b = op.inputs[:3]
    return Work("linear", {"batch": 1, "seq_len": a[0], "in_features": a[1], "out_features": b[1], "bias": 1},
                alignment=op.matrix_alignment)


def mm(op):
    a, b = op.inputs[:2]
    return Work("linear", {"batch": 1, "seq_len": a[0], "in_features": a[1], "out_features": b[1], "bias": 0},
                alignment=op.matrix_alignment)


def bmm(op):
    a, b = op.inputs[-2:]  # baddbmm has the added tensor first
    return Work("bmm", {"batch": a[0], "m": a[1], "k": a[2], "n": b[2]}, alignment=op.matrix_alignment)


def _layer_norm(x, normalized, affine, part):
    n = numel(normalized)
    return Work("layer_norm", {"batch": numel(x) // n, "normalized_shape": n, "elementwise_affine": int(affine)}, part)


def layer_norm(op):
    return _layer_norm(op.inputs[0], op.arguments[1], op.arguments[2] == TENSOR, "forward")


def layer_norm_backward(op):
    return _layer_norm(op.inputs[1], op.arguments[2], op.arguments[5] == TENSOR, "backward")


def _batch_norm(x, part):
    spatial = numel(x[2:])
    return Work("batchnorm2d", {"batch": x[0], "channels": x[1] if len(x) > 1 else 1, "height": spatial, "width": 1},
                part)


def _pool(kind, x, arguments, part):
    """Pooling from aten's (kernel_size, stride=[] meaning kernel_size, padding=0, ...) positional arguments."""
    def pair(value):
        return list(value) * (2 if len(value) == 1 else 1) if isinstance(value, (list, tuple)) else [value, value]

    kernel = pair(arguments[0])
    stride = pair(arguments[1]) if len(arguments) > 1 and arguments[1] else kernel
    padding = pair(arguments[2]) if len(arguments) > 2 else [0, 0]
    if len(x) != 4 or len(set(kernel)) != 1 or len(set(stride)) != 1 or len(set(padding)) != 1:
        return None
    return Work(kind, {"batch": x[0], "channels": x[1], "height": x[2], "width": x[3], "kernel_size": kernel[0],
                       "stride": stride[0], "padding": padding[0]}, part)


def _adaptive(x, out, part):
    if len(x) != 4 or x[2] % out[-2] or x[3] % out[-1] or x[2] // out[-2] != x[3] // out[-1]:
        return None
    k = x[2] // out[-2]
    return Work("avgpool2d", {"batch": x[0], "channels": x[1], "height": x[2], "width": x[3], "kernel_size": k,
                              "stride": k, "padding": 0}, part)


def _rows(kind, shape, part, dim=-1):
    features = shape[dim] if shape else 1
    return Work(kind, {"batch": max(1, numel(shape) // max(1, features)), "features": features}, part)


def pointwise(kind, part, which=0):
    return lambda op: Work(kind, {"batch": 1, "features": numel(op.inputs[which])}, part)


def add(op):
    if len(op.inputs) == 2 and op.inputs[0] == op.inputs[1]:
        return Work("add", {"batch": 1, "features": numel(op.inputs[0])})
    return None  # a broadcast or scalar add: costed by traffic


def embedding(op):
    weight, indices = op.inputs[:2]
    return Work("embedding", {"batch": 1, "seq_len": numel(indices), "num_embeddings": weight[0],
                              "embedding_dim": weight[1]})


def embedding_backward(op):
    grad, indices = op.inputs[:2]
    return Work("embedding", {"batch": 1, "seq_len": numel(indices), "num_embeddings": op.arguments[2],
                              "embedding_dim": grad[-1]}, "backward")


def gathered(op):
    """index_select and gather: they read the rows (elements) their output holds and the indices, not the whole
    table they select from, and write the output."""
    tensors = _tensors(op)
    index, out = tensors[1], tensors[len(op.inputs)]
    return traffic((2 * _bytes(*out) + _bytes(*index)) / FP32_BYTES)


def nll_loss(op):
    """The negative log-likelihood of a cross-entropy (nll_loss_forward): it reads one log-probability per row (the
    label's) and the labels, not the whole (rows, classes) input, and writes the loss."""
    tensors = _tensors(op)
    (rows_shape, dtype), labels = tensors[0], tensors[1]
    return traffic((_bytes(rows_shape[:1], dtype) + _bytes(*labels)) / FP32_BYTES)


def nll_loss_backward(op):
    """Its gradient (nll_loss_backward(grad_output, input, target, ...)): the whole (rows, classes) gradient
    written (zeros, then one value per row from the labels, which are read)."""
    tensors = _tensors(op)
    labels, gradient = tensors[2], tensors[len(op.inputs)]
    return traffic((_bytes(*gradient) + _bytes(*labels)) / FP32_BYTES)


def embedding_bag(op):
    """An embedding bag reads the rows its indices select (not the whole table) and the indices, and writes its
    outputs (the bags and their bookkeeping)."""
    tensors = _tensors(op)
    (weight, dtype), indices = tensors[:2]
    rows = _bytes((numel(indices[0]), weight[-1]), dtype)
    written = sum(_bytes(*t) for t in tensors[len(op.inputs):])
    return traffic((rows + _bytes(*indices) + written) / FP32_BYTES)


def fused_attention(part):
    """PyTorch 2's fused attention (scaled_dot_product_attention's flash, memory-efficient, cuDNN and CPU
    kernels; torch 1.13 has none and runs it as matmul and softmax; prenet.fused_attention): its two products,
    Q K^T (L x E by E x S per batch and head) and P V (L x S by S x E_v), as that many batched products of the
    first's shape; the backward as their gradients and the scores computed again, which these kernels do instead of
    keeping them (FlashAttention-2, Dao 2023, sec. 3.1: five products backward, two forward): one product more,
    half of one product's gradient. The query, key and value are the first three tensors of the forward, the second
    to fourth of the backward (after dY)."""
    first = 0 if part == "forward" else 1
    recomputed = 0.5 if part == "backward" else 0.0

    def rule(op):
        q, k, v = op.inputs[first:first + 3]
        if len(q) < 3 or len(k) != len(q) or len(v) != len(q):
            return None
        heads = numel(q[:-2])
        return Work("bmm", {"batch": heads, "m": q[-2], "k": q[-1], "n": k[-2]}, part,
                    1.0 + v[-1] / q[-1] + recomputed)
    return rule


FUSED_ATTENTION = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                   "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")


def recurrent(part=None):
    """A recurrent layer as one operator (prenet.fused_recurrent: cuDNN's call each way, or the CPU's layer operator,
    of the `part` its phase is where `part` is None): its kind, configured from the operator's arguments and its
    input's shape ((batch, steps, features) batch first, else (steps, batch, features))."""
    def rule(op):
        return Work(*configuration(op.arguments, op.inputs[0]), part or op.phase)
    return rule


# aten operator (overload packet) -> the work it does; None from a rule means "costed by traffic".
RULES = {
    "convolution": convolution, "convolution_backward": convolution_backward,
    "addmm": addmm, "mm": mm, "bmm": bmm, "baddbmm": bmm,
    "native_layer_norm": layer_norm, "native_layer_norm_backward": layer_norm_backward,
    "native_batch_norm": lambda op: _batch_norm(op.inputs[0], "forward"),
    "_native_batch_norm_legit": lambda op: _batch_norm(op.inputs[0], "forward"),
    "native_batch_norm_backward": lambda op: _batch_norm(op.inputs[1], "backward"),
    "max_pool2d_with_indices": lambda op: _pool("maxpool2d", op.inputs[0], op.arguments[1:], "forward"),
    "max_pool2d_with_indices_backward": lambda op: _pool("maxpool2d", op.inputs[1], op.arguments[2:], "backward"),
    "avg_pool2d": lambda op: _pool("avgpool2d", op.inputs[0], op.arguments[1:], "forward"),
    "avg_pool2d_backward": lambda op: _pool("avgpool2d", op.inputs[1], op.arguments[2:], "backward"),
    "_adaptive_avg_pool2d": lambda op: _adaptive(op.inputs[0], op.outputs[0], "forward"),
    "_adaptive_avg_pool2d_backward": lambda op: _adaptive(op.inputs[1], op.inputs[0], "backward"),
    "relu": pointwise("relu", "forward"), "relu_": pointwise("relu", "forward"),
    "threshold_backward": pointwise("relu", "backward"),
    "hardtanh": pointwise("relu", "forward"), "hardtanh_": pointwise("relu", "forward"),
    "hardtanh_backward": pointwise("relu", "backward"),
    "gelu": pointwise("gelu", "forward"), "gelu_": pointwise("gelu", "forward"),
    "gelu_backward": pointwise("gelu", "backward"),
    "tanh": pointwise("tanh", "forward"), "tanh_": pointwise("tanh", "forward"),
    "tanh_backward": pointwise("tanh", "backward"),
    "sigmoid": pointwise("sigmoid", "forward"), "sigmoid_": pointwise("sigmoid", "forward"),
    "sigmoid_backward": pointwise("sigmoid", "backward"),
    "silu": pointwise("silu", "forward"), "silu_": pointwise("silu", "forward"),
    "silu_backward": pointwise("silu", "backward"),
    "_softmax": lambda op: _rows("softmax", op.inputs[0], "forward", op.arguments[1]),
    "_log_softmax": lambda op: _rows("softmax", op.inputs[0], "forward", op.arguments[1]),
    "_softmax_backward_data": lambda op: _rows("softmax", op.inputs[0], "backward", op.arguments[2]),
    "_log_softmax_backward_data": lambda op: _rows("softmax", op.inputs[0], "backward", op.arguments[2]),
    "add": add, "add_": add,
    "embedding": embedding, "embedding_dense_backward": embedding_backward,
    "_cudnn_rnn": recurrent("forward"), "_cudnn_rnn_backward": recurrent("backward"),
    **{name: recurrent() for name in CPU_OPERATORS.values()},
    "index_select": gathered, "gather": gathered, "_embedding_bag": embedding_bag,
    "nll_loss_forward": nll_loss, "nll_loss_backward": nll_loss_backward,
    "_embedding_bag_forward_only": embedding_bag,
    **{name: fused_attention("forward") for name in FUSED_ATTENTION},
    **{f"{name}_backward": fused_attention("backward") for name in FUSED_ATTENTION},
}


def work_of(op):
    """The Work of one recorded op, or None for a view (no kernel). Traffic is counted in bytes at each tensor's
    element size (a cast to bf16 reads 4 and writes 2 bytes per element); a layer kind on 2-byte tensors is
    marked `narrow`."""
    base = op.name.split(".")[0]
    if base in VIEWS:
        return None
    rule = RULES.get(base)
    found = rule(op) if rule else None
    if found is not None:
        if found.how != "traffic":  # traffic is counted at each tensor's own element size already
            found.narrow = narrow_precision(op)
        return found
    return traffic(moved_bytes(op) / FP32_BYTES)
