"""Random layer configurations for the timing harness.

Two profiles. "wide" (the default): sizes drawn log-uniformly over the ranges of the PreNeT paper's Table 3 and
beyond them where real models go. "models": layers as convolutional networks build them (channel counts of 3 and
of multiples of 8 that ResNets, VGGs and MobileNets use, "same" padding, square maps of their sizes), which the wide
profile meets rarely (one channel count in 128 is a multiple of 16 there) and which the CPU's convolution library
runs up to twice as fast per FLOP. Every configuration is a pure function of (profile, seed, kind, index), so a
resumed collection draws the same ones. Configurations whose forward pass would exceed the device's work budget are
redrawn.
"""
import functools
import math
import random

# Optimizers of the training-step timing (the harness's names).
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad")
ACTIVATIONS = ("relu", "gelu", "tanh", "sigmoid", "silu")

# Largest forward FLOPs and tensor elements per configuration: the CPU's budget keeps one configuration near
# a second; a GPU's is what a 16 GB card holds and times quickly.
BUDGETS = {"cpu": (2e9, 2 ** 25), "cuda": (2e12, 2 ** 29)}


def log_uniform(rng, low, high):
    """An integer drawn log-uniformly from [low, high]."""
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high + 0.5)) - 1e-12))) or low


def _batch(rng):
    return log_uniform(rng, 1, 64) if rng.random() < 0.8 else log_uniform(rng, 65, 512)


def _linear(rng):
    return dict(batch=_batch(rng), seq_len=1 if rng.random() < 0.5 else log_uniform(rng, 1, 512),
                in_features=log_uniform(rng, 1, 8192), out_features=log_uniform(rng, 1, 8192),
                bias=int(rng.random() < 0.9), activation=rng.choice(("none", "none") + ACTIVATIONS[:3]))


def _conv2d(rng):
    kernel = rng.choice((1, 1, 3, 3, 3, 5, 7))
    size = log_uniform(rng, kernel, 512)
    in_channels = 3 if rng.random() < 0.1 else log_uniform(rng, 1, 1024)
    depthwise = rng.random() < 0.1
    return dict(batch=_batch(rng), in_channels=in_channels,
                out_channels=in_channels if depthwise else log_uniform(rng, 1, 1024),
                kernel_size=kernel, stride=rng.choice((1, 1, 2)),
                padding=rng.choice((0, 1, kernel // 2)), height=size, width=size,
                groups=in_channels if depthwise else 1, bias=int(rng.random() < 0.5))


def _recurrent(rng):
    return dict(batch=_batch(rng), seq_len=log_uniform(rng, 1, 512), input_size=log_uniform(rng, 16, 1024),
                hidden_size=log_uniform(rng, 16, 2048), num_layers=rng.choice((1, 1, 2, 3)),
                bidirectional=int(rng.random() < 0.3))


def _attention(rng):
    heads = rng.choice((1, 2, 4, 8, 12, 16))
    head_dim = log_uniform(rng, 8, 128)
    return dict(batch=_batch(rng), seq_len=log_uniform(rng, 1, 1024), embed_dim=heads * head_dim,
                num_heads=heads)


def _embedding(rng):
    return dict(batch=_batch(rng), seq_len=log_uniform(rng, 1, 1024), num_embeddings=log_uniform(rng, 1000, 500000),
                embedding_dim=log_uniform(rng, 32, 2048))


def _layer_norm(rng):
    return dict(batch=_batch(rng), seq_len=1 if rng.random() < 0.3 else log_uniform(rng, 1, 512),
                normalized_shape=log_uniform(rng, 16, 8192))


def _image(rng):
    return dict(batch=_batch(rng), channels=log_uniform(rng, 1, 1024), height=(s := log_uniform(rng, 1, 256)), width=s)


def _batchnorm2d(rng):
    return _image(rng)


def _pool2d(rng):
    config = _image(rng)
    kernel = rng.choice((2, 2, 3))
    config.update(kernel_size=min(kernel, config["height"]), stride=rng.choice((1, 2, kernel)),
                  padding=rng.choice((0, 0, 1)) if kernel > 2 and config["height"] > 2 else 0)
    return config


def _rows(rng):
    return dict(batch=log_uniform(rng, 1, 4096), features=log_uniform(rng, 1, 16384))


def _activation(rng):
    return dict(_rows(rng), op=rng.choice(ACTIVATIONS))


def _bmm(rng):
    return dict(batch=log_uniform(rng, 1, 256), m=log_uniform(rng, 1, 2048), k=log_uniform(rng, 1, 2048),
                n=log_uniform(rng, 1, 2048))


# Channel counts of convolutional networks (torchvision's ResNets, VGGs, MobileNets, EfficientNets).
MODEL_CHANNELS = (8, 16, 24, 32, 40, 48, 64, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 576, 768, 960, 1024)
# Square feature maps they run on (224 px inputs and their strided halvings; 32 and 64 px inputs).
MODEL_MAPS = (2, 4, 7, 8, 14, 16, 28, 32, 56, 64, 112, 224)


def _conv2d_in_models(rng):
    kernel = rng.choice((1, 1, 3, 3, 3, 5, 7))
    in_channels = 3 if rng.random() < 0.1 else rng.choice(MODEL_CHANNELS)
    depthwise = in_channels > 3 and rng.random() < 0.15 and kernel in (3, 5)
    return dict(batch=_batch(rng), in_channels=in_channels,
                out_channels=in_channels if depthwise else rng.choice(MODEL_CHANNELS),
                kernel_size=kernel, stride=rng.choice((1, 1, 1, 2)), padding=kernel // 2,
                height=(size := rng.choice([m for m in MODEL_MAPS if m >= kernel // 2 + 1])), width=size,
                groups=in_channels if depthwise else 1, bias=int(rng.random() < 0.3))


# The harness's kinds, in its order, with their samplers.
SAMPLERS = {
    "linear": _linear, "conv2d": _conv2d, "rnn": _recurrent, "lstm": _recurrent, "gru": _recurrent,
    "multihead_attention": _attention, "embedding": _embedding, "layer_norm": _layer_norm,
    "batchnorm2d": _batchnorm2d, "maxpool2d": _pool2d, "avgpool2d": _pool2d, "activation": _activation,
    "add": _rows, "softmax": _rows, "bmm": _bmm,
}
# Samplers of each profile; "models" draws the kinds it names only.
PROFILES = {"wide": SAMPLERS, "models": {"conv2d": _conv2d_in_models}}


def _work(kind, config):
    """(forward FLOPs, largest tensor in elements) of a configuration, for the budget check: native features for
    the kinds of the native table, the element count for the harness's `activation` kind."""
    from .layers import layer_features

    keys = _native_keys().get(kind)
    if keys is not None:
        features = layer_features(kind, **{k: v for k, v in config.items() if k in keys})
        return features["forward_flops"], max(features["mem_input"], features["mem_output"], features["mem_weights"])
    elements = math.prod(config[key] for key in ("batch", "channels", "height", "width", "features") if key in config)
    return float(elements), elements


@functools.lru_cache(maxsize=None)
def _native_keys():
    """Configuration keys of each kind of the native table."""
    from .layers import layer_kinds

    return {k["name"]: {p["name"] for p in k["parameters"]} for k in layer_kinds()}


def sampler(kind, profile="wide"):
    """The sampler of `kind` in `profile` (PROFILES); ValueError naming the known profiles or the profile's kinds."""
    if profile not in PROFILES:
        raise ValueError(f"unknown sampling profile '{profile}'; known: {', '.join(PROFILES)}")
    samplers = PROFILES[profile]
    if kind not in samplers:
        raise ValueError(f"the {profile} profile has no harness kind '{kind}'; it has: {', '.join(samplers)}")
    return samplers[kind]


def sample_config(kind, index, seed=0, device="cpu", max_flops=None, profile="wide"):
    """The configuration number `index` of `kind`: the same for the same (profile, seed, kind, index, device,
    max_flops). `max_flops` lowers the device's forward-FLOP budget."""
    draw = sampler(kind, profile)
    device_flops, max_elements = BUDGETS["cuda" if device.startswith("cuda") else "cpu"]
    max_flops = min(device_flops, max_flops or device_flops)
    # the wide profile's seeds as they always were, so that its data sets draw the same configurations
    rng = random.Random(f"{seed}:{kind}:{index}" if profile == "wide" else f"{profile}:{seed}:{kind}:{index}")
    for _ in range(1000):
        config = draw(rng)
        flops, elements = _work(kind, config)
        if flops <= max_flops and elements <= max_elements:
            config["optimizer"] = rng.choice(OPTIMIZERS)
            return config
    raise RuntimeError(f"no configuration of {kind} fits the budget")  # pragma: no cover
