"""A model's inputs, in the three forms a forward pass takes them: one tensor, a tuple (or list) of positional
tensors, or a dict of keyword tensors (Hugging Face style). One place makes them (from an example or a shape),
calls the model on them and maps a function over their tensors, for the trace, the measurement and the feature
walk alike."""
import operator


def call(model, inputs):
    """`model` run on `inputs`: model(**inputs) for a dict, model(*inputs) for a tuple or list, else model(inputs)."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def map_tensors(function, inputs):
    """`inputs` with `function` applied to each tensor in it (other values, such as a flag, are kept)."""
    import torch

    if isinstance(inputs, dict):
        return {key: map_tensors(function, value) for key, value in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(map_tensors(function, value) for value in inputs)
    return function(inputs) if isinstance(inputs, torch.Tensor) else inputs


def tensors(inputs):
    """The tensors of `inputs`, in order."""
    found = []
    map_tensors(found.append, inputs)
    return found


def shapes_text(inputs):
    """The shapes of `inputs` as a person reads them: "(2, 3, 7)" for a tensor, "(2, 3), (2, 5)" for positional
    tensors, "input_ids (2, 16), attention_mask (2, 16)" for keyword ones."""
    import torch

    def one(value):
        return str(tuple(value.shape)) if isinstance(value, torch.Tensor) else type(value).__name__

    if isinstance(inputs, dict):
        return ", ".join(f"{key} {one(value)}" for key, value in inputs.items())
    if isinstance(inputs, (tuple, list)):
        return ", ".join(one(value) for value in inputs)
    return one(inputs)


def module_label(name, module):
    """How prenet names a module in its tables and errors: by its name in the model, the model itself (whose name
    is empty) by its type's name."""
    return name or type(module).__name__


def rejected(where, inputs, error, model):
    """The ValueError for a model that failed on `inputs`: the module it failed in (`where`), the shapes it was
    given, and PyTorch's own message; when it failed in an embedding given only floating-point tensors (what
    input_shape makes), how to give it token ids instead; when a model given one input asks for targets (a
    detection model in training mode), how to give both; when a dict's keys were refused as keyword arguments, how
    to pass the dict itself."""
    import torch

    message = f"the model rejected the input (failed in module '{where}', given {shapes_text(inputs)}): {error}"
    failed_in = {module_label(name, module): module for name, module in model.named_modules()}.get(where)
    if (isinstance(failed_in, (torch.nn.Embedding, torch.nn.EmbeddingBag))
            and all(t.is_floating_point() for t in tensors(inputs))):
        message += (f"; '{where}' is an embedding, which takes integer token ids, and input_shape makes random "
                    "floating-point inputs: give example_input instead, e.g. example_input=torch.randint(vocab_size, "
                    "(1, seq_len)) (its batch dimension is repeated to the batch; on the command line, a factory "
                    "returning (model, example input))")
    elif (failed_in is not None and not isinstance(failed_in, (torch.nn.Embedding, torch.nn.EmbeddingBag))
          and tensors(inputs) and not any(t.is_floating_point() for t in tensors(inputs))
          and any(p.is_floating_point() for p in failed_in.parameters(recurse=False))):
        kinds = sorted({str(t.dtype).removeprefix("torch.") for t in tensors(inputs)})
        message += (f"; the input holds {', '.join(kinds)} tensors only, and '{where}' has floating-point weights: "
                    "give example_input in floating point (tensor.float())")
    elif "target" in str(error).lower() and not isinstance(inputs, (tuple, list)):
        # torchvision's detection models in training mode: "targets should not be none when in training mode"
        message += ("; the model asks for targets, which a training step gives it: give its positional arguments as "
                    "a tuple, example_input=(inputs, targets) (torchvision's detection models: example_input=([image],"
                    " [{'boxes': a (n, 4) float tensor, 'labels': an (n,) int64 tensor}]); on the command line, a "
                    "factory returning (model, example input))")
    elif isinstance(inputs, dict) and isinstance(error, TypeError) and "keyword argument" in str(error):
        message += ("; a dict example_input is passed as keyword arguments (model(**example_input)): for a model "
                    "that takes one dict, give it inside a tuple, example_input=(the_dict,)")
    return ValueError(message)


def map_batch(inputs, on_tensor, on_samples):
    """`inputs` with `on_tensor` applied to each tensor (its batch dimension first) and `on_samples` to each list
    within the arguments (one item per sample, as torchvision's detection models take images and targets)."""
    import torch

    def walk(value, arguments=False):
        if isinstance(value, list) and not arguments:
            return on_samples(value)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, (tuple, list)):
            return type(value)(walk(item) for item in value)
        return on_tensor(value) if isinstance(value, torch.Tensor) else value

    return walk(inputs, arguments=True)


def own_loss(output):
    """The loss a model returns itself, or None: its output's `loss` (Hugging Face models called with labels=),
    or the sum of a dict of scalar tensors (torchvision's detection models in training return their losses so)."""
    import torch

    own = output.get("loss") if hasattr(output, "get") else getattr(output, "loss", None)
    if isinstance(own, torch.Tensor):
        return own
    if isinstance(output, dict) and output and all(
            isinstance(v, torch.Tensor) and v.dim() == 0 and v.is_floating_point() for v in output.values()):
        return sum(output.values())
    return None


def input_maker(model, input_shape, example_input):
    """make_inputs(b, device): a batch of b samples on `device` ("cpu" or "meta"), from an example or a shape
    (random values in the dtype of the model's floating-point weights). The example is a tensor, a tuple of
    positional arguments or a dict of keyword arguments; in it each tensor has its batch dimension first (its
    first sample is repeated) and each list holds one item per sample (its first item is repeated: torchvision's
    detection models take a list of images and a list of target dicts)."""
    import torch

    from .meta_model import channels_last, to_meta

    if example_input is not None and input_shape is not None:
        raise ValueError("give input_shape or example_input, not both (example_input also sets the input's shape)")
    if example_input is not None:
        def repeat(tensor, b, device):
            if tensor.dim() == 0:
                raise TypeError("example_input's tensors need a batch dimension first; got a 0-d tensor")
            first = to_meta(tensor[:1]) if device == "meta" else tensor[:1]
            batch = first.repeat((b,) + (1,) * (tensor.dim() - 1))
            # an NHWC example stays NHWC (repeat lays its result out plainly)
            return batch.contiguous(memory_format=torch.channels_last) if channels_last(tensor) else batch

        def samples(items, b, device):  # the first sample's item, b times
            if not items:
                raise TypeError("example_input's lists hold one item per sample; got an empty list")
            return [map_tensors(lambda t: to_meta(t) if device == "meta" else t.clone(), items[0]) for _ in range(b)]

        if not isinstance(example_input, (torch.Tensor, tuple, list, dict)) or not tensors(example_input):
            got = type(example_input).__name__
            raise TypeError("example_input must be a tensor, a tuple of positional arguments or a dict of keyword "
                            "arguments, holding tensors; got " + (f"a {got} without one" if isinstance(
                                example_input, (tuple, list, dict)) else got))
        return lambda b, device="cpu": map_batch(example_input, lambda t: repeat(t, b, device),
                                                 lambda items: samples(items, b, device))
    if input_shape is None:
        raise ValueError("give input_shape (without the batch dimension, e.g. (3, 224, 224)) or example_input")
    # sizes: integers of any integer type (a torch.Size, numpy integers); one integer for one dimension
    sizes = input_shape if isinstance(input_shape, (tuple, list)) else (input_shape,)
    try:
        if any(isinstance(s, bool) for s in sizes):
            raise TypeError
        shape = tuple(operator.index(s) for s in sizes)
    except TypeError:
        raise TypeError("input_shape must be a tuple of integer sizes without the batch dimension, such as "
                        f"(3, 224, 224), got {input_shape!r}") from None
    if not shape or any(s < 1 for s in shape):
        raise ValueError(f"input_shape {shape} must be non-empty sizes >= 1")
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return lambda b, device="cpu": (torch.empty((b,) + shape, device="meta", dtype=dtype) if device == "meta" else
                                    torch.randn((b,) + shape, dtype=dtype))
