"""Models whose lazy modules (torch.nn.LazyLinear, LazyConv2d, LazyBatchNorm2d, ...) have not run yet. Their
weights have no shape until a first forward pass infers it from the input, and every walk of prenet (a trace on
meta tensors, the training memory, a measurement) needs the shapes. PyTorch's documentation has the user run the
model once on a sample; prenet does that on a copy, so the caller's model is left exactly as it was.
"""


def uninitialized(model):
    """Names of `model`'s lazy modules that have a parameter or buffer without a shape yet (not yet run)."""
    from torch.nn.modules.lazy import LazyModuleMixin

    from .model_inputs import module_label

    return [module_label(name, module) for name, module in model.named_modules()
            if isinstance(module, LazyModuleMixin) and module.has_uninitialized_params()]


def initialized(model, make_inputs):
    """`model` itself where every parameter and buffer has its shape; else a copy of it whose lazy modules took
    theirs from one forward pass on one sample (`make_inputs(1)`, prenet.model_inputs.input_maker), in evaluation
    mode (a batch of one passes batch normalization) on the CPU, without gradients. ValueError naming the modules
    where they are not on the CPU, where the sample's forward pass fails (naming the module it failed in), or where
    it leaves a lazy module without its shape (a module the forward pass never calls)."""
    import copy

    import torch
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.nn.parameter import is_lazy

    from .model_inputs import call, module_label, rejected
    from .model_state import in_mode
    from .sync_batchnorm import as_on_one_gpu

    lazy = uninitialized(model)
    if not lazy:
        return model
    devices = {tensor.device.type for tensor in (*model.parameters(), *model.buffers())}
    if devices != {"cpu"}:
        raise ValueError(f"the model's lazy modules ({', '.join(lazy)}) have no weights' shapes yet and the model is "
                         f"on {', '.join(sorted(devices))}: run it once on a sample batch (PyTorch infers the shapes "
                         "then), or build it on the CPU, where prenet infers them on a copy")
    # an uninitialized tensor refuses to be copied: the copy gets a fresh one of its kind (a weight shared between
    # modules stays shared, the memo handing the same fresh one to each)
    fresh = {id(tensor): type(tensor)(requires_grad=tensor.requires_grad, device=tensor.device, dtype=tensor.dtype)
             for tensor in (*model.parameters(), *model.buffers()) if is_lazy(tensor)}
    twin = copy.deepcopy(model, memo=fresh)
    labels = {id(module): module_label(name, module) for name, module in twin.named_modules()}
    started = []
    handle = register_module_forward_pre_hook(
        lambda module, inputs: started.append(labels[id(module)]) if id(module) in labels else None)
    sample = make_inputs(1)
    try:
        with torch.no_grad(), in_mode(twin, False), as_on_one_gpu(twin):
            call(twin, sample)
    except Exception as error:
        raise rejected(started[-1] if started else "before any module", sample, error, twin) from error
    finally:
        handle.remove()
    left = uninitialized(twin)
    if left:
        raise ValueError(f"the model's lazy modules {', '.join(left)} still have no weights' shapes after a forward "
                         "pass on a sample (does the forward pass call them?): give them their shapes (for "
                         "instance torch.nn.Linear for torch.nn.LazyLinear), or remove them")
    return twin
