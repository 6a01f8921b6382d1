"""A model's training step run on PyTorch's meta device: every operator sees tensors with real shapes and dtypes
and no data, so tracing costs the dispatch of each operator and nothing of its arithmetic, at any batch size.

`weights_on_meta(model)` gives every parameter and buffer a data-less twin for the duration of a block (the user's
tensors, gradients and BatchNorm statistics are left untouched) and puts the originals back after it, also when the
block fails. Where the installed PyTorch has no meta kernel for an operator a training step uses (torch 1.13 lacks
several backward ones and a few forward ones such as 3-d max pooling, fails on torch.cdist's arguments, gives batch
norm's weight gradients the wrong dtype and runs batch norm through a slow Python decomposition),
`MISSING_META_KERNELS` gives its output shapes and dtypes from those of its inputs; an operator missing from both
raises, and the caller traces with real tensors instead.
"""
import contextlib
import weakref

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


def _per_dimension(value, dims, default=None):
    """A pooling argument (an int, or a list of one or `dims` ints; empty for the default) as `dims` ints."""
    if isinstance(value, int):
        return [value] * dims
    value = list(value) or list(default)
    return value * dims if len(value) == 1 else value


def _max_pool3d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """(output, int64 indices) of a 3-d max pooling: per spatial size x, (x + 2p - d(k - 1) - 1) / s + 1 rounded
    down, or up with ceil_mode, where a last window starting inside the right padding is dropped (PyTorch's
    MaxPool3d documentation and pooling_output_shape)."""
    kernel = _per_dimension(kernel_size, 3)
    stride, padding = _per_dimension(stride, 3, kernel), _per_dimension(padding, 3)
    dilation = _per_dimension(dilation, 3)
    sizes = []
    for x, k, s, p, d in zip(input.shape[-3:], kernel, stride, padding, dilation):
        span = x + 2 * p - d * (k - 1) - 1
        out = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= x + p:
            out -= 1
        sizes.append(out)
    if min(sizes) < 1:
        raise RuntimeError(f"max_pool3d of input {tuple(input.shape)} with kernel {kernel}: output size {sizes}")
    shape = (*input.shape[:-3], *sizes)
    return _empty(shape, input), torch.empty(shape, dtype=torch.int64, device="meta")


def _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights, *rest):
    """The gradient of an embedding bag's table: num_weights rows of the bags' width, in the gradient's dtype."""
    return _empty((num_weights, grad.shape[-1]), grad)


def _like_first(input, *rest, **options):
    """An elementwise operator, or a backward whose gradient has the shape of its first argument: that shape."""
    return _empty(input.shape, input, (input,))


def _like_second(grad_output, input, *rest):
    """A backward whose gradient has the shape of the forward's input, its second argument (rrelu's, nll_loss2d's,
    smooth_l1_loss's)."""
    return _empty(input.shape, grad_output, (input,))


def _grid_sampler_2d_backward(grad_output, input, grid, interpolation, padding, align_corners, output_mask):
    """(grad of input where output_mask asks for it, grad of grid): their shapes (native_functions.yaml)."""
    return (_empty(input.shape, grad_output, (input,)) if output_mask[0] else None, _empty(grid.shape, grid))


def _weight_norm_interface(v, g, dim=0):
    """(w = g v / ||v||, the norms): w has v's shape, the norms g's (torch.nn.utils.weight_norm), in float32 for a
    2-byte v (WeightNorm.cpp's accumulation type)."""
    norms = torch.float32 if v.element_size() < 4 else v.dtype
    return _empty(v.shape, v), torch.empty(g.shape, dtype=norms, device="meta")


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    """(grad of v, grad of g): the shapes and dtypes of v and g."""
    return _empty(saved_v.shape, saved_v), _empty(saved_g.shape, saved_g)


def _nll_loss2d_forward(input, target, weight, reduction, ignore_index):
    """(loss, total weight): the loss per pixel (target's shape) for reduction none (0), else a scalar."""
    return _empty(target.shape if reduction == 0 else (), input), _empty((), input)


def _cdist_forward(x1, x2, p, compute_mode):
    """Pairwise distances of the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R) (torch.cdist); torch 1.13's
    meta kernel fails on the compute_mode None that torch.cdist passes."""
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return _empty((*batch, x1.shape[-2], x2.shape[-2]), x1)


def _cdist_backward(grad, x1, x2, p, distances):
    """The gradient of x1 (torch.cdist's backward is taken for each input in turn): x1's shape."""
    return _empty(x1.shape, grad, (x1,))


# aten operator -> its outputs from its arguments, for operators whose meta kernel this PyTorch lacks, gets the
# dtypes wrong or runs slowly.
MISSING_META_KERNELS = {
    aten.convolution.default: _convolution,
    aten.convolution_backward.default: _convolution_backward,
    aten.native_batch_norm.default: _batch_norm,
    aten.native_batch_norm_backward.default: _batch_norm_backward,
    aten._adaptive_avg_pool2d_backward.default: _like_input,
    aten.max_pool3d_with_indices.default: _max_pool3d_with_indices,
    aten.max_pool3d_with_indices_backward.default: _like_input,
    aten._embedding_bag_dense_backward.default: _embedding_bag_dense_backward,
    aten.grid_sampler_2d_backward.default: _grid_sampler_2d_backward,
    aten.rrelu_with_noise.default: _like_first,
    aten.rrelu_with_noise_backward.default: _like_second,
    aten._weight_norm_interface.default: _weight_norm_interface,
    aten._weight_norm_interface_backward.default: _weight_norm_interface_backward,
    aten.nll_loss2d_forward.default: _nll_loss2d_forward,
    aten.nll_loss2d_backward.default: _like_second,
    aten._cdist_forward.default: _cdist_forward,
    aten._cdist_backward.default: _cdist_backward,
    aten.smooth_l1_loss_backward.default: _like_second,
}


def meta_kernel(func):
    """What runs the operator `func` on meta tensors: its MISSING_META_KERNELS rule where it has one (tried before
    PyTorch's own: a failed dispatch costs milliseconds, as PyTorch records a backtrace for every error), else
    `func` itself."""
    return MISSING_META_KERNELS.get(func, func)


# id of a tensor -> (a weak reference to it, its layout, its meta twin): twins kept from one trace to the next, as
# making them is most of what putting a model's weights on meta costs; an entry goes with its tensor
_twins = {}


def meta_twin(tensor):
    """A data-less tensor of `tensor`'s shape, strides and dtype (a Parameter for a Parameter, keeping
    requires_grad, without a gradient); the one made for `tensor` before where its layout is unchanged."""
    parameter = isinstance(tensor, torch.nn.Parameter)
    layout = (tensor.shape, tensor.stride(), tensor.dtype, tensor.requires_grad, parameter)
    key = id(tensor)
    kept = _twins.get(key)
    if kept is not None and kept[0]() is tensor and kept[1] == layout:
        twin = kept[2]
        if parameter:
            twin.grad = None  # left by the last trace's backward pass
        return twin
    twin = torch.empty_like(tensor, device="meta")
    if parameter:
        twin = torch.nn.Parameter(twin, requires_grad=tensor.requires_grad)
    _twins[key] = (weakref.ref(tensor, lambda _, key=key: _twins.pop(key, None)), layout, twin)
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
