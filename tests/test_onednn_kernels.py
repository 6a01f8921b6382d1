"""The implementation labels of CPU convolutions (prenet.onednn_kernels) and their use by the CPU set's loader."""
import csv
import warnings

import pytest
import torch

from prenet import datasets, onednn_kernels
from prenet.onednn_kernels import CONV_KEYS, NATIVE

DEPTHWISE = dict(batch=2, in_channels=32, out_channels=32, kernel_size=3, stride=1, padding=1, height=16, width=16,
                 groups=32, bias=1)
# PyTorch 1.13's rule keeps a 1x1 unstrided convolution at a batch under 16 on one thread out of oneDNN
POINTWISE_SMALL_BATCH = dict(batch=1, in_channels=64, out_channels=64, kernel_size=1, stride=1, padding=0, height=8,
                             width=8, groups=1, bias=0)
DENSE = dict(batch=16, in_channels=32, out_channels=64, kernel_size=3, stride=1, padding=1, height=28, width=28,
             groups=1, bias=0)


def verbose(implementation, prop_kind):
    return (f"onednn_verbose,exec,cpu,convolution,{implementation},{prop_kind},src_f32::blocked:aBcd16b:f0,"
            "attr-scratchpad:user ,alg:convolution_direct,mb2_ic32oc32,0.05")


def test_a_label_names_each_passs_implementation_and_native_where_onednn_ran_none():
    lines = ["onednn_verbose,info,oneDNN v2.6.3 (commit N/A)",
             "onednn_verbose,exec,cpu,reorder,jit:blk,undef,src_f32::blocked:abcd:f0,,2x32x16x16,0.01",
             verbose("jit_dw:avx512_core", "forward_training"), verbose("x64:gemm:jit", "backward_weights")]
    assert onednn_kernels.label_of(lines) == f"jit_dw:avx512_core|{NATIVE}|x64:gemm:jit"
    assert onednn_kernels.label_of([]) == "|".join([NATIVE] * 3)
    # the first convolution of a pass is its implementation (a later one of the same pass is not the layer's)
    assert onednn_kernels.label_of([verbose("jit:avx512_core", "forward_training"),
                                    verbose("x64:gemm:jit", "forward_training")]).startswith("jit:avx512_core|")


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch is built without oneDNN (mkldnn)")
def test_labelling_runs_each_configuration_and_tells_the_implementations_apart():
    labels = onednn_kernels.label_configurations([DEPTHWISE, POINTWISE_SMALL_BATCH, DENSE], isa="AVX2")
    assert len(labels) == 3 and all(len(label.split("|")) == 3 for label in labels)
    depthwise, pointwise, dense = labels
    # oneDNN kept to the instruction set asked for (the measuring host's), whatever this CPU has
    assert "dw" in depthwise.split("|")[0] and "avx2" in depthwise
    assert NATIVE not in dense and "avx2" in dense.split("|")[0]
    if torch.__version__.startswith("1."):
        assert pointwise == "|".join([NATIVE] * 3)


def write_labels(path, configs, labels):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, [*CONV_KEYS, "kernel"])
        writer.writeheader()
        for config, label in zip(configs, labels):
            writer.writerow({**config, "kernel": label})


def test_the_loader_gives_convolutions_their_labels_or_none_with_a_warning_where_some_lack_one(tmp_path):
    import pandas as pd

    frame = pd.DataFrame([DEPTHWISE, DENSE]).assign(gpu="host", optimizer="sgd", train_ms=[1.0, 2.0])
    path = tmp_path / "conv2d.csv"
    write_labels(path, [DEPTHWISE, DENSE], ["a|a|a", "b|b|b"])
    assert datasets.with_kernel_labels(frame, path)["kernel"].tolist() == ["a|a|a", "b|b|b"]
    write_labels(path, [DENSE], ["b|b|b"])
    with pytest.warns(UserWarning, match="labels 1 of the 2 convolutions"):
        assert "kernel" not in datasets.with_kernel_labels(frame, path)


def test_the_committed_labels_cover_the_cpu_sets_convolutions():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a configuration without a label warns
        frame = datasets.load_cpu()["conv2d"]
    assert frame["kernel"].notna().all()
    counts = frame["kernel"].value_counts()
    assert counts.index[0] == "jit:avx512_core|jit:avx512_core|jit:avx512_core"  # the blocked direct kernels
    # the rows PyTorch keeps from oneDNN are those its rule names: 1x1, unstrided, batch under 16 ... or tiny
    native = frame[frame["kernel"] == "|".join([NATIVE] * 3)]
    pointwise = (native["kernel_size"] == 1) & (native["stride"] == 1) & (native["batch"] < 16)
    tiny = (native["batch"] == 1) & (native["groups"] == 1) & (native["kernel_size"] <= 3) & (
        native["in_channels"] * native["height"] * native["width"] <= 20480)
    assert len(native) > 100 and (pointwise | tiny).all()
