"""A model's training step run on PyTorch's meta device: every operator sees tensors with real shapes and dtypes
and no data, so tracing costs the dispatch of each operator and nothing of its arithmetic, at any batch size.

`weights_on_meta(model)` gives every parameter and buffer a data-less twin for the duration of a block (the user's
tensors, gradients and BatchNorm statistics are left untouched) and puts the originals back after it, also when the
block fails. Where the installed PyTorch has no meta kernel for an operator a training step uses (torch 1.13 lacks
several backward ones, gives batch norm's weight gradients the wrong dtype and runs batch norm through a slow
Python decomposition), `MISSING_META_KERNELS` gives its output shapes and dtypes from those of its inputs; an
operator missing from both raises, and the caller traces with real tensors instead.
"""
import contextlib

import torch

aten = torch.ops.aten


def channels_last(tensor):
    """Whether a 4-d tensor is laid out channels_last (NHWC) and not also plain contiguous (a tensor with one
    channel or a 1x1 plane is both, and counts as contiguous)."""
    return (tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last) and
            not tensor.is_contiguous())


def _empty(like_shape, like, layout_of=()):
    """A meta tensor of `like`'s dtype, channels_last where any tensor of `layout_of` is (as PyTorch's convolution
    and normalisation kernels suggest their outputs' format from their inputs')."""
    nhwc = len(like_shape) == 4 and any(channels_last(t) for t in layout_of if t is not None)
    return torch.empty(like_shape, dtype=like.dtype, device="meta",
                       memory_format=torch.channels_last if nhwc else torch.contiguous_format)


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The output of a 1-, 2- or 3-d convolution: per spatial size x, (x + 2p - d(k - 1) - 1) // s + 1, or for a
    transposed one (x - 1)s - 2p + d(k - 1) + output_padding + 1 (PyTorch's Conv and ConvTranspose
    documentation); in place of meta_conv, which spends most of a trace deciding a memory layout."""
    sizes = []
    for i, x in enumerate(input.shape[2:]):
        k, s, p, d = weight.shape[2 + i], stride[i], padding[i], dilation[i]
        sizes.append((x - 1) * s - 2 * p + d * (k - 1) + output_padding[i] + 1 if transposed else
                     (x + 2 * p - d * (k - 1) - 1) // s + 1)
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if (input.shape[1] != (weight.shape[0] if transposed else weight.shape[1] * groups)) or min(sizes, default=1) < 1:
        raise RuntimeError(f"convolution of input {tuple(input.shape)} with weight {tuple(weight.shape)}: channels or "
                           "sizes do not fit")
    return _empty((input.shape[0], channels, *sizes), input, (input, weight))


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    """(grad of input, of weight, of bias), each where output_mask asks for it: the shapes of input, weight and
    bias (aten/src/ATen/native/native_functions.yaml, convolution_backward)."""
    shapes = (input.shape, weight.shape, tuple(bias_sizes) if bias_sizes is not None else (0,))
    layouts = ((input,), (weight,), ())
    return tuple(_empty(shape, grad_output, layout) if wanted else None
                 for shape, layout, wanted in zip(shapes, layouts, output_mask))


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, saved mean, saved inverse deviation): the input's shape and dtype; per channel in float32 for a
    2-byte input (the accumulation type), else the input's dtype, and empty in evaluation mode (PyTorch's CPU
    kernel; torch 1.13 has only a slow Python decomposition on meta tensors)."""
    saved = torch.float32 if input.element_size() < 4 else input.dtype
    channels = (input.shape[1],) if training else (0,)
    return (_empty(input.shape, input, (input,)), torch.empty(channels, dtype=saved, device="meta"),
            torch.empty(channels, dtype=saved, device="meta"))


def _batch_norm_backward(grad_output, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                         eps, output_mask):
    """(grad of input, of weight, of bias): the input's shape and dtype, the weight's for the other two (torch
    1.13's meta decomposition gives them the input's dtype, which under autocast is not the weight's)."""
    channels = (input.shape[1],)
    outputs = (_empty(input.shape, input, (input,)),
               _empty(channels, weight if weight is not None else input),
               _empty(channels, weight if weight is not None else input))
    return tuple(out if wanted else None for out, wanted in zip(outputs, output_mask))


def _like_input(grad_output, input, *rest):
    """A pooling or upsampling backward: the gradient of its input has the input's shape."""
    return _empty(input.shape, grad_output, (input,))


# aten operator -> its outputs from its arguments, for operators whose meta kernel this PyTorch lacks, gets the
# dtypes wrong or runs slowly.
MISSING_META_KERNELS = {
    aten.convolution.default: _convolution,
    aten.convolution_backward.default: _convolution_backward,
    aten.native_batch_norm.default: _batch_norm,
    aten.native_batch_norm_backward.default: _batch_norm_backward,
    aten._adaptive_avg_pool2d_backward.default: _like_input,
}


def run_on_meta(func, args, kwargs):
    """`func(*args, **kwargs)` on meta tensors, through MISSING_META_KERNELS where the operator is listed (tried
    first: a failed dispatch costs milliseconds, as PyTorch records a backtrace for every error)."""
    rule = MISSING_META_KERNELS.get(func)
    return rule(*args, **kwargs) if rule is not None else func(*args, **kwargs)


def meta_twin(tensor):
    """A data-less tensor of `tensor`'s shape and dtype (a Parameter for a Parameter, keeping requires_grad)."""
    twin = torch.empty_like(tensor, device="meta")
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(twin, requires_grad=tensor.requires_grad)
    return twin


def to_meta(value):
    """A model's inputs (prenet.model_inputs) as meta tensors of the same shapes and dtypes."""
    from .model_inputs import map_tensors

    return map_tensors(lambda tensor: tensor.to("meta"), value)


@contextlib.contextmanager
def weights_on_meta(model):
    """Within the block, every parameter and buffer of `model` is a meta twin (one twin per tensor, so tied
    weights stay tied)."""
    twins, swapped = {}, []
    try:
        for module in model.modules():
            # a recurrent layer keeps its own list of its weights, which setattr updates; elsewhere the tensor is
            # set in place (setattr re-registers, at several times the cost)
            recurrent = isinstance(module, torch.nn.RNNBase)
            for store in (module._parameters, module._buffers):
                for name, tensor in list(store.items()):
                    if tensor is None:
                        continue
                    if id(tensor) not in twins:
                        twins[id(tensor)] = meta_twin(tensor)
                    swapped.append((module, store, name, tensor, recurrent))
                    _put(module, store, name, twins[id(tensor)], recurrent)
        yield model
    finally:
        for module, store, name, tensor, recurrent in reversed(swapped):
            _put(module, store, name, tensor, recurrent)


def _put(module, store, name, tensor, recurrent):
    if recurrent:
        setattr(module, name, tensor)
    else:
        store[name] = tensor
