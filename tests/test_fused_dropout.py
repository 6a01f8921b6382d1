"""Dropout as each device runs it: the composite of noise and a product everywhere but on a CUDA GPU, which runs one
fused kernel each way and keeps a one-byte mask (prenet.fused_dropout)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import prenet
from prenet import fused_dropout, op_trace

COMPOSITE_FORWARD = ["empty_like.default", "bernoulli_.float", "div_.Scalar", "mul.Tensor"]


class Block(nn.Module):
    """A linear layer, nn.Dropout, attention with dropout of its weights inside, and a functional dropout."""

    def __init__(self, p=0.1, inplace=False):
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.dropout = nn.Dropout(p, inplace=inplace)
        self.attention = nn.MultiheadAttention(16, 2, dropout=p, batch_first=True)
        self.head = nn.Linear(16, 4)
        self.p = p

    def forward(self, x):
        x = self.dropout(self.linear(x))
        x = self.attention(x, x, x, need_weights=False)[0]
        return self.head(F.dropout(x, self.p, self.training)).mean(1)


def names(ops, runs_on):
    return [(op.phase, op.name) for op in ops if op.runs_on == runs_on]


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "autocast"])
def test_each_dropout_records_the_composite_for_the_cpu_and_one_fused_kernel_each_way_for_a_gpu(autocast):
    # (under autocast's emulated casts, which had run the boundary twice for each call)
    ops = op_trace.trace_once(Block(), torch.randn(3, 5, 16), autocast=autocast)
    fused = [(phase, name) for phase, name in names(ops, "cuda") if "dropout" in name]
    # torch 2's attention drops its weights inside its own fused kernel (prenet.fused_attention)
    dropouts = 2 if hasattr(F, "scaled_dot_product_attention") else 3
    assert fused == [("forward", fused_dropout.FORWARD)] * dropouts + [("backward", fused_dropout.BACKWARD)] * dropouts
    composite = names(ops, "cpu")
    assert [name for phase, name in composite if phase == "forward" and name in COMPOSITE_FORWARD] == \
        COMPOSITE_FORWARD * 3
    assert [name for phase, name in composite if phase == "backward" and name == "mul.Tensor"] == ["mul.Tensor"] * 3
    # the GPU's kernels: output and a one-byte mask forward, the gradient scaled by the mask backward
    forward = next(op for op in ops if op.name == fused_dropout.FORWARD)
    dtype = "bfloat16" if autocast else "float32"  # the first dropout's input: a linear layer's output
    assert forward.outputs == [forward.inputs[0]] * 2 and forward.output_dtypes == [dtype, "bool"]
    assert forward.arguments[1:] == [0.1, True] and forward.module == "dropout"
    backward = next(op for op in ops if op.name == fused_dropout.BACKWARD)
    assert backward.input_dtypes[1] == "bool" and backward.arguments[2] == pytest.approx(1 / 0.9)
    assert F.dropout.__module__ == "torch.nn.functional"  # put back after the trace


def test_a_model_traced_again_under_autocast_records_its_attention_dropout_each_time():
    """The emulated autocast runs torch.nn.functional's composites (multi_head_attention_forward) as copies; their
    copy of the module's names had been taken at the first trace, so later traces' attention dropout went to the
    first trace's recorder and was missing from theirs, on every device."""
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.head = nn.MultiheadAttention(16, 2, dropout=0.1, batch_first=True), nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.attention(x, x, x, need_weights=False)[0]).mean(1)

    model = Attention()
    traces = [op_trace.trace_once(model, torch.randn(3, 5, 16), autocast=True) for _ in range(3)]
    assert len({len(ops) for ops in traces}) == 1
    for ops in traces:
        assert sum(op.runs_on == "cuda" for op in ops) == 2  # the GPU's dropout, or its attention, each way
        assert sum(op.name == "bernoulli_.float" for op in ops) == 1  # the composite, for the CPU


@pytest.mark.filterwarnings("ignore:this machine.s CPU")
def test_the_gpu_costs_the_fused_kernels_and_the_cpu_the_composite():
    model, shape = nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.2), nn.Linear(256, 256)), (256,)
    on_gpu = prenet.predict(model, batch=512, gpu="V100", input_shape=shape).ops
    assert list(on_gpu.op[on_gpu.op.str.startswith("native_dropout")]) == [fused_dropout.FORWARD,
                                                                          fused_dropout.BACKWARD]
    assert not on_gpu.op.isin(["bernoulli_.float", "div_.Scalar"]).any()
    forward = on_gpu[on_gpu.op == fused_dropout.FORWARD].iloc[0]
    assert forward.bytes == 512 * 256 * (4 + 4 + 1)  # reads x, writes the output and the mask
    on_cpu = prenet.predict(model, batch=512, gpu="cpu", input_shape=shape).ops
    assert not on_cpu.op.str.startswith("native_dropout").any()
    assert list(on_cpu.op[on_cpu.phase == "forward"]).count("bernoulli_.float") == 1


@pytest.mark.parametrize("model", [Block(p=0.0), nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.1, inplace=True)),
                                   nn.Sequential(nn.Linear(16, 16), nn.Dropout(1.0)), Block().eval()],
                         ids=["p=0", "in place", "p=1", "eval"])
def test_dropout_a_gpu_does_not_fuse_keeps_its_composite_everywhere(model):
    ops = op_trace.trace_once(model, torch.randn(3, 5, 16))
    assert not any(op.name.startswith("native_dropout") for op in ops)
    assert all(op.runs_on == "" for op in ops if op.name in COMPOSITE_FORWARD)


def test_the_training_memory_keeps_a_one_byte_mask():
    def activations(model):
        return prenet.training_memory(model, batch=64, input_shape=(32,), optimizer="sgd").activations

    with_dropout = nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.5), nn.Linear(32, 32))
    without = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32))
    assert activations(with_dropout) - activations(without) == 64 * 32  # the mask, a byte an element


def test_a_model_traced_for_real_sees_dropouts_values():
    class Branching(nn.Module):  # a branch on a value: traced for real on the CPU
        def __init__(self):
            super().__init__()
            self.linear, self.dropout = nn.Linear(8, 8), nn.Dropout(0.5)

        def forward(self, x):
            y = self.dropout(self.linear(x))
            assert torch.isfinite(y).all() and (y == 0).any()  # dropped elements, the rest scaled
            return y * 2 if y.sum() > 0 else y

    model = Branching()
    torch.manual_seed(0)
    estimate = prenet.predict(model, batch=64, gpu="T4", input_shape=(8,))
    assert estimate.traced == "cpu"
    assert (estimate.ops.op == fused_dropout.FORWARD).sum() == 1
