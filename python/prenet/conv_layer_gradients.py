"""Per-sample, per-output gradients of a convolution's weights, from its inputs and output sensitivities.

A convolution is a linear layer applied at every output position p to the input patch u_i(p) under it (im2col), so
the derivative of output k of the model for sample i with respect to the weight of group g is
    sum_p d_ik(p) u_i(p)^T            (d_ik(p): the sensitivity df_k/dz at position p, the group's channels),
and with respect to the bias sum_p d_ik(p) (the backward pass's weight gradient, one sample and one output at a
time). A linear layer applied at every position of a sequence (a Transformer's, input (samples, ..., features)) is
the same with patches of one position: a 1x1 convolution. Computed as one product per chunk of samples (cost
samples x outputs x positions x the layer's weights), these rows replace the per-sample Jacobian over the weights
(functorch vmap of a grouped convolution's backward, an order of magnitude slower on the CPU). Rows keep the
weight's layout (out channels, in channels / groups, kernel...), then the bias, as the module's parameters are
named.
"""


def _as_two_dimensional(module, layer_input, sensitivity):
    """(input, sensitivity, kernel size, dilation, padding, stride) with a 1-d convolution's made 2-d (height 1)."""
    if layer_input.dim() == 4:
        return layer_input, sensitivity, module.kernel_size, module.dilation, module.padding, module.stride
    return (layer_input.unsqueeze(2), sensitivity.unsqueeze(3), (1,) + module.kernel_size, (1,) + module.dilation,
            (0,) + module.padding, (1,) + module.stride)


def patches_and_sensitivities(module, layer_input, sensitivity):
    """(patches (samples, groups, in channels / groups x kernel, P), sensitivities (samples, K, groups, out channels
    / groups, P)) of a Conv1d or Conv2d given its input (samples, in channels, *size) and the outputs' sensitivities
    (samples, K, out channels, *output size), or of a Linear given its input (samples, *positions, in features) and
    theirs (samples, K, *positions, out features); P: the output positions per sample."""
    import torch

    samples, outputs = sensitivity.shape[:2]
    if isinstance(module, torch.nn.Linear):
        x = layer_input.reshape(samples, -1, module.in_features).transpose(1, 2)
        d = sensitivity.reshape(samples, outputs, -1, module.out_features).transpose(2, 3)
        return x.unsqueeze(1), d.unsqueeze(2)
    x, d, kernel, dilation, padding, stride = _as_two_dimensional(module, layer_input, sensitivity)
    groups, channels = module.groups, d.shape[2]
    patches = torch.nn.functional.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)
    patches = patches.reshape(samples, groups, -1, patches.shape[-1])
    return patches, d.reshape(samples, outputs, groups, channels // groups, -1)


def conv_gradient_rows(module, layer_input, sensitivity):
    """(samples, K, parameters) gradients of the K outputs with respect to `module`'s trainable weight and bias,
    for a Conv1d, a Conv2d or a Linear over positions (patches_and_sensitivities)."""
    import torch

    patches, d = patches_and_sensitivities(module, layer_input, sensitivity)
    samples, outputs = d.shape[:2]
    weight = torch.einsum("skgop,sgip->skgoi", d, patches).reshape(samples, outputs, -1)
    if module.bias is None or not module.bias.requires_grad:
        return weight
    return torch.cat([weight, d.sum(-1).reshape(samples, outputs, -1)], dim=2)
