"""Models named on the command line: "torchvision:resnet50" or "package.module:factory"."""
import importlib

# Input shape (without batch) that torchvision's classification models expect.
TORCHVISION_INPUT_SHAPE = (3, 224, 224)


def build_model(spec):
    """Returns (model, default_input_shape or None) for a spec such as "torchvision:vgg16"."""
    if ":" not in spec:
        raise ValueError(f"model spec '{spec}' must look like 'torchvision:resnet50' or 'package.module:factory'")
    source, name = spec.split(":", 1)
    if source == "torchvision":
        import torchvision.models as tvm

        factory = getattr(tvm, name, None)
        if factory is None or not callable(factory) or name.startswith("_"):
            known = sorted(n for n in dir(tvm) if n.islower() and not n.startswith("_") and callable(getattr(tvm, n)))
            raise ValueError(f"torchvision has no model '{name}'; available: {', '.join(known)}")
        return factory(weights=None), TORCHVISION_INPUT_SHAPE
    try:
        module = importlib.import_module(source)
    except ImportError as error:
        raise ValueError(f"cannot import '{source}' for model spec '{spec}': {error}") from error
    factory = getattr(module, name, None)
    if factory is None:
        raise ValueError(f"module '{source}' has no attribute '{name}'")
    return factory(), None
