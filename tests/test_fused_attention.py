"""Attention as each device runs it: the math path (products, softmax over the scores, dropout's composite) where the
trace runs, one fused kernel each way on a CUDA GPU under PyTorch 2, which keeps no score matrix
(prenet.fused_attention)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import prenet
from prenet import fused_attention, op_trace
from prenet.fused_attention import _math_path, scaled_dot_product_attention

TORCH_HAS_IT = hasattr(F, "scaled_dot_product_attention")


class SelfAttention(nn.Module):
    """Heads of self-attention through `attend` (a function of q, k, v and keywords), then a linear head."""

    def __init__(self, attend=scaled_dot_product_attention, width=32, heads=4, **keywords):
        super().__init__()
        self.attend, self.keywords, self.heads = attend, keywords, heads
        self.qkv, self.head = nn.Linear(width, 3 * width), nn.Linear(width, 4)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in self.qkv(x).split(w, dim=2))
        return self.head(self.attend(q, k, v, **self.keywords).transpose(1, 2).reshape(b, s, w)).mean(1)


def on(ops, runs_on):
    return [op for op in ops if op.runs_on == runs_on]


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "autocast"])
def test_attention_records_its_math_path_for_the_cpu_and_one_fused_kernel_each_way_for_a_gpu(autocast):
    x = torch.randn(2, 12, 32)
    ops = op_trace.trace_once(SelfAttention(dropout_p=0.1, is_causal=True), x, autocast=autocast)
    fused = on(ops, "cuda")
    kernel = fused_attention.FLASH if autocast else fused_attention.EFFICIENT  # flash takes 2-byte types only
    assert [(op.phase, op.name) for op in fused] == [("forward", kernel + ".default"),
                                                    ("backward", kernel + "_backward.default")]
    forward, backward = fused
    heads = (2, 4, 12, 8)
    assert forward.inputs == [heads] * 3 and forward.outputs == [heads, (2, 4, 12)]
    assert forward.dtype == ("bfloat16" if autocast else "float32") and forward.module == "SelfAttention"
    assert forward.output_dtypes[1] == "float32"  # the log-sum-exp the backward pass reads
    assert backward.inputs == [heads] * 4 + [heads, (2, 4, 12)] and backward.outputs == [heads] * 3
    math_path = [op.name for op in on(ops, "cpu")]
    assert math_path.count("bmm.default") == 2 + 4 and "bernoulli_.float" in math_path  # products, their gradients
    assert all(op.runs_on == "" for op in ops if op.name.startswith("addmm"))  # the rest is every device's
    assert F.dropout.__module__ == "torch.nn.functional"
    if TORCH_HAS_IT:
        assert F.scaled_dot_product_attention.__module__ != fused_attention.__name__  # put back after the trace


def test_the_cpu_costs_the_operators_the_trace_runs_as_without_the_boundary():
    x = torch.randn(2, 12, 32)
    boundary = op_trace.trace_once(SelfAttention(dropout_p=0.1), x)
    # torch's own function object (the math path written out on torch 1.13), which the boundary does not take over
    plain = op_trace.trace_once(SelfAttention(fused_attention._torchs(), dropout_p=0.1), x)
    assert [(op.phase, op.name, op.inputs) for op in boundary if op.runs_on in ("", "cpu")] == \
        [(op.phase, op.name, op.inputs) for op in plain]


def test_a_gpu_costs_the_fused_kernel_as_its_products_and_no_score_matrix():
    shape = (128, 64)  # a sequence of 128 tokens of width 64
    model = SelfAttention(width=64, heads=4)
    ops = prenet.predict(model, batch=8, input_shape=shape, gpu="V100").ops
    fused = ops[ops.op.str.startswith("_scaled_dot_product")]
    assert list(fused.phase) == ["forward", "backward"] and set(fused.kind) == {"bmm"}
    # two products forward; backward their gradients and the scores again (op_costs.fused_attention)
    assert list(fused["count"]) == [2.0, 2.5]
    assert not ops.op.isin(["_softmax.default", "bmm.default"]).any()
    assert (fused.ms > 0).all()
    on_cpu = prenet.predict(model, batch=8, input_shape=shape, gpu="cpu").ops
    # the math path's softmax (torch 2's: _safe_softmax)
    assert on_cpu.op.str.contains("softmax").any() and not on_cpu.op.str.startswith("_scaled_dot_product").any()


def test_the_training_memory_keeps_no_score_matrix():
    """The fused kernel saves q, k, v, its output and a float32 log-sum-exp per query: not the softmax's weights,
    nor their dropout (the math path saves both, 2 x 4 x 256 x 256 elements each here)."""
    def activations(attend):
        return prenet.training_memory(SelfAttention(attend, dropout_p=0.1), batch=2, input_shape=(256, 32),
                                      optimizer="sgd").activations

    scores = 2 * 4 * 256 * 256 * 4
    assert activations(_math_path) - activations(scaled_dot_product_attention) > 2 * scores


@pytest.mark.parametrize("keywords", [dict(), dict(is_causal=True), dict(scale=0.5),
                                      dict(attn_mask=torch.rand(12, 12) > 0.3)],
                         ids=["plain", "causal", "scale", "boolean mask"])
def test_the_boundary_gives_the_math_paths_values_and_gradients(keywords):
    q, k, v = (torch.randn(2, 3, 12, 8, requires_grad=True) for _ in range(3))
    expected = _math_path(q, k, v, **keywords)
    expected_grads = torch.autograd.grad(expected.sum(), (q, k, v))
    with fused_attention.attention_as_devices_run():  # the memory walk's way: gradients by running it again
        found = scaled_dot_product_attention(q, k, v, **keywords)
    assert torch.allclose(found, expected, atol=1e-6)
    for got, want in zip(torch.autograd.grad(found.sum(), (q, k, v)), expected_grads):
        assert torch.allclose(got, want, atol=1e-5)
    if TORCH_HAS_IT:  # the math path written out is torch's
        assert torch.allclose(F.scaled_dot_product_attention(q, k, v, **keywords), expected, atol=1e-5)


@pytest.mark.skipif(not TORCH_HAS_IT, reason="torch 1.13's nn.MultiheadAttention writes its products out")
def test_multihead_attention_under_torch_2_goes_through_the_boundary():
    model = nn.Sequential(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True), nn.Linear(32, 4))
    ops = op_trace.trace_once(model, torch.randn(2, 12, 32))
    assert [op.name for op in on(ops, "cuda") if "attention" in op.name] == [
        fused_attention.EFFICIENT + ".default", fused_attention.EFFICIENT + "_backward.default"]


def test_the_stand_ins_attend_as_the_library_does_sdpa_by_default_or_eager():
    from prenet import reference_models

    small = dict(layers=1, hidden=32, heads=2, intermediate=64, vocab_size=50)
    tokens = torch.randint(50, (1, 16))

    def gpu_ops(attention):
        model = reference_models.BertForSequenceClassification(attention=attention, **small)
        return prenet.predict(model, batch=4, example_input=tokens, gpu="V100").ops.op

    sdpa, eager = gpu_ops("sdpa"), gpu_ops("eager")
    assert sdpa.str.startswith("_scaled_dot_product").sum() == 2 and not sdpa.isin(["_softmax.default"]).any()
    assert not eager.str.startswith("_scaled_dot_product").any() and eager.isin(["_softmax.default"]).any()
    with pytest.raises(ValueError, match="unknown attention 'flash'; the stand-ins take sdpa, eager"):
        reference_models.GPT2LMHeadModel(attention="flash", **{k: small[k] for k in ("layers", "hidden", "heads")})


def test_a_learned_bias_as_the_mask_keeps_its_gradient_through_the_math_path():
    class Biased(SelfAttention):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(12, 12))

        def forward(self, x):
            self.keywords = {"attn_mask": self.bias}
            return super().forward(x)

    model = Biased()
    ops = op_trace.trace_once(model, torch.randn(2, 12, 32))
    assert not on(ops, "cuda") and ops.updated.count(12 * 12) == 1  # the bias is updated: its gradient reached it


def test_blocks_within_blocks_run_torchs_attention_once():
    q, k, v = (torch.randn(2, 3, 12, 8, requires_grad=True) for _ in range(3))
    with fused_attention.attention_as_devices_run(), fused_attention.attention_as_devices_run():
        found = scaled_dot_product_attention(q, k, v)
        assert fused_attention._active[-1].torchs is fused_attention._active[0].torchs
    assert torch.allclose(found, _math_path(q, k, v), atol=1e-6) and not fused_attention._active
