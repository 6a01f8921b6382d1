"""The tangent kernel's share of a model's linear layers, without their Jacobian.

For a linear layer z = W a + b, the derivative of output k of the model for sample i with respect to W is the outer
product of the layer's sensitivity d_ik = df_k/dz (at sample i) and its input a_i, and with respect to b it is
d_ik. Inner products of such rows factor (Novak et al., "Fast Finite Width Neural Tangent Kernel", 2022):
    <J_W(i,k), J_W(j,l)> = (d_ik . d_jl) (a_i . a_j),        <J_b(i,k), J_b(j,l)> = d_ik . d_jl,
so the layer adds (D D^T) * (A A^T expanded over outputs, + 1 with a trainable bias) to the kernel, where D stacks
the sensitivities (n*K rows, the layer's width) and A the inputs (n rows). Their cost grows with the layers'
widths, not with their weights (a 1024x1024 layer has a million weights and 1024 sensitivities).

The sensitivities are the Jacobian of the outputs with respect to a zero added to each layer's output (functorch's
vmap of jacrev, as for parameters). A layer qualifies when it is an nn.Linear with a trainable weight, run once per
forward pass on a (batch, features) input; any other parameter is left to the explicit Jacobian
(prenet.tangent_kernel).
"""


def qualifying_layers(model, inputs):
    """{name: module} of the linear layers whose kernel share can be factored (see the module's description),
    found by running the model once on two samples."""
    import torch

    calls, dims = {}, {}
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.weight.requires_grad:
            def record(module, args, output, name=name):
                calls[name] = calls.get(name, 0) + 1
                dims[name] = args[0].dim() if args and isinstance(args[0], torch.Tensor) else -1
            hooks.append(module.register_forward_hook(record))
    try:
        with torch.no_grad():
            model(inputs[:2])
    finally:
        for hook in hooks:
            hook.remove()
    modules = dict(model.named_modules())
    return {name: modules[name] for name in calls if calls[name] == 1 and dims[name] == 2}


def _inputs_and_sensitivities(model, state, inputs, layers, chunk):
    """({name: A (n x in)}, {name: D (n x K x out)}) of `layers` on `inputs`, with the model's tensors `state`."""
    import torch

    from .tangent_kernel import _functional

    functional_call, vmap, jacrev = _functional()
    names = list(layers)
    seen, perturbation = {}, {}

    def hook(name):
        def add(module, args, output):
            seen[name] = args[0]
            return output + perturbation[name] if name in perturbation else output
        return add

    hooks = [layers[name].register_forward_hook(hook(name)) for name in names]
    try:
        with torch.no_grad():
            functional_call(model, state, (inputs,))
        layer_inputs = {name: seen[name].detach() for name in names}
        zeros = tuple(torch.zeros(layers[name].out_features, dtype=layer_inputs[name].dtype) for name in names)

        def single(added, x):
            perturbation.update(zip(names, added))
            try:
                return functional_call(model, state, (x.unsqueeze(0),)).squeeze(0)
            finally:
                perturbation.clear()

        sensitivity = vmap(jacrev(single), in_dims=(None, 0))
        parts = [sensitivity(zeros, inputs[start:start + chunk]) for start in range(0, len(inputs), chunk)]
    finally:
        for handle in hooks:
            handle.remove()
    return layer_inputs, {name: torch.cat([part[i] for part in parts]) for i, name in enumerate(names)}


def linear_layers_gram(model, state, inputs, layers, chunk=256):
    """The (n*K x n*K) kernel share of `layers` (qualifying_layers, one or more) on `inputs`, sample-major as
    prenet.tangent_kernel orders it; `state`: the model's parameters and buffers as functional_call takes them."""
    layer_inputs, sensitivities = _inputs_and_sensitivities(model, state, inputs, layers, chunk)
    gram = 0.0
    for name, module in layers.items():
        d = sensitivities[name]  # (n, K, out)
        n, outputs = d.shape[0], d.shape[1]
        d = d.reshape(n * outputs, -1)
        a = layer_inputs[name]
        inputs_gram = (a @ a.T).repeat_interleave(outputs, 0).repeat_interleave(outputs, 1)
        if module.bias is not None and module.bias.requires_grad:
            inputs_gram += 1.0
        gram = gram + (d @ d.T) * inputs_gram
    return gram.numpy()
