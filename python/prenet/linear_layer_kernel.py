"""The tangent kernel's share of a model's linear layers, without their Jacobian.

For a linear layer z = W a + b, the derivative of output k of the model for sample i with respect to W is the outer
product of the layer's sensitivity d_ik = df_k/dz (at sample i) and its input a_i, and with respect to b it is
d_ik. Inner products of such rows factor (Novak et al., "Fast Finite Width Neural Tangent Kernel", 2022):
    <J_W(i,k), J_W(j,l)> = (d_ik . d_jl) (a_i . a_j),        <J_b(i,k), J_b(j,l)> = d_ik . d_jl,
so the layer adds (D D^T) * (A A^T expanded over outputs, + 1 with a trainable bias) to the kernel, where D stacks
the sensitivities (n*K rows, the layer's width) and A the inputs (n rows). Their cost grows with the layers'
widths, not with their weights (a 1024x1024 layer has a million weights and 1024 sensitivities).

The layers and their sensitivities come from prenet.layer_sensitivities.
"""


def linear_layers_gram(layers, layer_inputs, sensitivities):
    """The (n*K x n*K) kernel share of the linear `layers` ({name: module}), sample-major as prenet.tangent_kernel
    orders it, from each layer's inputs A (n x in) and sensitivities D (n x K x out) on the n samples."""
    gram = 0.0
    for name, module in layers.items():
        d = sensitivities[name]
        n, outputs = d.shape[0], d.shape[1]
        d = d.reshape(n * outputs, -1)
        a = layer_inputs[name]
        inputs_gram = (a @ a.T).repeat_interleave(outputs, 0).repeat_interleave(outputs, 1)
        if module.bias is not None and module.bias.requires_grad:
            inputs_gram += 1.0
        gram = gram + (d @ d.T) * inputs_gram
    return gram.numpy()
