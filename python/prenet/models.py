"""Models named on the command line: "torchvision:resnet50", "prenet:bert_base" / "prenet:gpt2" (the
plain-PyTorch reference models, fed token ids), such a model's name alone ("resnet50", "gpt2"),
"package.module:factory" (importable from the working directory, as `python -m` imports) or
"path/to/file.py:factory", whose factory returns a module or a pair (module, example input); and training data, by
the last two forms."""
import contextlib
import difflib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

# Input shape (without batch) that torchvision's classification models expect.
TORCHVISION_INPUT_SHAPE = (3, 224, 224)
# prenet:NAME -> (factory name in prenet.reference_models, vocabulary, default sequence length, labels:
# "class" for one class per sequence, "tokens" for the next-token targets of a language model).
REFERENCE_MODELS = {"bert_base": ("bert_base", 30522, 128, "class"), "gpt2": ("gpt2_small", 50257, 256, "tokens")}


def _reference(name, input_shape):
    import torch

    from . import reference_models

    if name not in REFERENCE_MODELS:
        raise ValueError(f"prenet has no reference model '{name}'; available: {', '.join(REFERENCE_MODELS)}")
    factory, vocabulary, seq_len, labels = REFERENCE_MODELS[name]
    if input_shape is not None:
        if len(input_shape) != 1:
            raise ValueError(f"prenet:{name} takes --input-shape as the sequence length alone, got {input_shape}")
        seq_len = input_shape[0]
    ids = torch.randint(vocabulary, (1, seq_len))
    targets = ids if labels == "tokens" else torch.zeros(1, dtype=torch.long)
    return getattr(reference_models, factory)(), {"example_input": {"input_ids": ids, "labels": targets}}


def _torchvision_classifiers(tvm):
    """Names of torchvision's image classification models: its registry from torchvision 0.14, which also added
    helpers (get_model, list_models) to the module; before it, the module's lower-case callables."""
    if hasattr(tvm, "list_models"):
        return sorted(tvm.list_models(module=tvm))
    return sorted(n for n in dir(tvm) if n.islower() and not n.startswith("_") and callable(getattr(tvm, n)))


def build_model(spec, input_shape=None):
    """(model, keyword arguments of prenet.predict / measure that give its input) for a spec such as
    "torchvision:vgg16"; `input_shape` (without the batch) overrides the model's default input."""
    source, name = spec.split(":", 1) if ":" in spec else (_source_of(spec), spec)
    if source == "prenet":
        return _reference(name, input_shape)
    if source == "torchvision":
        import torchvision.models as tvm

        known = _torchvision_classifiers(tvm)
        if name not in known:
            closest = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            hint = f"closest: {', '.join(closest)}; " if closest else ""
            raise ValueError(f"torchvision has no model '{name}'; {hint}available: {', '.join(known)}")
        return getattr(tvm, name)(weights=None), {"input_shape": input_shape or TORCHVISION_INPUT_SHAPE}
    return _user_model(_call_factory(source, name, spec), spec, input_shape)


def _source_of(name):
    """"prenet" or "torchvision" for a model spec without a source that names one of their models ("resnet50" as
    "torchvision:resnet50"); ValueError naming the forms a spec takes, and the closest names, otherwise."""
    import torchvision.models as tvm

    sources = {"prenet": sorted(REFERENCE_MODELS), "torchvision": _torchvision_classifiers(tvm)}
    for source, names in sources.items():
        if name in names:
            return source
    spec_of = {n: f"{source}:{n}" for source, names in sources.items() for n in names}
    closest = difflib.get_close_matches(name, list(spec_of), n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(spec_of[n] for n in closest)}" if closest else ""
    raise ValueError(f"model spec '{name}' names no model of torchvision or prenet; a spec is a model's name there "
                     "('resnet50', 'gpt2'), or looks like 'torchvision:resnet50', 'prenet:gpt2', "
                     f"'package.module:factory' or 'path/to/file.py:factory'{hint}")


def _user_model(made, spec, input_shape):
    """(model, input arguments) of what a user's factory returned: a module, given input_shape; or a pair (module,
    example input), as a model that takes token ids or several inputs needs (prenet.predict's example_input: a
    tensor, tuple or dict whose tensors have a batch dimension first)."""
    import torch

    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        if input_shape is not None:
            raise ValueError(f"'{spec}' returns its own example input; --input-shape {input_shape} would override "
                             "it: give one or the other")
        return made[0], {"example_input": made[1]}
    if not isinstance(made, torch.nn.Module):
        raise ValueError(f"'{spec}' returned {type(made).__name__}; a model factory returns a torch.nn.Module, or "
                         "a pair (module, example input) such as (model, torch.randint(vocab_size, (1, seq_len)))")
    return made, {"input_shape": input_shape}


def build_dataset(spec):
    """The training data a "package.module:factory" or "path/to/file.py:factory" spec's factory returns: an
    (inputs, targets) pair or a torch Dataset of (input, target) pairs, as prenet.predict_steps takes it."""
    if ":" not in spec:
        raise ValueError(f"data spec '{spec}' must look like 'package.module:factory' or 'path/to/file.py:factory' "
                         "(a function returning (inputs, targets) or a torch Dataset)")
    source, name = spec.split(":", 1)
    return _call_factory(source, name, spec)


def _call_factory(source, name, spec):
    factory = getattr(_user_module(source, spec), name, None)
    if factory is None:
        raise ValueError(f"module '{source}' has no attribute '{name}'")
    return factory()


@contextlib.contextmanager
def _working_directory_importable():
    """The working directory first on the import path within the block (a console script's own folder is there
    instead)."""
    sys.path.insert(0, os.getcwd())
    try:
        yield
    finally:
        sys.path.remove(os.getcwd())


def _user_module(source, spec):
    """The module of a "module:factory" spec: a Python file by its path, or a module by its dotted name."""
    if source.endswith(".py"):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"model spec '{spec}': no file '{source}'")
        loader = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loader)
        with _working_directory_importable():  # the file may import its neighbours
            loader.loader.exec_module(module)
        return module
    try:
        with _working_directory_importable():
            return importlib.import_module(source)
    except ImportError as error:
        raise ValueError(f"cannot import '{source}' for model spec '{spec}' (a module importable from here, or a "
                         f"file path ending in .py): {error}") from error
