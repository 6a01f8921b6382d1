"""Layers whose tangent-kernel share is built from their inputs and output sensitivities, and those sensitivities.

For a layer z = layer(a; W), the derivative of the model's output k for sample i with respect to W depends only on
the layer's input a_i and its sensitivity d_ik = df_k/dz (at sample i): an outer product for a linear layer
(prenet.linear_layer_kernel), a sum of outer products over output positions for a convolution
(prenet.conv_layer_gradients, prenet.conv_layer_kernel), a sum over the broadcast dimensions of the normalised input
times the sensitivity for a batch or layer norm's scale (prenet.norm_layer_gradients), the sensitivity added at each
row it looked up for an embedding (prenet.embedding_layer_gradients). So such a layer's Jacobian rows never need a
Jacobian over its weights.

The sensitivities are the Jacobian of the outputs with respect to a zero added to each layer's output (functorch's
vmap of jacrev, as for parameters). A layer qualifies when it is one of the factored kinds (factored_kinds) with a
trainable weight, run once per forward pass on a batched input, no other module holding its parameters (a tied
weight's gradient comes through each layer that holds it); any other parameter is left to the explicit Jacobian
(prenet.tangent_kernel). A parameter a forward pass uses outside its module (F.linear on another layer's weight)
cannot be seen from the modules and is not told apart.
"""
import functools
from typing import Callable, NamedTuple


class FactoredKind(NamedTuple):
    """How a factored kind's share is made. `input_dims`: the dimensions of its batched input (a set), the fewest it
    takes (an integer: samples first, then any positions), or None for a layer norm (more than its normalised shape
    has); `features_last`: whether its output's positions lie between samples and features (else after channels);
    `gradients`: (module, its input, its sensitivities) -> its gradient rows (samples, K, parameters), or the
    entries of those rows (rows, columns, values) where `entries`; `at_positions`: whether its weights act at every
    output position, so that its share may be factored over pairs of positions (prenet.conv_layer_kernel);
    `on_vectors`: whether, with one position, its share is factored over samples alone (prenet.linear_layer_kernel:
    a linear layer on vectors)."""
    input_dims: object
    features_last: bool
    gradients: Callable
    entries: bool = False
    at_positions: bool = False
    on_vectors: bool = False


@functools.lru_cache(maxsize=None)
def factored_kinds():
    """{module class: FactoredKind} of the kinds whose share is factored."""
    import torch

    from .conv_layer_gradients import conv_gradient_rows
    from .embedding_layer_gradients import embedding_gradient_entries
    from .norm_layer_gradients import norm_gradient_rows

    nn = torch.nn
    return {nn.Linear: FactoredKind(2, True, conv_gradient_rows, at_positions=True, on_vectors=True),
            nn.Conv1d: FactoredKind({3}, False, conv_gradient_rows, at_positions=True),
            nn.Conv2d: FactoredKind({4}, False, conv_gradient_rows, at_positions=True),
            nn.BatchNorm1d: FactoredKind({2, 3}, False, norm_gradient_rows),
            nn.BatchNorm2d: FactoredKind({4}, False, norm_gradient_rows),
            nn.BatchNorm3d: FactoredKind({5}, False, norm_gradient_rows),
            nn.LayerNorm: FactoredKind(None, True, norm_gradient_rows),
            nn.Embedding: FactoredKind(1, True, embedding_gradient_entries, entries=True)}


def factored_kind(module):
    """The module's FactoredKind (None where its kind is not factored)."""
    return factored_kinds().get(type(module))


def _qualifies(module):
    """Whether the module's kind is factored and its form is one the factored shares take: a convolution that
    prenet.conv_layer_gradients unfolds, a batch norm with the running statistics eval mode normalises by, a norm
    with a scale (affine), an embedding whose gradient is the sum of its lookups' (neither renormalising its rows,
    max_norm, nor scaling by the batch's counts, scale_grad_by_freq)."""
    if factored_kind(module) is None or getattr(module, "weight", None) is None or not module.weight.requires_grad:
        return False
    if hasattr(module, "max_norm"):
        return module.max_norm is None and not module.scale_grad_by_freq
    if hasattr(module, "running_mean"):
        return module.running_mean is not None
    return not hasattr(module, "padding_mode") or (module.padding_mode == "zeros" and
                                                    isinstance(module.padding, tuple))


def _batched(module, dims):
    """Whether an input of `dims` dimensions is a batch of the module's samples."""
    expected = factored_kind(module).input_dims
    if expected is None:
        return dims > len(module.normalized_shape)
    return dims >= expected if isinstance(expected, int) else dims in expected


def qualifying_layers(model, inputs, positions=None):
    """{name: module} of the layers whose kernel share can be factored (see the module's description), found by
    running the model once on two samples (a layer qualifies where its input's first dimension is theirs);
    `positions`, where given a dict, gets each one's output positions per sample (a convolution's output size; for
    a linear layer its input's size between samples and features, 1 for a plain batch of vectors)."""
    import torch

    calls, dims = {}, {}
    positions = {} if positions is None else positions
    hooks = []
    for name, module in model.named_modules():
        if _qualifies(module):
            def record(module, args, output, name=name):
                calls[name] = calls.get(name, 0) + 1
                # its input's dimensions, where its first is the samples' (not, say, samples x positions folded)
                batched = args and isinstance(args[0], torch.Tensor) and args[0].dim() and \
                    args[0].shape[0] == len(probe)
                dims[name] = args[0].dim() if batched else -1
                positions[name] = (output.shape[1:-1] if factored_kind(module).features_last
                                   else output.shape[2:]).numel()
            hooks.append(module.register_forward_hook(record))
    probe = inputs[:2]
    try:
        with torch.no_grad():
            model(probe)
    finally:
        for hook in hooks:
            hook.remove()
    modules = dict(model.named_modules())
    shared = _weights_held_twice(model)
    return {name: modules[name] for name in calls if calls[name] == 1 and _batched(modules[name], dims[name])
            and not any(id(v) in shared for v in modules[name].parameters())}


def _weights_held_twice(model):
    """ids of the parameters that more than one module holds (a weight tied between an embedding and an output
    layer): such a weight's gradient flows through each holder, which a factored share, one layer's, would miss."""
    holders = {}
    for module in model.modules():
        for weight in module._parameters.values():
            if weight is not None:
                holders.setdefault(id(weight), set()).add(id(module))
    return {weight for weight, modules in holders.items() if len(modules) > 1}


def sensitivity_chunks(model, state, inputs, layers, chunk_bytes):
    """Yields ({name: the layer's input}, {name: its sensitivities (samples, K, *the layer's output shape)}) of
    `layers` for successive chunks of `inputs`, each chunk's sensitivities at most about `chunk_bytes`; `state`: the
    model's parameters and buffers as functional_call takes them."""
    import torch

    from .tangent_kernel import _functional

    functional_call, vmap, jacrev = _functional()
    names = list(layers)
    seen, perturbation = {}, {}

    def hook(name):
        def add(module, args, output):
            seen[name] = (args[0], output.shape[1:], output.dtype)
            return output + perturbation[name] if name in perturbation else output
        return add

    hooks = [layers[name].register_forward_hook(hook(name)) for name in names]
    try:
        with torch.no_grad():
            outputs = functional_call(model, state, (inputs[:1],)).shape[-1]
        zeros = tuple(torch.zeros(seen[name][1], dtype=seen[name][2]) for name in names)
        per_sample = outputs * sum(z.numel() for z in zeros) * zeros[0].element_size()
        chunk = max(1, chunk_bytes // per_sample)

        def single(added, x):
            perturbation.update(zip(names, added))
            try:
                return functional_call(model, state, (x.unsqueeze(0),)).squeeze(0)
            finally:
                perturbation.clear()

        sensitivity = vmap(jacrev(single), in_dims=(None, 0))
        for start in range(0, len(inputs), chunk):
            part = inputs[start:start + chunk]
            with torch.no_grad():
                functional_call(model, state, (part,))
            layer_inputs = {name: seen[name][0].detach() for name in names}
            yield layer_inputs, dict(zip(names, sensitivity(zeros, part)))
    finally:
        for handle in hooks:
            handle.remove()
