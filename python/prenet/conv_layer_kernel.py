"""The tangent kernel's share of a convolution, from its input patches and output sensitivities, never forming its
per-sample weight gradients.

A convolution's gradient for output k of sample i is, per group g, sum_p d_ikg(p) u_ig(p)^T (prenet.conv_layer_
gradients: d the sensitivity at output position p, u the input patch under it). Inner products of two such sums
factor as for a linear layer (Novak et al., "Fast Finite Width Neural Tangent Kernel", 2022, structured
derivatives), over pairs of positions:
    <J_W(i,k), J_W(j,l)> = sum_g sum_p,q (d_ikg(p) . d_jlg(q)) (u_ig(p) . u_jg(q)),
and the bias adds sum_p,q d_ik(p) . d_jl(q), a 1 added to every patch product. That costs about
(samples x outputs x positions)^2 x the output channels, against a cost per element of the rows (samples x outputs
x the weights) for making and sketching them: so it pays for layers of few positions and many weights, the last
stages of a CNN, where most of its weights are (factoring_pays). A linear layer applied at every position of a
sequence (a Transformer's) is a 1x1 convolution here.
"""
from .conv_layer_gradients import patches_and_sensitivities

# Bytes of one block of sensitivity products (samples x outputs x positions, squared) made at once.
PRODUCT_BLOCK_BYTES = 64 * 2 ** 20


def _gram_work(module, samples, outputs, positions):
    """Multiply-adds of the layer's factored share: per group, the sensitivities' products (samples x outputs x
    positions, squared, x the group's output channels), the patches' (samples x positions, squared, x the
    group's patch length) and the sum over pairs of positions (samples x outputs, squared, x positions squared)."""
    # weights (out channels, in channels / groups, *kernel): a patch is one out channel's; a linear layer's (out, in)
    # are a 1x1 convolution's, of one group
    groups = getattr(module, "groups", 1)
    patch, per_group = module.weight[0].numel(), module.weight.shape[0] // groups
    return groups * ((samples * outputs * positions) ** 2 * per_group + (samples * positions) ** 2 * patch
                     + (samples * outputs * positions) ** 2)


def _rows_work(module, samples, outputs, sketched):
    """The cost of the layer's gradient rows (conv_layer_gradients) in _gram_work's operations: per element of the
    rows (samples x outputs x the weights), making and sketching it (ROW_ELEMENT_SKETCHED), or making it
    (ROW_ELEMENT_MADE) and its share of the Gram product of rows (samples x outputs)."""
    weights = sum(p.numel() for p in module.parameters() if p.requires_grad)
    rows = samples * outputs
    return rows * weights * (ROW_ELEMENT_SKETCHED if sketched else ROW_ELEMENT_MADE + rows)


# An element of a convolution's gradient rows costs about as much as 100 of _gram_work's operations when made and
# sketched, whatever its positions: on ResNet-18's convolutions (32 px, 16 and 128 samples x 10 outputs, float32,
# this project's CPU) 4.5-5.8 ns an element, against 0.04-0.07 ns an operation of the factored share (ad hoc,
# 2026-11-27). Made and not sketched (a copy into the rows of the Gram product), taken as a fifth of that (not timed).
ROW_ELEMENT_SKETCHED = 100
ROW_ELEMENT_MADE = 20


def factoring_pays(module, samples, outputs, positions, sketched=True):
    """Whether the factored share of a convolution (or a linear layer over positions) with `positions` output
    positions costs less than its gradient rows, on `samples` samples of `outputs` outputs; `sketched`: whether the
    rows would be sketched."""
    return _gram_work(module, samples, outputs, positions) < _rows_work(module, samples, outputs, sketched)


def conv_layer_gram(module, layer_input, sensitivity):
    """The (n*K x n*K) kernel share, sample-major, of a Conv1d, a Conv2d or a Linear over positions, given its input
    and the outputs' sensitivities (n, K, *its output), as conv_layer_gradients.patches_and_sensitivities takes
    them."""
    import torch

    patches, d = patches_and_sensitivities(module, layer_input, sensitivity)
    samples, outputs, groups = d.shape[:3]
    positions = patches.shape[-1]
    # (g, n * P, in/g * kernel) and (g, n * K * P, out/g), rows sample-major
    patches = patches.permute(1, 0, 3, 2).reshape(groups, samples * positions, -1)
    d = d.permute(2, 0, 1, 4, 3).reshape(groups, samples * outputs * positions, -1)
    bias = module.bias is not None and module.bias.requires_grad
    gram = torch.zeros(samples * outputs, samples * outputs, dtype=d.dtype)
    rows = outputs * positions  # sensitivity rows of one sample
    # samples a side of a block, its products (groups x (samples x rows)^2) within PRODUCT_BLOCK_BYTES
    block = max(1, int((PRODUCT_BLOCK_BYTES / (groups * d.element_size())) ** 0.5) // rows)
    for i in range(0, samples, block):
        a = min(block, samples - i)
        for j in range(i, samples, block):  # the blocks on and above the diagonal; those below mirror them
            b = min(block, samples - j)
            products = torch.bmm(d[:, i * rows:(i + a) * rows], d[:, j * rows:(j + b) * rows].transpose(1, 2))
            inputs = torch.bmm(patches[:, i * positions:(i + a) * positions],
                               patches[:, j * positions:(j + b) * positions].transpose(1, 2))
            if bias:
                inputs += 1.0
            products = products.reshape(groups, a, outputs, positions, b, outputs, positions)
            inputs = inputs.reshape(groups, a, 1, positions, b, 1, positions)
            share = (products * inputs).sum(dim=(0, 3, 6)).reshape(a * outputs, b * outputs)
            gram[i * outputs:(i + a) * outputs, j * outputs:(j + b) * outputs] = share
            gram[j * outputs:(j + b) * outputs, i * outputs:(i + a) * outputs] = share.T
    return gram
