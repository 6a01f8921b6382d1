"""The feature table of a whole PyTorch model: one row per call of every leaf module.

The model runs once on a batch-1 input (eval mode) so that forward hooks see every module's real
input and output shapes; the features are then computed natively for the requested batch size. Modules that
no layer kind of the table covers yet are listed with a note, never dropped. Module hooks see modules only:
operations written as functions (a residual `out += identity`, `torch.matmul` in hand-written attention) are
outside this table; the per-operation walk of the predictor counts them.
"""
import contextlib
import functools
import math

from .catalog import find_gpu
from .fused_recurrent import arguments_of, configuration
from .layers import layer_features
from .lazy_modules import initialized
from .model_inputs import call, input_maker, map_tensors, module_label, rejected
from .model_state import forwards_replaced, in_mode
from .sync_batchnorm import as_on_one_gpu


def _linear(module, inputs, output):
    x = inputs[0]
    return "linear", {"seq_len": math.prod(x.shape[1:-1]), "in_features": module.in_features,
                      "out_features": module.out_features, "bias": module.bias is not None}


def _convolution(module, inputs, output):
    """conv2d or the general convolution kind (prenet.op_costs.convolution_work), as the predictor maps it."""
    from .meta_model import channels_last
    from .op_costs import convolution_work

    padding = None if isinstance(module.padding, str) or module.padding_mode != "zeros" else module.padding
    work = convolution_work(tuple(inputs[0].shape), tuple(module.weight.shape), tuple(output.shape), module.stride,
                            padding, module.dilation, module.transposed, module.groups, module.bias is not None,
                            channels_last(inputs[0]))
    return work.kind, {key: value for key, value in work.config.items() if key != "batch"}


def _recurrent(module, inputs, output):
    x = inputs[0]
    if not hasattr(x, "shape") or getattr(module, "proj_size", 0):  # a PackedSequence (lengths vary), projections
        return None
    kind, config = configuration(arguments_of(module), tuple(x.shape))  # as the predictor configures it
    return kind, {key: value for key, value in config.items() if key != "batch"}


def _attention(module, inputs, output):
    query, key, value = inputs[:3]
    if not (query is key is value) or not module._qkv_same_embed_dim:
        return None  # cross-attention: not the self-attention kind
    seq_len = query.shape[1] if module.batch_first and query.dim() == 3 else query.shape[0]
    return "multihead_attention", {"seq_len": seq_len, "embed_dim": module.embed_dim,
                                   "num_heads": module.num_heads, "bias": module.in_proj_bias is not None}


def _embedding(module, inputs, output):
    return "embedding", {"seq_len": math.prod(inputs[0].shape[1:]), "num_embeddings": module.num_embeddings,
                         "embedding_dim": module.embedding_dim}


def _layer_norm(module, inputs, output):
    x = inputs[0]
    normalized = math.prod(module.normalized_shape)
    return "layer_norm", {"seq_len": x.numel() // x.shape[0] // normalized, "normalized_shape": normalized,
                          "elementwise_affine": module.elementwise_affine}


def _square(value):
    """The side of a square window given as an int or an (a, a) tuple; None if not square."""
    if isinstance(value, int):
        return value
    return value[0] if len(set(value)) == 1 else None


def _pointwise(kind):
    def mapper(module, inputs, output):
        x = inputs[0]
        return kind, {"features": x.numel() // x.shape[0]}
    return mapper


def _softmax(module, inputs, output):
    x = inputs[0]
    if module.dim not in (-1, x.dim() - 1):
        return None
    return "softmax", {"seq_len": x.numel() // x.shape[0] // x.shape[-1], "features": x.shape[-1]}


def _image(x):
    return {"channels": x.shape[1], "height": x.shape[2], "width": x.shape[3]}


def _batchnorm2d(module, inputs, output):
    # a SyncBatchNorm takes inputs of any rank: the kind describes 4-d ones
    return ("batchnorm2d", _image(inputs[0])) if inputs[0].dim() == 4 else None


def _pool2d(kind):
    def mapper(module, inputs, output):
        window = [_square(getattr(module, key)) for key in ("kernel_size", "stride", "padding")]
        if None in window or _square(getattr(module, "dilation", 1)) != 1 or module.ceil_mode:
            return None
        if kind == "avgpool2d" and not module.count_include_pad:
            return None
        return kind, dict(_image(inputs[0]), kernel_size=window[0], stride=window[1], padding=window[2])
    return mapper


def _adaptive_avgpool2d(module, inputs, output):
    """An adaptive average pool whose output divides its input is a plain average pool."""
    x = inputs[0]
    out_h, out_w = output.shape[-2], output.shape[-1]
    if x.shape[-2] % out_h or x.shape[-1] % out_w or x.shape[-2] // out_h != x.shape[-1] // out_w:
        return None
    kernel = x.shape[-2] // out_h
    return "avgpool2d", dict(_image(x), kernel_size=kernel, stride=kernel, padding=0)


@functools.lru_cache(maxsize=None)
def _mappers():
    import torch.nn as nn

    # Which torch module feeds which layer kind of the native table, and how its configuration is read.
    # ReLU6 is costed as a ReLU: one clamp per element either way.
    convolutions = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    return {**dict.fromkeys(convolutions, _convolution), nn.Linear: _linear, nn.RNN: _recurrent,
            nn.LSTM: _recurrent, nn.GRU: _recurrent, nn.MultiheadAttention: _attention, nn.Embedding: _embedding,
            nn.LayerNorm: _layer_norm, nn.BatchNorm2d: _batchnorm2d, nn.SyncBatchNorm: _batchnorm2d,
            nn.MaxPool2d: _pool2d("maxpool2d"), nn.AvgPool2d: _pool2d("avgpool2d"),
            nn.AdaptiveAvgPool2d: _adaptive_avgpool2d, nn.ReLU: _pointwise("relu"), nn.ReLU6: _pointwise("relu"),
            nn.GELU: _pointwise("gelu"), nn.Tanh: _pointwise("tanh"), nn.Sigmoid: _pointwise("sigmoid"),
            nn.SiLU: _pointwise("silu"), nn.Softmax: _softmax}


def _shape(value, batch, batch_dim):
    """Shape of the first tensor in `value`, with the walk's batch of 1 replaced by the requested batch."""
    if isinstance(value, (tuple, list)) and value:
        return _shape(value[0], batch, batch_dim)
    if not hasattr(value, "shape"):
        return None
    shape = list(value.shape)
    if len(shape) > batch_dim:
        shape[batch_dim] = batch
    return tuple(shape)


def _batch_dim(module):
    """Where the batch sits in a module's input: dimension 1 for sequence-first recurrent and attention layers."""
    sequence_first = hasattr(module, "batch_first") and not module.batch_first
    return 1 if sequence_first and type(module) in _mappers() else 0


def _example_input(model, input_shape, example_input):
    """A batch-1 input on the model's device: the example's first sample, or random values of `input_shape`."""
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else "cpu"
    return map_tensors(lambda tensor: tensor.to(device), input_maker(model, input_shape, example_input)(1))


@contextlib.contextmanager
def attention_inputs_recorded(model, seen):
    """Within it, each call of a MultiheadAttention of `model` appends its (query, key, value) to `seen[id(module)]`,
    however they were passed: a forward hook sees positional inputs only (torch 1.13), and torchvision's ViT passes
    them by keyword."""
    import inspect

    import torch

    def recorder(module):
        forward, signature = module.forward, inspect.signature(type(module).forward)

        def recorded(*args, **kwargs):
            try:
                bound = signature.bind(module, *args, **kwargs).arguments
            except TypeError:  # a call PyTorch refuses: its own error
                return forward(*args, **kwargs)
            seen.setdefault(id(module), []).append((bound["query"], bound["key"], bound["value"]))
            return forward(*args, **kwargs)
        return recorded

    with forwards_replaced({module: recorder(module) for module in model.modules()
                            if isinstance(module, torch.nn.MultiheadAttention)}):
        yield


def model_features(model, batch=32, gpu="V100", input_shape=None, example_input=None):
    """DataFrame of every leaf-module call of `model` with its layer kind and native features.

    `example_input` is a batch-1 input (tensor, tuple or dict of tensors); otherwise `input_shape` excludes
    the batch dimension and a random float input is made.
    """
    import pandas as pd
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    find_gpu(gpu)
    make_inputs = input_maker(model, input_shape, example_input)
    model = initialized(model, make_inputs)  # lazy modules: a copy, shaped
    mappers = _mappers()
    calls, started, keyword = [], [], {}

    def record(name):
        def hook(module, inputs, output):
            calls.append((name, module, inputs, output))
        return hook

    def mark_start(name):
        def pre_hook(module, inputs):
            started.append(name)
        return pre_hook

    handles = []
    for name, module in model.named_modules():
        if type(module) in mappers or not any(True for _ in module.children()):
            label = module_label(name, module)
            handles.append(module.register_forward_pre_hook(mark_start(label)))
            handles.append(module.register_forward_hook(record(label)))
    from .meta_model import weights_on_meta  # both import torch, which `import prenet` leaves unloaded
    from .op_trace import factories_on_meta

    def walk(sample, meta):
        # Eval mode keeps batch statistics and dropout out of the walk; gradients stay enabled because
        # torch's fused inference fast paths (TransformerEncoderLayer, MultiheadAttention) would skip submodules.
        calls.clear(), started.clear(), keyword.clear()
        plain = contextlib.nullcontext
        with in_mode(model, False), as_on_one_gpu(model), weights_on_meta(model) if meta else plain(), \
                factories_on_meta() if meta else plain(), attention_inputs_recorded(model, keyword):
            call(model, sample)

    try:
        try:  # on meta tensors: no arithmetic, and any dtype (a 2-byte model has no CPU kernels in torch 1.13)
            walk(make_inputs(1, "meta"), meta=True)
        except Exception:  # a model that needs values (a data-dependent branch, a packed sequence's lengths)
            sample = _example_input(model, input_shape, example_input)
            try:
                walk(sample, meta=False)
            except Exception as error:
                where = started[-1] if started else "before any module"
                raise rejected(where, sample, error, model) from error
    finally:
        for handle in handles:
            handle.remove()

    rows, seen = [], {}
    covered_prefixes = tuple(name + "." for name, module in model.named_modules() if name and type(module) in mappers)
    for name, module, inputs, output in calls:
        if id(module) in keyword:  # a MultiheadAttention: its inputs however they were passed
            inputs = keyword[id(module)].pop(0)
        if name.startswith(covered_prefixes):
            continue  # a child of a covered module (e.g. MultiheadAttention.out_proj)
        seen[name] = seen.get(name, 0) + 1
        row = {"name": name if seen[name] == 1 else f"{name}#{seen[name]}", "module": type(module).__name__,
               "input_shape": _shape(inputs, batch, _batch_dim(module)),
               "output_shape": _shape(output, batch, _batch_dim(module))}
        mapper = mappers.get(type(module))
        found = mapper(module, inputs, output) if mapper else None
        if found is None:
            row["kind"] = None
            row["note"] = ("no layer kind covers this module yet" if mapper is None
                           else "configuration outside its layer kind (e.g. dilation, packed or cross inputs)")
        else:
            kind, config = found
            row["kind"] = kind
            row.update(layer_features(kind, gpu=gpu, batch=batch, **config))
        rows.append(row)
    return pd.DataFrame(rows)

