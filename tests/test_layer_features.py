import math

import pytest
import torch

import prenet

# One valid configuration per kind, with the torch module it describes (parameter counts are checked against it).
CASES = {
    "linear": (dict(batch=4, in_features=30, out_features=20), lambda: torch.nn.Linear(30, 20)),
    "conv2d": (dict(batch=2, in_channels=3, out_channels=8, kernel_size=5, stride=2, padding=2, height=17, width=17),
               lambda: torch.nn.Conv2d(3, 8, 5, stride=2, padding=2)),
    "convolution": (dict(batch=2, in_channels=4, out_channels=6, in_positions=17, out_positions=13,
                         kernel_positions=5, groups=2), lambda: torch.nn.Conv1d(4, 6, 5, groups=2)),
    "rnn": (dict(batch=2, seq_len=7, input_size=5, hidden_size=6, num_layers=2),
            lambda: torch.nn.RNN(5, 6, num_layers=2)),
    "lstm": (dict(batch=2, seq_len=7, input_size=5, hidden_size=6, bidirectional=True),
             lambda: torch.nn.LSTM(5, 6, bidirectional=True)),
    "gru": (dict(batch=2, seq_len=7, input_size=5, hidden_size=6, num_layers=3, bidirectional=True),
            lambda: torch.nn.GRU(5, 6, num_layers=3, bidirectional=True)),
    "multihead_attention": (dict(batch=2, seq_len=9, embed_dim=16, num_heads=4),
                            lambda: torch.nn.MultiheadAttention(16, 4)),
    "embedding": (dict(batch=2, seq_len=9, num_embeddings=100, embedding_dim=12),
                  lambda: torch.nn.Embedding(100, 12)),
    "layer_norm": (dict(batch=2, seq_len=9, normalized_shape=12), lambda: torch.nn.LayerNorm(12)),
    "batchnorm2d": (dict(batch=2, channels=8, height=5, width=5), lambda: torch.nn.BatchNorm2d(8)),
    "maxpool2d": (dict(batch=2, channels=8, height=7, width=7, kernel_size=3, stride=2, padding=1),
                  lambda: torch.nn.MaxPool2d(3, 2, 1)),
    "avgpool2d": (dict(batch=2, channels=8, height=8, width=8, kernel_size=2, stride=2), lambda: torch.nn.AvgPool2d(2)),
    "relu": (dict(batch=2, features=10), torch.nn.ReLU),
    "gelu": (dict(batch=2, features=10), torch.nn.GELU),
    "tanh": (dict(batch=2, features=10), torch.nn.Tanh),
    "sigmoid": (dict(batch=2, features=10), torch.nn.Sigmoid),
    "silu": (dict(batch=2, features=10), torch.nn.SiLU),
    "softmax": (dict(batch=2, seq_len=3, features=10), lambda: torch.nn.Softmax(-1)),
    "add": (dict(batch=2, features=10), torch.nn.Identity),
    "bmm": (dict(batch=2, m=3, k=4, n=5), torch.nn.Identity),
}


def test_every_kind_of_the_table_has_a_case():
    assert {kind["name"] for kind in prenet.layer_kinds()} == set(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_parameter_counts_match_torch(kind):
    config, build = CASES[kind]
    features = prenet.layer_features(kind, gpu="T4", **config)
    assert features["params"] == sum(p.numel() for p in build().parameters())
    assert features["param_tensors"] == len(list(build().parameters()))
    names = next(k for k in prenet.layer_kinds() if k["name"] == kind)["features"]
    assert list(features) == names
    assert all(math.isfinite(v) and v >= 0 for v in features.values())


def test_issue_example_conv2d():
    f = prenet.layer_features("conv2d", gpu="V100", batch=32, in_channels=64, out_channels=128, kernel_size=3,
                              stride=1, padding=1, height=56, width=56)
    assert f["out_height"] == f["out_width"] == 56
    assert f["co"] == 32 * 56 * 56 * 9 * 64 * 128                 # PreNeT eq. 3
    assert f["forward_flops"] == 2 * f["co"] + 32 * 128 * 56 * 56  # MACs twice plus bias
    assert f["ct_ms"] == pytest.approx(1e3 * f["co"] / 14.13e12)   # eq. 9 with the paper's V100 rate
    assert f["gpu_fp32_tflops"] == 14.13
    assert f["mem_weights"] == 9 * 64 * 128


def test_hardware_features_follow_the_gpu():
    config = CASES["linear"][0]
    v100 = prenet.layer_features("linear", gpu="V100", **config)
    h100 = prenet.layer_features("linear", gpu="H100", **config)
    assert v100["co"] == h100["co"]
    assert h100["ct_ms"] < v100["ct_ms"]
    assert h100["gpu_memory_bandwidth_gbs"] == 3350


def test_pytorch_style_values_are_accepted():
    a = prenet.layer_features("conv2d", batch=1, in_channels=3, out_channels=4, kernel_size=(3, 3), stride=[2, 2],
                              padding=(1, 1), height=8, width=8, bias=False)
    b = prenet.layer_features("conv2d", batch=1, in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1,
                              height=8, width=8, bias=0)
    assert a == b
    lstm = prenet.layer_features("lstm", batch=1, seq_len=1, input_size=2, hidden_size=2, bidirectional=True)
    assert lstm["directions"] == 2


@pytest.mark.parametrize("kind, config, error, pattern", [
    ("conv3d", {"batch": 1}, ValueError, r"unknown layer kind 'conv3d'.*conv2d"),
    ("linear", dict(batch=1, in_features=2, out_features=3, width=4), ValueError, r"unknown key 'width'"),
    ("linear", dict(batch=-1, in_features=2, out_features=3), ValueError, r"batch = -1 is out of range"),
    ("linear", dict(batch=1, in_features=2), ValueError, r"needs 'out_features'"),
    ("conv2d", dict(batch=1, in_channels=1, out_channels=1, kernel_size=9, height=4, width=4, padding=1),
     ValueError, r"kernel_size 9 is larger than the padded height 6"),
    ("conv2d", dict(batch=1, in_channels=1, out_channels=1, kernel_size=(3, 1), height=4, width=4),
     ValueError, r"not square"),
    ("multihead_attention", dict(batch=1, seq_len=4, embed_dim=10, num_heads=4), ValueError,
     r"num_heads 4 does not divide embed_dim 10"),
    ("linear", dict(batch=1.5, in_features=2, out_features=3), TypeError, r"batch must be an integer"),
])
def test_bad_input_names_the_problem(kind, config, error, pattern):
    with pytest.raises(error, match=pattern):
        prenet.layer_features(kind, gpu="V100", **config)


def test_unknown_gpu():
    with pytest.raises(ValueError, match=r"unknown GPU 'V10'.*Tesla V100"):
        prenet.layer_features("linear", gpu="V10", **CASES["linear"][0])


def test_generated_documentation_is_current():
    from conftest import ROOT
    from prenet.docs import render_layer_kinds_markdown

    assert (ROOT / "docs" / "layer_kinds.md").read_text() == render_layer_kinds_markdown(), \
        "regenerate with: .venv/bin/python -m prenet.docs > docs/layer_kinds.md"


def test_the_host_cpu_is_a_device_too():
    """As for predict_layer: "cpu" gives the measured host's figures, an unknown name the closest GPUs."""
    cpu = prenet.layer_features("linear", gpu="cpu", batch=8, in_features=64, out_features=32)
    gpu = prenet.layer_features("linear", gpu="V100", batch=8, in_features=64, out_features=32)
    assert cpu["forward_flops"] == gpu["forward_flops"] and cpu["ct_ms"] > gpu["ct_ms"]
    with pytest.raises(ValueError, match="unknown GPU 'V1000'; closest known"):
        prenet.layer_features("linear", gpu="V1000", batch=8, in_features=64, out_features=32)

