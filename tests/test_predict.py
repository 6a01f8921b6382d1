"""prenet.predict: whole-model training time from the operator-level walk, and its errors."""
import json
import math
import shutil
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

import prenet
from prenet import op_costs, op_trace, predictors, uncertainty


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(y.flatten(1))


class FunctionalBlock(nn.Module):
    """Attention written with matmul and softmax, and a residual add, as Hugging Face models do."""

    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, input_ids=None, features=None):
        q, k, v = self.qkv(features).chunk(3, dim=-1)
        attention = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1)
        return self.norm(features + attention @ v)


def test_epoch_is_the_steps_of_every_batch_including_the_last_partial_one():
    estimate = prenet.predict(SmallCnn(), batch=8, gpu="V100", input_shape=(3, 16, 16), dataset_size=20)
    assert estimate.iterations == 3
    partial = prenet.predict(SmallCnn(), batch=4, gpu="V100", input_shape=(3, 16, 16), dataset_size=4)
    # Steps overlap in the launch queue: an epoch is at least its steps' host or device work, at most their sum.
    work = [(2 * estimate.host_ms + partial.host_ms), (2 * estimate.device_ms + partial.device_ms)]
    assert 1e-3 * max(work) <= estimate.epoch_seconds * (1 + 1e-9)
    assert estimate.epoch_seconds <= 1e-3 * sum(work) * (1 + 1e-9)
    assert 1e-3 * max(estimate.device_ms, estimate.host_ms) <= estimate.step_seconds * (1 + 1e-9)
    assert "per epoch" in repr(estimate) and "V100" in repr(estimate)
    assert "(3 steps of batch 8, 20 samples, the last of 4)" in repr(estimate)
    smaller = prenet.predict(SmallCnn(), batch=8, gpu="V100", input_shape=(3, 16, 16), dataset_size=3)
    assert "(1 step of 3 samples (all, fewer than the batch of 8))" in repr(smaller)
    layers = estimate.layers.set_index("name")
    for name in ("conv", "bn", "pool", "fc"):
        assert layers.loc[name, "forward_ms"] > 0, name
    assert layers.loc["conv", "backward_ms"] > 0 and layers.loc["conv", "flops"] > 0
    assert set(layers.columns) >= {"kinds", "operations", "flops", "bytes", "forward_ms", "backward_ms", "step_share"}
    # each layer's input as its forward received it, not its first operator's (BatchNorm's first updates its step
    # counter, a Linear's first transposes its weight)
    assert layers["input_shape"].dropna().to_dict() == {
        "SmallCnn": (8, 3, 16, 16), "conv": (8, 3, 16, 16), "bn": (8, 8, 16, 16), "pool": (8, 8, 16, 16),
        "fc": (8, 512)}


class ResidualStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.Linear(32, 32))
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        return self.norm(self.layers(x) * 0.5 + x)


def reshape_views_named_alike(ops):
    """`ops` as a list, with the view a reshape makes named one way: torch 1.13 records it as _reshape_alias,
    torch 2 as view."""
    return ["(reshape view)" if op in ("_reshape_alias.default", "view.default") else op for op in ops]


def test_modules_are_found_only_when_per_module_tables_are_read(monkeypatch):
    """predict traces once, without modules (its times do not depend on them); reading .layers or .ops traces the
    step again with them, once, and the operators and times are the same."""
    traces = []
    trace_once = op_trace.trace_once
    monkeypatch.setattr(op_trace, "trace_once", lambda *a, **k: traces.append(k.get("attribute", True)) or
                        trace_once(*a, **k))
    estimate = prenet.predict(ResidualStack(), batch=4, gpu="A100", input_shape=(32,), dataset_size=8)
    assert traces == [False] and estimate.traced == "meta"
    layers, ops = estimate.layers, estimate.ops
    assert traces == [False, True]
    assert {"layers.0", "layers.1", "layers.2", "layers.3", "norm", "(loss)", "(autograd)"} <= set(layers["name"])
    assert ops["ms"].sum() + estimate.optimizer_ms == pytest.approx(estimate.device_ms)
    unattributed = op_trace.trace_once(ResidualStack().train(), torch.empty(4, 32, device="meta"), meta=True,
                                       attribute=False)
    assert {op.module for op in unattributed} == {""} and {op.module_input for op in unattributed} == {None}
    assert [(op.name, op.inputs) for op in unattributed] == list(zip(ops["op"], ops["inputs"]))


def test_per_module_tables_of_a_model_changed_since_predict_are_refused():
    model = ResidualStack()
    estimate = prenet.predict(model, batch=4, gpu="A100", input_shape=(32,), dataset_size=8)
    model.layers[2] = nn.Linear(32, 48)
    model.layers[3] = nn.Linear(48, 32)
    with pytest.raises(ValueError, match="no longer runs the operators it was traced with"):
        estimate.layers
    assert estimate.epoch_seconds > 0  # the estimate itself stands


@pytest.mark.parametrize("gpu", ["A100", "cpu"])
def test_each_backward_operator_is_counted_to_the_module_whose_forward_made_it(gpu):
    """Three linear layers of one shape: each has its own gradient products (the first only its weight's, as its
    input needs no gradient); the residual scale and add are the enclosing module's; only the loss's own gradient
    belongs to no module."""
    estimate = prenet.predict(ResidualStack(), batch=4, gpu=gpu, input_shape=(32,), dataset_size=8)
    backward = estimate.ops[estimate.ops["phase"] == "backward"]
    products = backward[backward["kind"] == "linear"].groupby("module")["op"].count().to_dict()
    assert products == {"layers.0": 1, "layers.2": 2, "layers.3": 2}
    # (the ReLU's saved output, unpacked for its gradient, is a copy autograd makes without the dispatcher)
    assert set(backward.loc[backward["module"] == "layers.1", "op"]) == {"threshold_backward.default"}
    assert "mul.Tensor" in set(backward.loc[backward["module"] == "ResidualStack", "op"])
    assert "native_layer_norm_backward.default" in set(backward.loc[backward["module"] == "norm", "op"])
    # the loss's own gradient: the protocol's cross-entropy (op_trace.training_loss, which prenet.measure trains
    # with) backward from a gradient of ones
    assert reshape_views_named_alike(backward.loc[backward["module"] == "(autograd)", "op"]) == [
        "ones_like.default", "nll_loss_backward.default", "_log_softmax_backward_data.default", "(reshape view)"]
    # forward: the loss the step takes from the output (a cross-entropy against the labels, which the protocol keeps
    # resident with the data: no kernel makes them in the step) belongs to no module either
    forward = estimate.ops[estimate.ops["phase"] == "forward"]
    assert set(reshape_views_named_alike(forward.loc[forward["module"] == "(loss)", "op"])) == {
        "(reshape view)", "_log_softmax.default", "nll_loss_forward.default"}
    assert "(loss)" in set(estimate.layers["name"]) and "" not in set(estimate.layers["name"])
    layers = estimate.layers.set_index("name")
    assert layers.loc["layers.2", "backward_ms"] == pytest.approx(layers.loc["layers.3", "backward_ms"])
    assert layers.loc["layers.0", "backward_ms"] < layers.loc["layers.2", "backward_ms"]


def test_functional_operations_are_counted_not_dropped():
    model = FunctionalBlock()
    inputs = {"features": torch.randn(1, 12, 16)}
    estimate = prenet.predict(model, batch=4, gpu="A100", example_input=inputs, dataset_size=8)
    ops = estimate.ops
    forward = ops[ops["phase"] == "forward"]
    assert {"bmm", "softmax", "add", "linear", "layer_norm"} <= set(forward["kind"].dropna())
    assert (ops.loc[ops["how"] != "view", "ms"] > 0).all()
    assert (ops.loc[ops["how"] == "view", "ms"] == 0).all()
    # Every operator of the step is in the table, backward ones included.
    assert len(ops[ops["phase"] == "backward"]) > 5


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.branch = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x):
        hidden = self.stem(x)
        return hidden + torch.relu(self.branch(hidden))


def test_the_tables_count_each_operator_by_the_kernel_it_runs():
    """A backward product is one GEMM (2 x rows x in x out FLOPs), not a linear layer's whole backward, and a
    gradient add in the backward phase runs an add kernel (not an add layer's free backward)."""
    model = nn.Sequential(nn.Linear(64, 128, bias=False), nn.ReLU(), nn.Linear(128, 32, bias=False))
    estimate = prenet.predict(model, batch=16, gpu="V100", input_shape=(64,))
    products = estimate.ops[estimate.ops["kind"] == "linear"]
    assert sorted(products["flops"]) == sorted([2 * 16 * 64 * 128] * 2 + [2 * 16 * 128 * 32] * 3)  # no dX first
    layers = estimate.layers.set_index("name")
    assert layers.loc["0", "flops"] == 2 * (2 * 16 * 64 * 128) and layers.loc["2", "flops"] == 3 * (2 * 16 * 128 * 32)
    ops = prenet.predict(Residual(), batch=16, gpu="V100", input_shape=(64,)).ops
    # the hidden state feeds the branch and the sum: autograd adds its two gradients
    adds = ops[(ops["phase"] == "backward") & (ops["kind"] == "add") & (ops["how"] != "traffic")]
    assert len(adds) == 1 and adds["flops"].item() == 16 * 64 and adds["bytes"].item() == 3 * 4 * 16 * 64


def test_a_steps_forward_is_costed_as_timed_inside_training_steps_and_a_backward_product_as_timed_alone():
    """The CPU set times a layer's forward alone and inside training steps, where autograd records for the
    backward pass (longer); the step's forward operators take the latter, the backward pass's products of the
    same shape the former."""
    model = nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 64, bias=False))
    ops = prenet.predict(model, batch=64, gpu="cpu", input_shape=(64,)).ops
    products = ops[ops["kind"] == "linear"]
    assert sorted(products["phase"]) == ["backward"] * 3 + ["forward"] * 2  # no dX for the first layer
    # every product is (64 x 64) by (64 x 64): one configuration
    config = {"batch": 1, "seq_len": 64, "in_features": 64, "out_features": 64, "bias": 0}
    assert all(c == config for c in products["config"])
    t = prenet.layer_time("linear", gpu="cpu", **config)
    assert t["step_forward_basis"] == "predicted" and t["step_forward_ms"] != pytest.approx(t["forward_ms"])
    for phase, ms, count in (("forward", t["step_forward_ms"], 2), ("backward", t["forward_ms"], 3)):
        assert products.loc[products["phase"] == phase, "ms"].tolist() == pytest.approx([ms] * count)


def test_a_frozen_layers_forward_is_costed_as_timed_alone():
    """A layer whose weights and input need no gradient (a frozen backbone being fine-tuned past) is not recorded by
    autograd, so its forward runs as in inference: costed by the forward alone, a trainable one after it by the
    forward inside a training step."""
    model = nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 64, bias=False))
    model[0].weight.requires_grad_(False)
    ops = prenet.predict(model, batch=64, gpu="cpu", input_shape=(64,)).ops
    products = ops[(ops["kind"] == "linear") & (ops["phase"] == "forward")]
    config = {"batch": 1, "seq_len": 64, "in_features": 64, "out_features": 64, "bias": 0}
    t = prenet.layer_time("linear", gpu="cpu", **config)
    assert products["ms"].tolist() == pytest.approx([t["forward_ms"], t["step_forward_ms"]])
    assert sorted(ops.loc[(ops["kind"] == "linear"), "phase"]) == ["backward", "forward", "forward"]  # dW of the last
    traced = op_trace.trace_once(model, torch.randn(8, 64))
    assert [op.autograd_records for op in traced if op.name == "mm.default" and op.phase == "forward"] == [False, True]


def test_shapes_extrapolated_from_small_batches_match_a_trace_at_the_batch():
    model = SmallCnn()
    make = lambda b: torch.randn(b, 3, 16, 16)  # noqa: E731
    extrapolated = op_trace.at_batch(op_trace.trace_small(model, make), 7)
    direct = op_trace.trace_once(model, make(7))
    assert [(o.name, o.inputs, o.outputs) for o in extrapolated] == [(o.name, o.inputs, o.outputs) for o in direct]


@pytest.mark.parametrize("gpu", ["V100", "cpu"])
def test_the_update_covers_only_the_parameters_a_step_gives_a_gradient(gpu):
    """PyTorch's optimizers skip a parameter without a gradient (an unused head, a teacher run without gradients):
    the update, its kernels and its host's per-tensor cost, is the updated parameters' alone."""
    from idle_parameters import WithIdleParameters

    run = dict(batch=8, gpu=gpu, input_shape=(64,), dataset_size=64, optimizer="adam", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this CPU is not the measured host
        idle, alone = prenet.predict(WithIdleParameters(64, 2048), **run), prenet.predict(nn.Linear(64, 64), **run)
    assert idle.optimizer_ms == pytest.approx(alone.optimizer_ms, rel=1e-9)


def test_a_model_converted_to_sync_batchnorm_is_predicted_as_on_one_gpu():
    """SyncBatchNorm refuses tensors off a GPU, meta ones included; on one GPU it is the plain batch norm, and so
    is it costed (step, memory, features), the model left as it was."""
    plain = SmallCnn()
    synced = nn.SyncBatchNorm.convert_sync_batchnorm(SmallCnn())
    run = dict(batch=4, input_shape=(3, 16, 16), dataset_size=8)
    for gpu in ("V100", "H100"):
        assert prenet.predict(synced, gpu=gpu, progress=False, **run).step_seconds == pytest.approx(
            prenet.predict(plain, gpu=gpu, progress=False, **run).step_seconds, rel=1e-12)
    assert prenet.training_memory(synced, **run) == prenet.training_memory(plain, **run)
    features = prenet.model_features(synced, batch=4, input_shape=(3, 16, 16)).set_index("name")
    assert features.loc["bn", "kind"] == "batchnorm2d"
    assert isinstance(synced.bn, nn.SyncBatchNorm) and "forward" not in vars(synced.bn)
    if torch.__version__ < "2":  # torch 2.11 runs it on the CPU without a process group (GPU session 2026-11-27)
        with pytest.raises(ValueError, match="SyncBatchNorm expected input tensor to be on GPU"):
            synced(torch.randn(2, 3, 16, 16))  # as PyTorch has it, outside prenet's walks
    # measured as on one GPU too (torch 1.13's SyncBatchNorm refuses the CPU, torch 2's runs the plain batch norm)
    before = {name: value.clone() for name, value in synced.state_dict().items()}
    measured = prenet.measure(synced, device="cpu", **run)
    assert measured.iterations == 2 and measured.epoch_seconds > 0
    assert isinstance(synced.bn, nn.SyncBatchNorm) and "forward" not in vars(synced.bn)
    assert all(torch.equal(value, before[name]) for name, value in synced.state_dict().items())


def test_a_float64_model_is_refused_and_complex_weights_are_said_to_be_costed_as_real():
    """Double precision runs at a GPU's FP64 rate, which no predictor or catalog figure covers: refused, not
    costed as fp32 (a T4's FP64 rate is 1/32 of its FP32 rate). Complex weights are costed as real operators of the
    same shapes, and the caller is told."""
    with pytest.raises(ValueError, match=r"the model has 5,130 float64 weights: prenet predicts fp32, bf16 and fp16 "
                                         r"training .* \(model.float\(\)\)"):
        prenet.predict(nn.Linear(512, 10).double(), batch=4, gpu="T4", input_shape=(512,))

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight, self.out = nn.Parameter(torch.randn(8, 8, dtype=torch.cfloat)), nn.Linear(8, 2)

        def forward(self, x):
            return self.out((x.to(torch.cfloat) @ self.weight).real)

    with pytest.warns(UserWarning, match="the model has 64 complex weights: their operators are costed as real") as got:
        assert prenet.predict(Spectral(), batch=4, gpu="V100", input_shape=(8,), progress=False).step_seconds > 0
    assert got[0].filename == __file__  # attributed to the caller


def test_a_model_of_billions_of_weights_is_costed_in_streaming_kernels_the_add_kind_takes():
    """Adam's update of 3.2 billion weights in one multi-tensor group, and traffic of more than 2^31 elements, are
    add-shaped kernels in rows of at most the add kind's longest row (it had refused the update: 'features =
    2684682240 is out of range'); a streaming kernel's time follows its elements, so twice the weights take twice as
    long."""
    from prenet._native import core

    add = next(kind for kind in core().layer_kinds() if kind["name"] == "add")
    assert {p["name"]: p["max"] for p in add["parameters"]}["features"] == op_costs.ADD_ROW_LIMIT
    assert op_costs.traffic(3 * 2 ** 33).config == {"batch": 4, "features": 2 ** 31}
    assert op_costs.traffic(30).config == {"batch": 1, "features": 10}

    def stack(layers):  # on the meta device: no memory for its weights
        return nn.Sequential(*[nn.Linear(8192, 8192, device="meta") for _ in range(layers)])

    run = dict(batch=8, gpu="H100", input_shape=(8192,), optimizer="adam", progress=False)
    large, half = prenet.predict(stack(48), **run), prenet.predict(stack(24), **run)
    assert large.optimizer_ms == pytest.approx(2 * half.optimizer_ms, rel=0.01)


def test_sparse_embedding_gradients_are_refused_where_pytorchs_optimizer_refuses_them():
    """Adam, AdamW and RMSprop raise on a sparse gradient (an embedding with sparse=True) in PyTorch: so does the
    estimate, naming the embeddings and what trains them; SGD and Adagrad take them."""
    model = nn.Sequential(nn.Embedding(1000, 16, sparse=True), nn.Flatten(), nn.Linear(16 * 5, 2))
    run = dict(batch=4, gpu="V100", example_input=torch.randint(0, 1000, (1, 5)), progress=False)
    for optimizer in ("sgd", "adagrad"):
        assert prenet.predict(model, optimizer=optimizer, **run).step_seconds > 0
    for optimizer, named in (("adam", "Adam"), (torch.optim.AdamW, "AdamW"), ("rmsprop", "RMSprop")):
        with pytest.raises(ValueError, match=rf"the model's embeddings '0' have sparse gradients \(sparse=True\), "
                                             rf"which PyTorch's {named} refuses; train with sgd or adagrad"):
            prenet.predict(model, optimizer=optimizer, **run)
        embedding = nn.Embedding(10, 2, sparse=True)  # as PyTorch itself has it
        embedding(torch.tensor([1, 2])).sum().backward()
        step = (getattr(torch.optim, named) if isinstance(optimizer, str) else optimizer)(embedding.parameters())
        with pytest.raises(RuntimeError, match="does not support sparse gradients"):
            step.step()


class Lookup(nn.Module):
    """An embedding table looked up 5 times a sample, averaged, and a linear head."""

    def __init__(self, rows, sparse):
        super().__init__()
        self.table, self.head = nn.Embedding(rows, 16, sparse=sparse), nn.Linear(16, 2)

    def forward(self, tokens):
        return self.head(self.table(tokens).mean(1))


def test_a_sparse_gradient_is_costed_by_the_rows_it_holds_not_by_its_table():
    """A sparse gradient wraps the looked-up rows (no kernel: its operators are views), and plain SGD and Adagrad
    update those rows only; SGD with momentum is costed dense (its buffer). They had been costed as the whole table:
    a 2-million-row table took 4.9 ms of backward and 1.9 ms of plain SGD on a V100 at batch 256."""
    run = dict(batch=256, gpu="V100", example_input=torch.randint(0, 2_000_000, (1, 5)), dataset_size=512,
               progress=False)
    for optimizer in ("sgd_plain", "adagrad"):
        dense = prenet.predict(Lookup(2_000_000, sparse=False), optimizer=optimizer, **run)
        sparse = prenet.predict(Lookup(2_000_000, sparse=True), optimizer=optimizer, **run)
        assert sparse.optimizer_ms < dense.optimizer_ms / 10
        # the table's backward: dense, the gradient zero-filled and the rows added; sparse, views of the looked-up
        # rows (torch 1) and at most a copy of them (torch 2's AccumulateGrad clones a sparse gradient into .grad)
        def table_backward(estimate):
            return estimate.ops[(estimate.ops["phase"] == "backward") & (estimate.ops["module"] == "table")]

        rows, looked_up_bytes = table_backward(sparse), 256 * 5 * 16 * 4
        assert len(rows) > 0 and rows["bytes"].sum() <= 2 * looked_up_bytes + 64
        assert rows["ms"].sum() < table_backward(dense)["ms"].sum() / 100
    momentum = [prenet.predict(Lookup(2_000_000, sparse), optimizer="sgd", **run).optimizer_ms
                for sparse in (False, True)]
    assert momentum[0] == pytest.approx(momentum[1], rel=1e-9)


def test_a_sparse_gradients_rows_are_the_lookups_and_grow_with_the_batch():
    model, tokens = Lookup(1000, sparse=True), torch.randint(0, 1000, (4, 5))
    meta = op_trace.trace_once(model, tokens.to("meta"), meta=True)
    assert meta.updated == (1000 * 16, 2 * 16, 2) and meta.touched == (4 * 5 * 16, 2 * 16, 2)
    # traced for real at two batches and extrapolated, as a model the meta device cannot run is
    small = op_trace.trace_small(model, lambda b: torch.randint(0, 1000, (b, 5)))
    assert op_trace.at_batch(small, 64).touched == (64 * 5 * 16, 2 * 16, 2)
    assert op_trace.trace_once(Lookup(1000, sparse=False), tokens).touched == (1000 * 16, 2 * 16, 2)


def test_a_sparse_tensors_operators_are_recorded_by_its_values():
    """A sparse gradient's operators read and write its values, not its dense size (torch 2's AccumulateGrad clones
    it into .grad, which had been costed as a copy of the whole table)."""
    ops = op_trace.trace_once(Lookup(1000, sparse=True), torch.randint(0, 1000, (4, 5)))
    made = next(op for op in ops if op.name.startswith("_sparse_coo_tensor"))
    assert made.outputs == [(4 * 5, 16)]


def test_optimizer_with_more_state_costs_more():
    sgd = prenet.predict(SmallCnn(), batch=16, gpu="T4", input_shape=(3, 16, 16), optimizer="sgd_plain")
    adam = prenet.predict(SmallCnn(), batch=16, gpu="T4", input_shape=(3, 16, 16), optimizer="adam")
    assert adam.optimizer_ms > sgd.optimizer_ms > 0


def test_fp32_convolutions_use_tf32_tensor_cores_where_pytorch_does():
    model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))

    def conv_ms(gpu, precision):
        layers = prenet.predict(model, batch=32, gpu=gpu, input_shape=(64, 56, 56), precision=precision).layers
        convs = layers[layers["name"].isin(["0", "2"])]
        return convs["forward_ms"].sum(), convs["backward_ms"].sum(), layers.loc[layers["name"] == "1", "forward_ms"]

    for gpu, faster in (("A100", True), ("H100", True), ("V100", False)):   # V100: tensor cores without TF32
        default, strict = conv_ms(gpu, "fp32"), conv_ms(gpu, "fp32_strict")
        # on TF32, with cuDNN's implicit-GEMM overhead (prenet.implicit_gemm), still well under the CUDA-core time
        assert (default[0] < 0.6 * strict[0] and default[1] < 0.6 * strict[1]) if faster else default[:2] == strict[:2]
        assert default[2].tolist() == strict[2].tolist()                      # the ReLU is not a convolution
    conv = dict(batch=32, in_channels=64, out_channels=64, kernel_size=3, padding=1, height=56, width=56)
    assert prenet.predict_layer("conv2d", gpu="A100", **conv) < prenet.predict_layer(
        "conv2d", gpu="A100", precision="fp32_strict", **conv)
    with pytest.raises(ValueError, match="unknown precision 'int8'; known: fp32, fp32_strict, tf32, bf16, fp16"):
        prenet.layer_time("conv2d", gpu="A100", precision="int8", **conv)


@pytest.mark.parametrize("layer, shape", [
    (nn.Conv1d(64, 128, 5, padding=2), (64, 256)),
    (nn.Conv3d(16, 32, 3, padding=1), (16, 16, 32, 32)),
    (nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (64, 32, 32)),
    (nn.Conv2d(64, 64, 3, padding=2, dilation=2), (64, 56, 56)),
    (nn.Conv2d(64, 64, (1, 7), padding=(0, 3)), (64, 28, 28)),
])
def test_convolutions_conv2d_does_not_describe_are_timed_by_their_multiply_adds(layer, shape):
    """Not by the bytes they move: the general convolution kind, its implicit GEMM predicted as a linear layer,
    and at least that GEMM's time on CUDA cores in fp32_strict (as a linear layer of that shape would take)."""
    model = nn.Sequential(layer, nn.ReLU())
    estimate = prenet.predict(model, batch=16, gpu="V100", input_shape=shape)
    ops = estimate.ops.set_index("op")
    forward, backward = ops.loc["convolution.default"], ops.loc["convolution_backward.default"]
    assert forward["kind"] == backward["kind"] == "convolution" and forward["how"] == "kernels"
    with torch.no_grad():
        output = layer(torch.zeros(1, *shape))
    weights = layer.weight.numel()
    positions = math.prod(shape[1:]) if isinstance(layer, nn.ConvTranspose2d) else math.prod(output.shape[2:])
    macs = 16 * positions * weights
    assert forward["flops"] == 2 * macs + 16 * output.numel()
    assert backward["flops"] == pytest.approx(0.5 * (4 * macs + 16 * output.numel()))  # no dX for the first layer
    # the GEMM over the output: rows its positions, columns its channels, inner the taps each output gathers
    rows, columns = 16 * math.prod(output.shape[2:]), output.shape[1]
    gemm = prenet.predict_layer("linear", gpu="V100", batch=1, seq_len=rows, in_features=round(macs / (rows * columns)),
                                out_features=columns, bias=0)
    assert forward["ms"] >= 0.5 * gemm
    assert forward["ms"] > 2 * ops.loc["relu.default", "ms"]  # the ReLU moves the output's bytes twice


def test_tf32_puts_matmuls_on_tensor_cores_where_the_gpu_has_them():
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
    kwargs = dict(batch=256, input_shape=(128, 1024), dataset_size=256)

    def parts(gpu, precision):
        layers = prenet.predict(model, gpu=gpu, precision=precision, **kwargs).layers.set_index("name")
        # the products' forward and backward milliseconds (backward ones: dX and dW), and the GELU's
        return layers.loc[["0", "2"], ["forward_ms", "backward_ms"]].sum().to_numpy(), layers.loc["1", "forward_ms"]

    for gpu in ("A100", "H100"):
        (fp32, gelu), (tf32, gelu_tf32) = parts(gpu, "fp32"), parts(gpu, "tf32")
        assert (tf32 < 0.5 * fp32).all(), gpu      # compute-bound products at 8x the rate
        assert gelu_tf32 == gelu                    # not a matmul
    (v100, _), (v100_tf32, _) = parts("V100", "fp32"), parts("V100", "tf32")
    assert (v100 == v100_tf32).all()               # no TF32 there: the flag changes nothing
    linear = dict(batch=256, seq_len=128, in_features=1024, out_features=4096)
    assert prenet.predict_layer("linear", gpu="A100", precision="tf32", **linear) < 0.5 * prenet.predict_layer(
        "linear", gpu="A100", **linear)
    with pytest.raises(ValueError, match="'tf32' is predicted for GPUs only"):
        prenet.predict(model, gpu="cpu", precision="tf32", **kwargs)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(gpu="T5000"), ValueError, "unknown GPU 'T5000'; closest known"),
    (dict(batch=0), ValueError, "batch must be an integer >= 1"),
    (dict(dataset_size=-3), ValueError, "dataset_size must be an integer >= 1"),
    (dict(optimizer="lion"), ValueError, "unknown optimizer 'lion'; known: sgd"),
    (dict(optimizer=torch.optim.LBFGS), ValueError, "unknown optimizer LBFGS; known: sgd"),
    (dict(optimizer=3), ValueError, "unknown optimizer of type int; known: sgd"),
    (dict(batch=32.0), ValueError, r"batch must be an integer >= 1, got 32.0 \(float\)"),
    (dict(precision="fp8"), ValueError, "unknown precision 'fp8'; known: fp32, fp32_strict, tf32, bf16, fp16"),
    (dict(precision="bf16", gpu="V100"), ValueError, "no bf16 rate in the catalog .*use fp16 or fp32"),
    (dict(precision="bf16", gpu="cpu"), ValueError, "'bf16' is predicted for GPUs only"),
    (dict(input_shape=(3, 20, 20)), ValueError, "failed in module 'fc'"),
    (dict(input_shape=None), ValueError, "give input_shape"),
    (dict(input_shape=(4, 3, 16, 16)), ValueError, r"failed in module .*; input_shape \(4, 3, 16, 16\) begins with "
                                                   r"the batch size: it is one sample's shape, without the batch "
                                                   r"dimension \(e.g. \(3, 16, 16\)\)$"),
    (dict(example_input=torch.randn(1, 3, 32, 32)), ValueError, "give input_shape or example_input, not both"),
])
def test_bad_input_is_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        prenet.predict(SmallCnn(), **{**dict(batch=4, gpu="V100", input_shape=(3, 16, 16)), **kwargs})


def test_a_rejected_input_names_the_shapes_the_model_was_given():
    """Keyword inputs by name, each with its shape (the batch the trace ran at first), and that batch said, as it is
    not the caller's."""
    with pytest.raises(ValueError, match=r"failed in module 'qkv', given features \((\d+), 5, 8\)\).*prenet traces "
                                         r"the step for real at a batch of \1 and scales it to the batch asked for"):
        prenet.predict(FunctionalBlock(dim=16), batch=4, gpu="T4", example_input={"features": torch.randn(2, 5, 8)})


def test_a_batch_of_one_that_training_refuses_is_refused_also_as_an_epochs_last_batch():
    """Batch normalization in training refuses one value per channel. Such a model falls back from the meta device
    to a real trace at two larger batches, which run: a batch of one is traced itself, so the refusal is PyTorch's,
    with the module named, where the batch asked for is 1 and where an epoch's remainder is."""
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))
    with pytest.raises(ValueError, match=r"failed in module '1', given \(1, 8\)\): Expected more than 1 value per "
                                         r"channel when training, got input size torch.Size\(\[1, 8\]\)$"):
        prenet.predict(model, batch=1, gpu="V100", input_shape=(8,), dataset_size=10)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel.*\(at 1 sample: the epoch's last "
                                         r"batch"):
        prenet.predict(model, batch=4, gpu="V100", input_shape=(8,), dataset_size=9)
    assert prenet.predict(model, batch=4, gpu="V100", input_shape=(8,), dataset_size=10).step_seconds > 0
    recurrent = nn.LSTM(8, 8, batch_first=True)  # traced for real at any batch: a batch of one is traced itself
    assert prenet.predict(recurrent, batch=1, gpu="V100", input_shape=(5, 8), dataset_size=4).traced == "cpu"


def test_a_token_model_given_a_shape_is_told_to_give_token_ids():
    """input_shape makes floating-point inputs; an embedding refuses them (the trace checks: torch 2's meta kernels
    would take them) and says how to give token ids, and a model that fails elsewhere gets no such advice."""
    tokens = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 4))
    with pytest.raises(ValueError, match=r"failed in module '0'.*indices must be integers.*'0' is an embedding.*"
                                         r"example_input=torch.randint"):
        prenet.predict(tokens, batch=4, gpu="T4", input_shape=(12,))
    predicted = prenet.predict(tokens, batch=4, gpu="T4", example_input=torch.randint(100, (1, 12)))
    assert predicted.step_seconds > 0
    with pytest.raises(ValueError, match=r"failed in module 'Embedding'.*'Embedding' is an embedding"):
        prenet.predict(nn.Embedding(100, 8), batch=4, gpu="T4", input_shape=(12,))  # the model itself, by its type
    with pytest.raises(ValueError, match="rejected the input") as raised:
        prenet.predict(SmallCnn(), batch=4, gpu="T4", input_shape=(5, 16, 16))
    assert "embedding" not in str(raised.value)


class TakesADict(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, batch):
        return self.linear(batch["features"])


def test_a_dict_refused_as_keyword_arguments_is_told_to_come_in_a_tuple():
    """A dict example_input is keyword arguments (Hugging Face style); a model whose forward takes the dict itself
    refuses the keys, and the refusal says how to pass it; so passed, it predicts."""
    example = {"features": torch.randn(1, 8)}
    with pytest.raises(ValueError, match=r"unexpected keyword argument 'features'.*passed as keyword arguments.*"
                                         r"example_input=\(the_dict,\)"):
        prenet.predict(TakesADict(), batch=4, gpu="T4", example_input=example)
    assert prenet.predict(TakesADict(), batch=4, gpu="T4", example_input=(example,)).step_seconds > 0


class WantsTargets(nn.Module):
    """Like torchvision's detection models: images and, in training mode, targets, whose loss it returns."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, images, targets=None):
        if self.training and targets is None:
            raise ValueError("targets should not be none when in training mode")
        return {"loss": ((self.linear(images) - targets["values"]) ** 2).mean()}


def test_a_model_that_asks_for_targets_is_told_how_to_give_them():
    """Given one input, a model that needs targets to train refuses it; the refusal says to pass (inputs, targets),
    and so passed the model predicts."""
    with pytest.raises(ValueError, match=r"targets should not be none.*the model asks for targets.*"
                                         r"example_input=\(inputs, targets\)"):
        prenet.predict(WantsTargets(), batch=4, gpu="T4", input_shape=(8,))
    example = (torch.randn(1, 8), {"values": torch.randn(1, 4)})
    assert prenet.predict(WantsTargets(), batch=4, gpu="T4", example_input=example).step_seconds > 0


def test_integer_inputs_to_a_floating_point_layer_are_named_as_the_cause():
    """PyTorch's own message names the weight's type as the one expected ("expected scalar type Long but found
    Float"); the refusal says the input was integers where the failing layer's weights are floating point."""
    with pytest.raises(ValueError, match=r"failed in module 'conv'.*the input holds int64 tensors only, and 'conv' "
                                         r"has floating-point weights: give example_input in floating point"):
        prenet.predict(SmallCnn(), batch=4, gpu="T4", example_input=torch.randint(5, (1, 3, 16, 16)))
    with pytest.raises(ValueError, match="rejected the input") as raised:  # float inputs of a wrong shape: no advice
        prenet.predict(SmallCnn(), batch=4, gpu="T4", example_input=torch.randn(1, 5, 16, 16))
    assert "int64" not in str(raised.value)


def test_an_optimizer_may_be_named_in_any_case_or_given_as_torch_gives_it():
    model = SmallCnn()
    named = {"SGD": "sgd", "AdamW": "adamw", torch.optim.Adam: "adam", torch.optim.RMSprop: "rmsprop",
             torch.optim.SGD(model.parameters(), lr=0.1): "sgd_plain",
             torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9): "sgd",
             torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True): "sgd_nesterov",
             type("MyAdam", (torch.optim.Adam,), {}): "adam"}
    for given, name in named.items():
        estimate = prenet.predict(model, batch=4, gpu="V100", input_shape=(3, 16, 16), dataset_size=8,
                                  optimizer=given)
        assert estimate.optimizer == name, given
    adam = prenet.predict(model, batch=4, gpu="V100", input_shape=(3, 16, 16), dataset_size=8, optimizer="adam")
    assert estimate.optimizer_ms == pytest.approx(adam.optimizer_ms)
    # sizes of any integer type, numpy's included
    counted = prenet.predict(model, batch=np.int64(4), gpu="V100", input_shape=(3, 16, 16), dataset_size=np.int32(10))
    assert (counted.batch, counted.dataset_size, counted.iterations) == (4, 10, 3)
    assert type(counted.batch) is int


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.left, self.right = nn.Linear(8, 4), nn.Linear(6, 4)

    def forward(self, left, right):
        return self.left(left) * self.right(right)


def test_an_optimizers_settings_that_change_its_step_are_said_to_be_left_out():
    model = SmallCnn()
    run = dict(batch=4, gpu="V100", input_shape=(3, 16, 16), dataset_size=8, progress=False)
    with pytest.warns(UserWarning, match=r"the optimizer's amsgrad=True \(a third state tensor and a maximum per "
                                         r"element\): not taken, its update is adam's with PyTorch's defaults") as got:
        amsgrad = prenet.predict(model, optimizer=torch.optim.Adam(model.parameters(), amsgrad=True), **run)
    assert got[0].filename == __file__
    assert amsgrad.step_seconds == prenet.predict(model, optimizer="adam", **run).step_seconds
    with pytest.warns(UserWarning, match=r"centered=True .*; momentum=0.5 \(a momentum buffer\): not taken"):
        prenet.predict(model, optimizer=torch.optim.RMSprop(model.parameters(), momentum=0.5, centered=True), **run)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch's defaults: nothing to say
        prenet.predict(model, optimizer=torch.optim.AdamW(model.parameters()), **run)


def test_inputs_may_be_a_tensor_a_tuple_or_a_dict_and_shapes_any_integer_sizes():
    model = TwoInputs()
    positional = (torch.randn(1, 8), torch.randn(1, 6))
    keyword = {"left": positional[0], "right": positional[1]}
    by_tuple = prenet.predict(model, batch=16, gpu="V100", example_input=positional)
    by_dict = prenet.predict(model, batch=16, gpu="V100", example_input=keyword)
    assert by_tuple.step_seconds == by_dict.step_seconds
    assert set(by_tuple.layers.set_index("name").loc[["left", "right"], "input_shape"]) == {(16, 8), (16, 6)}
    measured = prenet.measure(model, batch=4, example_input=positional, device="cpu", dataset_size=8)
    assert measured.iterations == 2 and measured.epoch_seconds > 0
    single = nn.Linear(8, 2)
    times = {prenet.predict(single, batch=4, gpu="V100", input_shape=shape).step_seconds
             for shape in (8, (8,), [8], torch.Size([8]), (np.int64(8),))}
    assert len(times) == 1
    for shape in ("8", (8.0,), (True,)):
        with pytest.raises(TypeError, match="input_shape must be a tuple of integer sizes"):
            prenet.predict(single, batch=4, gpu="V100", input_shape=shape)
    with pytest.raises(TypeError, match="example_input must be a tensor, a tuple of positional arguments or a dict"):
        prenet.predict(single, batch=4, gpu="V100", example_input=[1.0, 2.0])


class Detector(nn.Module):
    """torchvision's detection models' interface: a list of images and a list of target dicts, one per sample;
    in training, a dict of losses."""

    def __init__(self):
        super().__init__()
        self.classify, self.box = nn.Linear(6, 3), nn.Linear(6, 4)

    def forward(self, images, targets):
        x = torch.stack(images)
        labels = torch.stack([t["label"] for t in targets])
        boxes = torch.stack([t["box"] for t in targets])
        return {"loss_classifier": nn.functional.cross_entropy(self.classify(x), labels),
                "loss_box_reg": (self.box(x) - boxes).abs().mean()}


def test_lists_in_an_example_hold_one_item_per_sample_and_a_dict_of_losses_is_summed():
    example = ([torch.randn(6)], [{"label": torch.tensor(1), "box": torch.rand(4)}])
    estimate = prenet.predict(Detector(), batch=5, gpu="A100", example_input=example, dataset_size=10)
    ops = estimate.ops
    assert set(ops.loc[(ops["phase"] == "forward") & (ops["kind"] == "linear"), "module_input"]) == {(5, 6)}
    # both losses are trained: each head has its weight gradient
    backward = ops[(ops["phase"] == "backward") & (ops["kind"] == "linear")]
    assert set(backward["module"]) == {"classify", "box"}
    measured = prenet.measure(Detector(), batch=5, example_input=example, device="cpu", dataset_size=10)
    assert measured.iterations == 2 and measured.epoch_seconds > 0
    with pytest.raises(TypeError, match="lists hold one item per sample; got an empty list"):
        prenet.predict(Detector(), batch=5, gpu="A100", example_input=([], example[1]))


def test_not_a_model_is_a_type_error():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        prenet.predict(lambda x: x, batch=4, input_shape=(3,))


class IgnoresItsWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(x)


def test_a_model_with_nothing_to_train_is_named_as_such():
    """Not 'the model rejected the input' from deep inside autograd."""
    for call in (prenet.predict, prenet.measure):
        for model in (nn.Sequential(nn.ReLU()), nn.Linear(8, 8).requires_grad_(False)):
            with pytest.raises(ValueError, match="no parameter that requires a gradient"):
                call(model, batch=4, input_shape=(8,), dataset_size=8, **({"device": "cpu"} if call is prenet.measure
                                                                           else {"gpu": "V100"}))
    with pytest.raises(ValueError, match="output depends on no parameter that requires a gradient"):
        prenet.predict(IgnoresItsWeights(), batch=4, gpu="V100", input_shape=(8,))


def test_command_line_prints_one_json_object(run_prenet, tmp_path):
    plot = tmp_path / "step.png"
    done = run_prenet("predict", "torchvision:resnet18", "--batch", "4", "--gpu", "H100", "--input-shape", "3,64,64",
                      "--dataset-size", "10", "--json", "--no-progress", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # where the step goes, saved as asked
    result = json.loads(done.stdout)
    assert result["iterations"] == 3 and math.isfinite(result["epoch_seconds"]) and result["step_seconds"] > 0
    low, high = result["interval_seconds"]
    assert low < high and result["extrapolation"]["nearest"] and result["traced"] == "meta"
    assert result["traced_for_real_because"] is None
    table = run_prenet("predict", "torchvision:resnet18", "--batch", "4", "--gpu", "H100", "--input-shape", "3,64,64",
                       "--dataset-size", "10", "--top", "3")
    assert table.returncode == 0, table.stderr
    by_operator = table.stdout.splitlines()[-1]
    assert by_operator.startswith("device ms per step by operator (forward + backward): ")
    assert "convolution_backward " in by_operator and "optimizer update " in by_operator
    bad = run_prenet("predict", "torchvision:resnet18", "--gpu", "H1000")
    assert bad.returncode == 2 and "unknown GPU" in bad.stderr
    # converted to channels_last, its convolutions on the H100's tensor cores skip the layout transposes
    nhwc = run_prenet("predict", "torchvision:resnet18", "--batch", "4", "--gpu", "H100", "--input-shape", "3,64,64",
                      "--dataset-size", "10", "--json", "--channels-last")
    assert nhwc.returncode == 0, nhwc.stderr
    assert json.loads(nhwc.stdout)["device_ms"] < result["device_ms"]


def test_measure_follows_the_protocol_on_the_cpu():
    result = prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), dataset_size=10, device="cpu",
                            optimizer="adam")
    assert result.iterations == 3 and len(result.epochs) == 3
    assert result.epoch_min_seconds <= result.epoch_seconds <= result.epoch_max_seconds
    assert result.step_seconds == pytest.approx(result.epoch_seconds / 3)
    env = result.environment
    assert env["params"] == sum(p.numel() for p in SmallCnn().parameters())
    assert {"host_cpu", "torch", "device_units", "precision", "optimizer", "batch", "dataset_size"} <= set(env)
    assert "per epoch" in repr(result)


def test_measure_keeps_the_labels_resident_as_the_protocol_does(monkeypatch):
    """The labels are data: drawn once for the whole data set (by the warm-up's first step, where the output shows
    the classes), each step reading its batch's slice, as the inputs are; a language model's every token has one."""
    from prenet.measure import ResidentLabels

    draws, randint = [], torch.randint
    monkeypatch.setattr(torch, "randint", lambda *args, **kwargs: draws.append(args) or randint(*args, **kwargs))
    prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), dataset_size=10, device="cpu")
    assert draws == [(10, (10,))]  # ten classes, ten samples: once in 4 epochs of 3 steps
    resident = ResidentLabels(dataset_size=6)
    first, last = resident.of_batch(0, 4)(4 * 7, 100, "cpu"), resident.of_batch(4, 2)(2 * 7, 100, "cpu")
    assert resident.labels.shape == (6 * 7,) and torch.equal(torch.cat([first, last]), resident.labels)
    assert first.data_ptr() == resident.labels.data_ptr()  # a view of the resident labels, no copy


def test_measure_leaves_the_model_as_it_was():
    model = SmallCnn().eval()
    model(torch.randn(2, 3, 16, 16)).sum().backward()  # the user's gradients
    state = {k: v.clone() for k, v in model.state_dict().items()}
    gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
    weight = model.conv.weight
    torch.manual_seed(3)
    expected_draw = torch.rand(2)
    torch.manual_seed(3)
    prenet.measure(model, batch=4, input_shape=(3, 16, 16), dataset_size=8, device="cpu", optimizer="adam")
    assert torch.equal(torch.rand(2), expected_draw), "the random number generator is where it was"
    assert not model.training and model.conv.weight is weight
    for key, value in model.state_dict().items():  # weights trained for the epochs, BatchNorm statistics
        assert torch.equal(value, state[key]), key
    for name, p in model.named_parameters():
        assert torch.equal(p.grad, gradients[name]), name


def test_model_kept_puts_weights_back_on_their_device_when_the_block_fails():
    from prenet.model_state import model_kept

    model = nn.Linear(3, 2)
    before = model.weight.detach().clone()
    with pytest.raises(RuntimeError, match="stopped"), model_kept(model):
        model.to(torch.float64)  # in place, as a move to another device is
        with torch.no_grad():
            model.weight.add_(1.0)
        raise RuntimeError("stopped")
    assert model.weight.dtype == torch.float32 and torch.equal(model.weight, before) and model.weight.grad is None


def test_measure_runs_on_the_threads_it_is_given_and_restores_them():
    before = torch.get_num_threads()
    result = prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), dataset_size=8, device="cpu", threads=1)
    assert result.environment["device_units"] == 1
    assert result.environment["library_threads"] and set(result.environment["library_threads"].values()) == {1}
    assert torch.get_num_threads() == before
    untouched = prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), dataset_size=8, device="cpu")
    assert untouched.environment["device_units"] == before
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="threads is a positive integer for device='cpu'"):
            prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device="cpu", threads=bad)
    with pytest.raises(ValueError, match="threads is a positive integer for device='cpu'"):
        prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device="cuda", threads=1)


def test_measure_names_what_it_cannot_do():
    with pytest.raises(ValueError, match="repeats must be an integer >= 3"):
        prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device="cpu", repeats=1)
    with pytest.raises(ValueError, match="unknown precision 'int4'"):
        prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device="cpu", precision="int4")
    for device in ("tpu", "meta", None):
        with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
            prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device=device)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device="cuda")
    # the protocol's data set is resident: one too large for this machine is refused before any is made
    with pytest.raises(ValueError, match=r"data set resident: 10,000,000,000 samples take 28,610.2 GiB, more than this "
                                         r"machine's memory has available \(.* GiB\); measure fewer samples"):
        prenet.measure(SmallCnn(), batch=4, input_shape=(3, 16, 16), device="cpu", dataset_size=10 ** 10)


def test_available_memory_is_linuxs_mem_available_or_unknown(tmp_path):
    from prenet.measure import available_memory

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:          100000 kB\nMemAvailable:   20000000 kB\n")
    assert available_memory(meminfo) == 20000000 * 1024  # page cache counts as available, MemFree alone would not
    meminfo.write_text("MemTotal:       24000000 kB\n")
    assert available_memory(meminfo) is None and available_memory(tmp_path / "missing") is None


def test_measure_command_line(run_prenet):
    done = run_prenet("measure", "torchvision:resnet18", "--device", "cpu", "--batch", "2", "--input-shape",
                      "3,32,32", "--dataset-size", "4", "--json", "--threads", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["iterations"] == 2 and len(result["epochs"]) == 3 and result["epoch_seconds"] > 0
    assert result["environment"]["device_units"] == 1
    # a bar over the warm-up and the 3 timed epochs, on stderr, unless asked not to
    assert "measuring ResNet on cpu" in done.stderr and "4/4" in done.stderr
    quiet = run_prenet("measure", "torchvision:resnet18", "--device", "cpu", "--batch", "2", "--input-shape",
                       "3,32,32", "--dataset-size", "4", "--json", "--no-progress")
    assert quiet.returncode == 0 and "measuring" not in quiet.stderr


def test_a_progress_bar_without_tqdm_prints_done_rate_and_time_left(capsys):
    from prenet.progress import _PlainProgress

    bar = _PlainProgress(4, 1, "measuring X on cpu", True, "epoch", every_s=0.0)
    bar.update(1)
    bar.update(2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("measuring X on cpu: 2/4, ") and lines[-1].startswith("measuring X on cpu: 4/4, ")
    assert all("epoch/s" in line and "min left" in line for line in lines)
    silent = _PlainProgress(4, 0, "x", False, "epoch", every_s=0.0)
    silent.update(4)
    assert capsys.readouterr().err == ""


def test_a_progress_bar_prints_nothing_until_its_delay_has_passed(capsys):
    from prenet.progress import _PlainProgress

    _PlainProgress(2, 0, "tracing X", True, "step", delay=60.0, every_s=0.0).update(2)
    assert capsys.readouterr().err == ""
    _PlainProgress(2, 0, "tracing X", True, "step", delay=0.0, every_s=0.0).update(2)
    assert capsys.readouterr().err.startswith("tracing X: 2/2, ")


class _Tagger(nn.Module):  # recurrent: traced for real, at two small batches
    def __init__(self):
        super().__init__()
        self.lstm, self.head = nn.LSTM(8, 8, batch_first=True), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


def test_a_real_trace_shows_a_bar_once_it_has_taken_its_delay(capsys, monkeypatch):
    """A model traced for real (here for its recurrent layer) can take a minute (a detection model's two traces on
    two cores): a bar over its traced steps, on stderr, once the trace has run REAL_TRACE_BAR_DELAY_S; none with
    progress=False, and none for a trace quicker than the delay."""
    from prenet import op_trace

    estimate = prenet.predict(_Tagger(), batch=4, gpu="V100", input_shape=(5, 8), dataset_size=8)
    assert estimate.traced == "cpu" and "tracing" not in capsys.readouterr().err  # quicker than two seconds
    monkeypatch.setattr(op_trace, "REAL_TRACE_BAR_DELAY_S", 0.0)
    prenet.predict(_Tagger(), batch=4, gpu="V100", input_shape=(5, 8), dataset_size=8)
    shown = capsys.readouterr().err
    assert "tracing _Tagger's step for real on the CPU" in shown and "2/2" in shown
    prenet.predict(_Tagger(), batch=4, gpu="V100", input_shape=(5, 8), dataset_size=8, progress=False)
    prenet.compare(_Tagger(), batch=4, gpus=["V100"], input_shape=(5, 8), dataset_size=8, progress=False)
    assert "tracing" not in capsys.readouterr().err


def test_plot_shows_the_layers_by_share():
    import matplotlib

    matplotlib.use("Agg")
    estimate = prenet.predict(SmallCnn(), batch=8, gpu="V100", input_shape=(3, 16, 16))
    ax = estimate.plot(top=3)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    top = estimate.layers.sort_values("step_share", ascending=False).head(3)["name"].tolist()
    assert sorted(labels) == sorted(top)
    assert len(ax.patches) == 6  # forward and backward bars of three layers
    # the bars are device time: a host-bound step says what set its pace instead
    title = " ".join(t.get_text() for t in ax.figure.texts)
    assert estimate.bound == "host" and f"the host's {estimate.host_ms:.1f} ms a step set the pace" in title
    shown = estimate.layers.sort_values("step_share", ascending=False).head(3)
    share = (shown["forward_ms"] + shown["backward_ms"]).sum() / estimate.device_ms
    assert ax.get_title().startswith(f"by module: the 3 of {len(estimate.layers)} with the most time ({share:.0%} ")
    # beside it, the device time by operator and the optimizer's update: every millisecond of the step, once
    by_operator = next(other for other in ax.figure.axes if other is not ax)
    bars = {label.get_text(): 0.0 for label in by_operator.get_yticklabels()}
    for bar, label in zip(by_operator.patches, [t.get_text() for t in by_operator.get_yticklabels()] * 2):
        bars[label] += bar.get_width()
    assert {"convolution", "convolution_backward", "optimizer update"} <= set(bars)
    assert bars["optimizer update"] == pytest.approx(estimate.optimizer_ms)
    assert sum(bars.values()) == pytest.approx(estimate.device_ms, rel=1e-9)
    import matplotlib.pyplot as plt

    alone = estimate.plot(top=3, ax=plt.subplots()[1])  # on the user's axes: the modules alone
    assert len(alone.figure.axes) == 1 and "a step set the pace" in alone.get_title()
    long_names = nn.Sequential()
    long_names.add_module("an_encoder_block_with_a_long_descriptive_name", nn.Linear(16, 16))
    long_names.add_module("a_classification_head_with_a_long_name", nn.Linear(16, 2))
    ax = prenet.predict(long_names, batch=8, gpu="V100", input_shape=(16,)).plot()
    renderer = ax.figure.canvas.get_renderer()  # long module names are not cut off at the figure's edge
    assert all(label.get_window_extent(renderer).x0 >= 0 for label in ax.get_yticklabels())


def test_estimates_say_how_far_they_extrapolate():
    fitted = uncertainty.fitted_devices(predictors.PACKAGED_BUNDLE)
    assert "Tesla V100-PCIE-32GB" in fitted
    seen = uncertainty.extrapolation("Tesla V100-PCIE-32GB", fitted)
    assert seen == {"nearest": "Tesla V100-PCIE-32GB", "distance": 0.0, "outside": []}
    unseen = uncertainty.extrapolation("H100", fitted)
    assert unseen["nearest"] in fitted and unseen["distance"] > 0.3
    assert {"fp32_tflops", "memory_bandwidth_gbs"} <= set(unseen["outside"])   # faster than any fitted GPU
    estimate = prenet.predict(SmallCnn(), batch=4, gpu="H100", input_shape=(3, 16, 16), dataset_size=8)
    assert estimate.extrapolation == unseen and "nearest fitted GPU" in repr(estimate)
    assert prenet.predict(SmallCnn(), batch=4, gpu="cpu", input_shape=(3, 16, 16)).extrapolation is None


def test_a_gpu_of_a_vendor_no_fitted_gpu_shares_is_flagged_by_a_warning_and_in_the_estimate():
    """Every fitted GPU is NVIDIA's: an AMD one is timed as NVIDIA's libraries would run at its specifications,
    which its distance does not show; the estimate says so, and warns where the caller called."""
    fitted = uncertainty.fitted_devices(predictors.PACKAGED_BUNDLE)
    assert uncertainty.extrapolation("MI300X", fitted)["other_vendor"] == "AMD"
    assert "other_vendor" not in uncertainty.extrapolation("H100", fitted)
    with pytest.warns(UserWarning, match="AMD Instinct MI300X: an AMD GPU, timed as NVIDIA's libraries") as caught:
        estimate = prenet.predict(SmallCnn(), batch=4, gpu="MI300X", input_shape=(3, 16, 16), dataset_size=8)
    assert caught[0].filename == __file__
    assert estimate.extrapolation["other_vendor"] == "AMD" and "(AMD's: MIOpen, rocBLAS) are not modelled" in repr(
        estimate)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an NVIDIA GPU: no warning
        assert "AMD" not in repr(prenet.predict(SmallCnn(), batch=4, gpu="H100", input_shape=(3, 16, 16)))


def test_interval_scales_each_operator_by_its_kind_and_keeps_the_host_floor(tmp_path):
    factors = {"conv2d": (0.5, 2.0), "relu": (0.9, 1.1), "*": (0.25, 4.0)}
    kinds = ["conv2d", "relu", None, "lstm"]
    assert uncertainty.kind_factors(kinds, factors, 0).tolist() == [0.5, 0.9, 1.0, 0.25]
    assert uncertainty.kind_factors(kinds, factors, 1).tolist() == [2.0, 1.1, 1.0, 4.0]
    bundle = tmp_path / "bundle"
    shutil.copytree(predictors.PACKAGED_BUNDLE, bundle)
    kinds = ["add", "bmm", "conv2d", "gelu", "layer_norm", "linear", "relu", "softmax"]
    (bundle / "intervals.json").write_text(json.dumps({"factors": {k: [0.5, 2.0] for k in kinds}}))
    # fp32_strict: no tensor cores, so the kinds' factors alone make the interval
    estimate = prenet.predict(SmallCnn(), batch=64, gpu="A100", input_shape=(3, 16, 16), dataset_size=256,
                              bundle=bundle, precision="fp32_strict")
    low, high = estimate.interval_seconds
    assert low <= estimate.epoch_seconds <= high <= 2 * estimate.epoch_seconds + 1e-12
    assert low >= 0.5 * estimate.epoch_seconds - 1e-12 and "80% interval" in repr(estimate)


def test_the_interval_reaches_the_cuda_core_time_of_tensor_core_operators():
    model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
    kwargs = dict(batch=32, input_shape=(64, 56, 56), dataset_size=64)
    tf32 = prenet.predict(model, gpu="H100", **kwargs)
    strict = prenet.predict(model, gpu="H100", precision="fp32_strict", **kwargs)
    assert tf32.epoch_seconds < strict.epoch_seconds, "cuDNN's convolutions run on TF32 tensor cores"
    # no data times a tensor-core kernel: the high side goes as far as the CUDA-core kernels, and no further (the
    # convolutions' layout transposes and the tensor-core factor do not widen it)
    assert tf32.interval_seconds[1] >= strict.epoch_seconds > tf32.epoch_seconds
    assert tf32.interval_seconds[1] == pytest.approx(strict.interval_seconds[1], rel=1e-6)
    # a V100 has no TF32: its fp32 convolutions are CUDA-core ones, with the same interval as fp32_strict
    v100 = [prenet.predict(model, gpu="V100", precision=p, **kwargs).interval_seconds for p in ("fp32", "fp32_strict")]
    assert v100[0] == pytest.approx(v100[1])


def test_cpu_estimates_say_when_this_machine_is_not_the_measured_host(monkeypatch):
    import warnings

    from prenet import host_cost

    monkeypatch.setattr(host_cost, "cpu_model", lambda: "Some Other CPU 9000")
    with pytest.warns(UserWarning, match=r"this machine's CPU \(Some Other CPU 9000\) is not the host") as caught:
        prenet.predict(SmallCnn(), batch=4, gpu="cpu", input_shape=(3, 16, 16), dataset_size=8)
    assert caught[0].filename == __file__  # the caller's line, not prenet's
    measured_host = prenet.catalog.host_catalog().rows()[0]["aliases"][-1]  # as host_cost.cpu_model gives it
    monkeypatch.setattr(host_cost, "cpu_model", lambda: measured_host)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prenet.predict(SmallCnn(), batch=4, gpu="cpu", input_shape=(3, 16, 16), dataset_size=8)
        prenet.predict(SmallCnn(), batch=4, gpu="T4", input_shape=(3, 16, 16), dataset_size=8)


MODEL_FILE = '''
import torch.nn as nn
from {helper} import WIDTH


def build():
    return nn.Sequential(nn.Linear(WIDTH, 32), nn.ReLU(), nn.Linear(32, 2))
'''


def test_command_line_models_come_from_a_file_or_a_module_beside_the_user(run_prenet, tmp_path, monkeypatch):
    from prenet.models import build_model

    (tmp_path / "width_of_user_net.py").write_text("WIDTH = 12\n")
    (tmp_path / "user_net.py").write_text(MODEL_FILE.format(helper="width_of_user_net"))
    monkeypatch.chdir(tmp_path)
    for spec in (str(tmp_path / "user_net.py") + ":build", "user_net.py:build", "user_net:build"):
        model, inputs = build_model(spec, (12,))
        assert model[0].in_features == 12 and inputs == {"input_shape": (12,)}, spec
    with pytest.raises(ValueError, match="no file 'absent.py'"):
        build_model("absent.py:build")
    with pytest.raises(ValueError, match="cannot import 'absent_module' .*a file path ending in .py"):
        build_model("absent_module:build")
    done = run_prenet("predict", "user_net.py:build", "--gpu", "A100", "--batch", "8", "--input-shape", "12", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["step_seconds"] > 0


def test_a_model_may_be_named_without_its_source():
    """"resnet18" is torchvision's, "gpt2" prenet's reference model, as with their sources spelt out."""
    from prenet.models import build_model

    model, inputs = build_model("resnet18")
    named, named_inputs = build_model("torchvision:resnet18")
    assert type(model) is type(named) and inputs == named_inputs == {"input_shape": (3, 224, 224)}
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in named.parameters())
    model, inputs = build_model("gpt2", (16,))
    assert type(model) is type(build_model("prenet:gpt2")[0]) and inputs["example_input"]["input_ids"].shape == (1, 16)
    with pytest.raises(ValueError, match="names no model of torchvision or prenet.*closest: prenet:gpt2"):
        build_model("gtp2")


TOKEN_MODEL_FILE = '''
import torch
import torch.nn as nn


def with_tokens():
    return nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 4)), torch.randint(100, (1, 12))


def tokens_alone():
    return nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 4))


def not_a_model():
    return "a string"
'''


def test_a_command_line_factory_may_return_its_model_with_an_example_input(run_prenet, tmp_path, monkeypatch):
    """A model of token ids cannot be given by --input-shape (random floats): its factory returns (module, example
    input); given both, or something else than a module, the user is told what is accepted."""
    from prenet.models import build_model

    (tmp_path / "token_net.py").write_text(TOKEN_MODEL_FILE)
    monkeypatch.chdir(tmp_path)
    model, inputs = build_model("token_net.py:with_tokens")
    assert isinstance(model, nn.Sequential) and inputs["example_input"].shape == (1, 12)
    with pytest.raises(ValueError, match="returns its own example input; --input-shape \\(12,\\) would override"):
        build_model("token_net.py:with_tokens", (12,))
    with pytest.raises(ValueError, match="returned str; a model factory returns a torch.nn.Module, or a pair"):
        build_model("token_net.py:not_a_model", (12,))
    done = run_prenet("predict", "token_net.py:with_tokens", "--gpu", "T4", "--batch", "8", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["step_seconds"] > 0
    refused = run_prenet("predict", "token_net.py:tokens_alone", "--gpu", "T4", "--batch", "8", "--input-shape", "12")
    assert refused.returncode != 0 and "'0' is an embedding" in refused.stderr
    assert "a factory returning (model, example input)" in refused.stderr


def test_views_and_metadata_operators_run_no_kernel():
    """Operators that only make views or change metadata are costed nothing on the device (they had been costed as
    traffic of their tensors: a diagonal, an unfold, a complex tensor's real view, an in-place restride)."""
    x = torch.randn(6, 6)

    class Views(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(6))

        def forward(self, x):
            parts = [x.diagonal(), x.unfold(1, 2, 2).sum((-1, -2)), torch.view_as_real(x.to(torch.complex64))[..., 0]
                     .sum(-1), x.t().contiguous().sum(-1)]
            return sum(parts) * self.scale

    ops = op_trace.trace_once(Views(), x)
    recorded = {op.name.split(".")[0] for op in ops}
    assert {"diagonal", "unfold", "view_as_real"} <= recorded
    for op in ops:
        if op.name.split(".")[0] in ("diagonal", "unfold", "view_as_real"):
            assert op_costs.work_of(op) is None, op.name


def test_an_estimate_says_whether_the_step_fits_the_gpu():
    """The step's memory (prenet.training_memory, walked when first read) against the catalog's GPU memory, with
    the data copied in a batch at a time as compare's `fits`: two 512-pixel convolutions at batch 256 keep about
    17 GiB of activations, more than a T4's 16 GiB and less than an A100's 40."""
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 3, 3, padding=1))
    run = dict(batch=256, input_shape=(3, 512, 512), dataset_size=256)
    small, large = (prenet.predict(model, gpu=gpu, **run) for gpu in ("T4", "A100"))
    assert small.memory == large.memory == prenet.training_memory(model, **run)
    assert 16 * 2 ** 30 < small.memory.streamed < 40 * 2 ** 30
    assert small.fits is False and large.fits is True
    assert f"memory {small.memory.streamed / 2 ** 30:.2f} GiB a step" in repr(small)
    assert "more than its 16 GiB, the step does not fit" in repr(small) and "of its 40 GiB" in repr(large)
    table = prenet.compare(model, gpus=["T4", "A100"], progress=False, **run).set_index("gpu")
    assert table["fits"].to_dict() == {small.gpu: False, large.gpu: True}
    with pytest.warns(UserWarning):  # this machine's CPU is not the measured host
        on_cpu = prenet.predict(model, gpu="cpu", batch=2, input_shape=(3, 16, 16), dataset_size=2)
    assert on_cpu.fits is None and "memory" not in repr(on_cpu)


def test_batch_norms_empty_reserve_is_the_cpus_not_a_gpus():
    """aten's batch norm makes an empty reserve beside native_batch_norm where the trace runs; a GPU's cuDNN batch
    norm makes its own and dispatches none (bench/results/gpu_trace_vs_device_h100.md), so a GPU pays no host cost
    for it."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 14 * 14, 3))
    reserve = "empty.memory_format"
    on_gpu = prenet.predict(model, batch=8, input_shape=(3, 16, 16), gpu="V100").ops
    on_cpu = prenet.predict(model, batch=8, input_shape=(3, 16, 16), gpu="cpu").ops
    assert reserve not in set(on_gpu.op) and list(on_cpu.op).count(reserve) == 1
