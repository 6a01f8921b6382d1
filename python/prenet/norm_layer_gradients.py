"""Per-sample, per-output gradients of a normalisation layer's scale and shift, from its input and output
sensitivities.

Batch norm in eval mode (its running statistics) and layer norm both end in an affine map of the normalised input,
y = gamma * xhat + beta, gamma and beta broadcast over the other dimensions (batch norm: over all but the channel;
layer norm: over the leading ones, before its normalised shape). So the derivative of output k of the model for
sample i is, with d_ik = df_k/dy the layer's sensitivity (prenet.layer_sensitivities),
    d/dgamma = sum over the broadcast dimensions of d_ik * xhat_i,       d/dbeta = the same sum of d_ik,
a few numbers per channel, made from one pass of sensitivities instead of a Jacobian over the model for them
(which for a ResNet's batch norms costs as much as all the other layers' sensitivities together). Rows keep the
module's parameter order: weight, then bias.
"""


def normalized_input(module, layer_input):
    """xhat: `layer_input` (samples, ...) normalised as `module` does it in eval mode, before its scale and shift."""
    import torch

    if isinstance(module, torch.nn.LayerNorm):
        dims = tuple(range(-len(module.normalized_shape), 0))
        mean = layer_input.mean(dims, keepdim=True)
        variance = layer_input.var(dims, unbiased=False, keepdim=True)  # layer norm's biased variance
        return (layer_input - mean) / torch.sqrt(variance + module.eps)
    shape = (1, -1) + (1,) * (layer_input.dim() - 2)  # per channel, dimension 1
    mean, variance = module.running_mean.view(shape), module.running_var.view(shape)
    return (layer_input - mean.to(layer_input.dtype)) / torch.sqrt(variance.to(layer_input.dtype) + module.eps)


def norm_gradient_rows(module, layer_input, sensitivity):
    """(samples, K, parameters) gradients of the K outputs with respect to `module`'s trainable weight and bias, given
    its input (samples, ...) and the outputs' sensitivities (samples, K, ...)."""
    import torch

    xhat = normalized_input(module, layer_input).unsqueeze(1)  # (samples, 1, ...), against (samples, K, ...)
    samples, outputs = sensitivity.shape[:2]
    if isinstance(module, torch.nn.LayerNorm):  # the dimensions before the normalised shape
        broadcast = tuple(range(2, sensitivity.dim() - len(module.normalized_shape)))
    else:  # all but the channel (dimension 2 here)
        broadcast = tuple(range(3, sensitivity.dim()))
    def summed(values):  # over `broadcast` (torch sums over every dimension when given none)
        return (values.sum(broadcast) if broadcast else values).reshape(samples, outputs, -1)

    rows = [summed(sensitivity * xhat)]
    if module.bias is not None and module.bias.requires_grad:
        rows.append(summed(sensitivity))
    return torch.cat(rows, dim=2)
