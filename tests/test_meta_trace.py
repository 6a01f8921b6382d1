"""Tracing on the meta device (prenet.meta_model): the same operators, shapes and dtypes as a real run, the user's
model left as it was, and a real trace where the meta device cannot run the model."""
import pytest
import torch
import torchvision
from torch import nn

import prenet
from prenet import meta_model, op_trace


def signature(ops):
    return [(o.phase, o.name, o.inputs, o.outputs, o.input_dtypes, o.output_dtypes, o.module) for o in ops]


def image_batch(b, device="cpu"):
    return torch.randn(b, 3, 32, 32) if device == "cpu" else torch.empty(b, 3, 32, 32, device=device)


def strided_dilated_transposed():
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, dilation=2), nn.BatchNorm2d(8), nn.GELU(),
                         nn.ConvTranspose2d(8, 4, 3, stride=2, output_padding=1), nn.Flatten(), nn.LazyLinear(5))


@pytest.mark.parametrize("build, autocast", [
    (lambda: torchvision.models.resnet18(weights=None), False),
    (lambda: torchvision.models.resnet18(weights=None), True),
    (lambda: torchvision.models.vgg11(weights=None), True),
    # fp32 only: torch 1.13's CPU kernel fails a bfloat16 transposed convolution (the meta trace does not)
    (strided_dilated_transposed, False),
], ids=["resnet18", "resnet18-bf16", "vgg11-bf16", "strided-dilated-transposed"])
def test_meta_trace_matches_a_real_trace(build, autocast):
    model = build()
    model(image_batch(2))  # materialise lazy modules
    model.train()
    real = op_trace.trace_once(model, image_batch(3), autocast)
    meta = op_trace.trace_once(model, image_batch(3, "meta"), autocast, meta=True)
    assert signature(meta) == signature(real)


def test_a_transformer_traced_on_meta_matches_a_real_trace():
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2).train()
    torch.manual_seed(0)
    real = op_trace.trace_once(model, torch.randn(3, 7, 32))
    meta = op_trace.trace_once(model, torch.empty(3, 7, 32, device="meta"), meta=True)
    # dropout draws its mask on the CPU (bernoulli_) and on meta alike; the operators and shapes agree
    assert signature(meta) == signature(real)


class MadeInForward(nn.Module):
    """Tensors made in the forward pass without a device (positions, a causal mask): on the CPU by default, which
    meta inputs refuse to meet; the meta trace makes them on meta, as training makes them on the inputs' device."""

    def __init__(self):
        super().__init__()
        self.tokens, self.positions, self.out = nn.Embedding(100, 16), nn.Embedding(64, 16), nn.Linear(16, 100)

    def forward(self, ids):
        length = ids.shape[1]
        hidden = self.tokens(ids) + self.positions(torch.arange(length))
        causal = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        scores = torch.softmax(hidden @ hidden.transpose(1, 2) + causal, dim=-1)
        return self.out(scores @ hidden + torch.ones(16))


def test_tensors_made_in_the_forward_pass_are_made_on_meta_in_a_meta_trace():
    model = MadeInForward().train()
    ids = torch.randint(100, (3, 12))
    real = op_trace.trace_once(model, ids)
    meta = op_trace.trace_once(model, ids.to("meta"), meta=True)
    assert signature(meta) == signature(real)
    assert {"arange.default", "full.default", "ones.default"} <= {op.name for op in meta}
    estimate = prenet.predict(model, batch=8, gpu="V100", example_input=ids[:1], progress=False)
    assert estimate.traced == "meta" and estimate.traced_for_real_because is None


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_shape_rule_agrees_with_pytorch(dims, transposed):
    conv = {(1, False): nn.Conv1d, (2, False): nn.Conv2d, (3, False): nn.Conv3d,
            (1, True): nn.ConvTranspose1d, (2, True): nn.ConvTranspose2d, (3, True): nn.ConvTranspose3d}
    extra = {"output_padding": 1} if transposed else {}
    layer = conv[(dims, transposed)](4, 6, 3, stride=2, padding=1, dilation=2, groups=2, **extra)
    x = torch.randn((2, 4) + (9,) * dims)
    expected = layer(x).shape
    stride, padding, dilation = [2] * dims, [1] * dims, [2] * dims
    out = meta_model.MISSING_META_KERNELS[torch.ops.aten.convolution.default](
        x.to("meta"), layer.weight.to("meta"), None, stride, padding, dilation, transposed,
        [1] * dims if transposed else [0] * dims, 2)
    assert out.shape == expected and out.device.type == "meta"


def test_convolution_shape_rule_rejects_wrong_channels():
    rule = meta_model.MISSING_META_KERNELS[torch.ops.aten.convolution.default]
    with pytest.raises(RuntimeError, match="channels"):
        rule(torch.empty(2, 5, 8, 8, device="meta"), torch.empty(6, 4, 3, 3, device="meta"), None,
             [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    (2, None, 0, 1, False), (3, 2, 1, 1, True), ((1, 3, 2), (1, 2, 2), (0, 1, 1), (1, 2, 1), True),
    (3, 2, 0, 1, True)])
def test_max_pool3d_shape_rule_agrees_with_pytorch(kernel, stride, padding, dilation, ceil_mode):
    x = torch.randn(2, 3, 7, 12, 13)
    expected = nn.functional.max_pool3d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    as_list = (lambda v: [v] if isinstance(v, int) else list(v))
    out, indices = meta_model.MISSING_META_KERNELS[torch.ops.aten.max_pool3d_with_indices.default](
        x.to("meta"), as_list(kernel), [] if stride is None else as_list(stride), as_list(padding),
        as_list(dilation), ceil_mode)
    assert out.shape == expected[0].shape and out.dtype == x.dtype
    assert indices.shape == expected[1].shape and indices.dtype == torch.int64


class ConvThen(nn.Module):
    """A convolution, then `after` on its output: a layer or loss whose operators torch 1.13 has no meta kernel
    for (their shape rules are prenet.meta_model's)."""
    def __init__(self, after, dims=2):
        super().__init__()
        self.conv, self.after = (nn.Conv2d if dims == 2 else nn.Conv3d)(3, 3, 3, padding=1), after

    def forward(self, x):
        return self.after(self.conv(x))


def pixel_labels(y):
    return torch.zeros(y.shape[0], *y.shape[2:], dtype=torch.long, device=y.device)


WITHOUT_META_KERNELS = {
    # video models (MViT): max_pool3d_with_indices and its backward
    "max_pool3d": (lambda: ConvThen(nn.Sequential(nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True),
                                                  nn.MaxPool3d((1, 2, 2))), dims=3), (3, 3, 7, 12, 13)),
    "grid_sample": (lambda: ConvThen(lambda y: nn.functional.grid_sample(
        y, y[:, :2].permute(0, 2, 3, 1).tanh(), align_corners=False)), (2, 3, 8, 8)),
    "rrelu": (lambda: ConvThen(nn.RReLU()), (2, 3, 8, 8)),
    "weight_norm": (lambda: nn.utils.weight_norm(nn.Conv2d(3, 4, 3)), (2, 3, 8, 8)),
    # a segmentation model returning its own loss: nll_loss2d
    "pixel_cross_entropy": (lambda: ConvThen(lambda y: nn.functional.cross_entropy(y, pixel_labels(y))),
                            (2, 3, 8, 8)),
    "pixel_cross_entropy_none": (lambda: ConvThen(lambda y: nn.functional.cross_entropy(
        y, pixel_labels(y), reduction="none")), (2, 3, 8, 8)),
    # torch 1.13's meta kernel fails on the compute mode torch.cdist passes
    "cdist": (lambda: ConvThen(lambda y: torch.cdist(y.flatten(2), y.flatten(2).flip(1))), (2, 3, 8, 8)),
    "smooth_l1_loss": (lambda: ConvThen(lambda y: nn.functional.smooth_l1_loss(y, torch.zeros_like(y))),
                       (2, 3, 8, 8)),
}


@pytest.mark.parametrize("name", WITHOUT_META_KERNELS)
def test_operators_without_a_meta_kernel_trace_on_meta_as_for_real(name):
    build, shape = WITHOUT_META_KERNELS[name]
    model = build()
    real = op_trace.trace_once(model, torch.randn(shape))
    meta = op_trace.trace_once(model, torch.empty(shape, device="meta"), meta=True)
    assert signature(meta) == signature(real)


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.fc = nn.EmbeddingBag(50, 8, mode="mean"), nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.bag(x))


def test_an_embedding_bag_is_traced_on_meta():
    # torch 1.13 has no meta kernel for the table's gradient (_embedding_bag_dense_backward); torch 2.11 records the
    # gradient as _embedding_bag_backward, whose dense kernel it runs inside (GPU session 2026-11-27)
    model, tokens = Bag(), torch.randint(0, 50, (4, 6))
    real = op_trace.trace_once(model, tokens)
    meta = op_trace.trace_once(model, tokens.to("meta"), meta=True)
    names = ("_embedding_bag_dense_backward.default", "_embedding_bag_backward.default")
    gradient = [o for o in meta if o.name in names]
    assert len(gradient) == 1 and gradient[0].outputs == [(50, 8)] and gradient[0].output_dtypes == ["float32"]
    # the same operators; only the bookkeeping output of the forward (maximum indices: one per bag on the CPU,
    # none in torch's meta kernel) and its use in the backward differ, by a few bytes
    assert [(o.phase, o.name, o.outputs[0]) for o in meta] == [(o.phase, o.name, o.outputs[0]) for o in real]
    estimate = prenet.predict(model, batch=4, gpu="T4", example_input=tokens, dataset_size=8)
    assert estimate.traced == "meta"


def test_predict_leaves_the_model_untouched():
    model = torchvision.models.resnet18(weights=None)
    model.eval()
    model.fc.weight.grad = torch.ones_like(model.fc.weight)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    estimate = prenet.predict(model, batch=8, gpu="V100", input_shape=(3, 32, 32), dataset_size=16)
    assert estimate.traced == "meta"
    assert not model.training, "the model's mode is restored"
    for key, value in model.state_dict().items():  # weights and BatchNorm statistics (a real step updates those)
        assert value.device.type == "cpu" and torch.equal(value, before[key]), key
    assert torch.equal(model.fc.weight.grad, torch.ones_like(model.fc.weight)), "the user's gradients are kept"
    assert all(p.device.type == "cpu" for p in model.parameters())


class NeedsData(nn.Module):
    """Branches on a value of its input: the meta device cannot run it."""
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 4)

    def forward(self, x):
        return self.linear(x) * 2 if float(x.sum()) > -1e9 else self.linear(x)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


@pytest.mark.parametrize("model, shape, kind, why", [
    (NeedsData(), (6,), "linear", "the meta device cannot run it: the model rejected the input (failed in module "
                                  "'NeedsData', given (4, 6)): "),
    (Recurrent(), (5, 6), "lstm", "it has recurrent layers")], ids=["data", "lstm"])
def test_models_the_meta_device_cannot_run_are_traced_for_real(model, shape, kind, why):
    estimate = prenet.predict(model, batch=4, gpu="T4", input_shape=shape, dataset_size=8)
    assert estimate.traced == "cpu" and estimate.traced_for_real_because.startswith(why)
    assert f"traced for real at small batches ({why}" in repr(estimate)
    assert estimate.step_seconds > 0 and kind in set(estimate.ops["kind"].dropna())
    # traced at batches 2 and 3, the layers' inputs are extrapolated to the batch like the operators' shapes
    assert estimate.layers.set_index("name")["input_shape"].dropna().map(lambda shape: shape[0]).eq(4).all()


class NeedsDataWithNorm(nn.Module):
    """Branches on a value (traced for real) and has BatchNorm statistics and dropout (state a real step changes)."""
    def __init__(self):
        super().__init__()
        self.conv, self.norm, self.drop = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Dropout(0.5)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        y = self.drop(self.norm(self.conv(x)))
        return self.fc((y.relu() if float(y.sum()) > -1e9 else y).mean((2, 3)))


def test_a_model_traced_for_real_is_left_as_it_was():
    model = NeedsDataWithNorm()
    model(torch.randn(4, 3, 12, 12)).sum().backward()  # the user's gradients, mid-way through their own step
    state = {k: v.clone() for k, v in model.state_dict().items()}
    gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
    torch.manual_seed(7)
    expected_draw = torch.rand(3)
    torch.manual_seed(7)
    estimate = prenet.predict(model, batch=8, gpu="V100", input_shape=(3, 12, 12), dataset_size=16)
    assert estimate.traced == "cpu"
    assert torch.equal(torch.rand(3), expected_draw), "the random number generator is where it was"
    for key, value in model.state_dict().items():  # BatchNorm's running statistics and step count included
        assert torch.equal(value, state[key]), key
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.equal(p.grad, gradients[name]), name


def test_a_model_built_on_the_meta_device_is_predicted_without_its_weights():
    model = torchvision.models.resnet18(weights=None).to("meta")  # as a model too large to materialise is built
    real = prenet.predict(torchvision.models.resnet18(weights=None), batch=4, gpu="T4", input_shape=(3, 32, 32),
                          dataset_size=8)
    estimate = prenet.predict(model, batch=4, gpu="T4", input_shape=(3, 32, 32), dataset_size=8)
    assert estimate.traced == "meta" and estimate.step_seconds == pytest.approx(real.step_seconds)
    with pytest.raises(ValueError, match="on the meta device, but it must be traced with real data .*recurrent"):
        prenet.predict(Recurrent().to("meta"), batch=4, gpu="T4", input_shape=(5, 6), dataset_size=8)


def test_meta_and_real_traces_give_the_same_estimate():
    model = torchvision.models.resnet18(weights=None)
    make = lambda b, device="cpu": image_batch(b, device)  # noqa: E731
    meta, how, why = op_trace.trace_batches(model.train(), make, [8])
    assert how == "meta"
    real = op_trace.at_batch(op_trace.trace_small(model, lambda b: make(b)), 8)
    assert [(o.name, o.inputs, o.outputs) for o in meta[8]] == [(o.name, o.inputs, o.outputs) for o in real]


def test_the_reason_to_trace_for_real_names_the_operator_without_a_meta_kernel():
    # PyTorch's message names the operator, then adds a paragraph on selective builds: only the operator is kept
    class Elastic(nn.Module):  # RReLU's noise without prenet's rule: no meta kernel in torch 1.13
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(6, 4)

        def forward(self, x):
            return torch.ops.aten.rrelu_with_noise(self.linear(x), torch.zeros(x.shape[0], 4, device=x.device),
                                                   0.1, 0.3, True)

    rules = meta_model.MISSING_META_KERNELS
    saved = rules.pop(torch.ops.aten.rrelu_with_noise.default)
    try:
        _, how, why = op_trace.trace_batches(Elastic().train(), lambda b, device="cpu": torch.randn(b, 6,
                                                                                                  device=device), [4])
    finally:
        rules[torch.ops.aten.rrelu_with_noise.default] = saved
    if how == "meta":
        pytest.skip("this torch has a meta kernel for rrelu_with_noise (torch 1.13 has none)")
    assert why.endswith("this torch has no meta kernel for aten::rrelu_with_noise") and len(why) < 200, why


def test_weights_are_restored_when_the_model_fails_on_meta():
    model = nn.Sequential(nn.Linear(6, 4), nn.Linear(5, 3))  # the second layer rejects the first's output
    weights = list(model.parameters())
    with pytest.raises(ValueError, match=r"failed in module '1'"):
        prenet.predict(model, batch=4, gpu="T4", input_shape=(6,), dataset_size=8)
    assert all(now is before for now, before in zip(model.parameters(), weights))
    assert all(p.device.type == "cpu" for p in model.parameters())


def test_each_module_keeps_its_own_mode():
    model = torchvision.models.resnet18(weights=None).train()
    model.bn1.eval()  # frozen statistics in a model being fine-tuned
    prenet.predict(model, batch=4, gpu="T4", input_shape=(3, 32, 32), dataset_size=8)
    assert model.training and not model.bn1.training and model.layer1[0].bn1.training


def test_recording_without_torch_113s_python_mode_stack_changes_nothing():
    model = torchvision.models.resnet18(weights=None).train()
    x = image_batch(4, "meta")
    direct = op_trace.trace_once(model, x, meta=True, direct_mode=True)
    stacked = op_trace.trace_once(model, x, meta=True, direct_mode=False)
    assert signature(direct) == signature(stacked)
    assert torch._C._len_torch_dispatch_stack() == 0, "no mode is left behind"


def test_weights_on_meta_swaps_a_recurrent_layers_flat_weights_and_restores_them():
    lstm = nn.LSTM(4, 6)
    originals = list(lstm._flat_weights)
    with meta_model.weights_on_meta(lstm):
        assert all(w.device.type == "meta" for w in lstm._flat_weights)
        assert lstm(torch.empty(3, 2, 4, device="meta"))[0].shape == (3, 2, 6)
    assert all(now is before for now, before in zip(lstm._flat_weights, originals))


def test_meta_twins_are_kept_between_traces_while_their_tensors_keep_their_layout():
    layer = nn.Linear(4, 3)
    first = op_trace.trace_once(layer, torch.empty(2, 4, device="meta"), meta=True)
    twin = meta_model.meta_twin(layer.weight)
    assert twin.device.type == "meta" and isinstance(twin, nn.Parameter) and twin.grad is None
    # a second trace finds the twins without the gradients the first one left, so it records the same operators
    assert signature(op_trace.trace_once(layer, torch.empty(2, 4, device="meta"), meta=True)) == signature(first)
    assert meta_model.meta_twin(layer.weight) is twin
    layer.weight.data = torch.empty(3, 4).t().contiguous().t()  # same shape, other strides: a new twin
    assert meta_model.meta_twin(layer.weight) is not twin
    assert meta_model.meta_twin(layer.weight).stride() == layer.weight.stride()
    layer.weight.requires_grad_(False)
    assert not meta_model.meta_twin(layer.weight).requires_grad
    layer.weight.data = torch.empty(5, 4)
    assert meta_model.meta_twin(layer.weight).shape == (5, 4)
    kept, gone = len(meta_model._twins), torch.empty(7)
    meta_model.meta_twin(gone)
    assert len(meta_model._twins) == kept + 1
    del gone  # the entry goes with its tensor
    assert len(meta_model._twins) == kept


def test_a_channels_last_model_is_traced_as_such_on_meta_as_for_real():
    model = torchvision.models.resnet18(weights=None).to(memory_format=torch.channels_last).train()
    inputs = image_batch(3).to(memory_format=torch.channels_last)
    real = op_trace.trace_once(model, inputs, False)
    meta = op_trace.trace_once(model, meta_model.to_meta(inputs), False, meta=True)
    flags = [(o.name, o.channels_last) for o in real if o.name.startswith("convolution")]
    assert len(flags) == 2 * 20 and all(flag for _, flag in flags)  # every convolution, forward and backward
    assert [(o.name, o.channels_last) for o in meta if o.name.startswith("convolution")] == flags
    assert signature(meta) == signature(real)
    plain = op_trace.trace_once(torchvision.models.resnet18(weights=None).train(), image_batch(3), False)
    assert not any(o.channels_last for o in plain)


def test_channels_last_convolutions_pay_no_layout_transposes_on_tensor_cores():
    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 64, 1),
                             nn.BatchNorm2d(64), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))

    example = torch.randn(2, 16, 28, 28)
    for gpu, faster in (("H100", True), ("V100", False)):  # TF32 tensor cores on the H100; none on the V100
        nchw = prenet.predict(build(), batch=32, gpu=gpu, example_input=example, dataset_size=64).ops
        nhwc = prenet.predict(build().to(memory_format=torch.channels_last), batch=32, gpu=gpu,
                              example_input=example.to(memory_format=torch.channels_last), dataset_size=64).ops
        # paired in order among the convolutions (the loss takes a copy of an NHWC output to flatten it)
        convs = list(zip(*([row for _, row in ops.iterrows() if row["kind"] == "conv2d"] for ops in (nchw, nhwc))))
        assert len(convs) == 6 and all(b["config"]["channels_last"] == 1 for _, b in convs)
        for a, b in convs:
            assert a["op"] == b["op"]
            if faster:
                assert b["ms"] <= a["ms"]
            else:
                assert b["ms"] == pytest.approx(a["ms"], rel=1e-9)
        if faster:
            assert sum(b["ms"] for _, b in convs) < 0.95 * sum(a["ms"] for a, _ in convs)


def test_detach_operators_are_recorded_in_full_by_their_short_path():
    """The most frequent operator skips the general walk; its record is what the walk would give."""
    model = torchvision.models.resnet18(num_classes=10)
    ops = op_trace.trace_once(model.train(), torch.randn(2, 3, 32, 32), meta=True)
    detached = [op for op in ops if op.name == "detach.default"]
    assert len(detached) > 60
    for op in detached:
        assert op.inputs == op.outputs and len(op.inputs) == 1 and op.arguments == [op_trace.TENSOR]
        assert op.input_dtypes == op.output_dtypes == [op.dtype] == ["float32"] and not op.channels_last
    # autograd hands each parameter its gradient through one (per parameter: weight, bias)
    backward_shapes = sorted(op.inputs[0] for op in detached if op.phase == "backward")
    assert set(tuple(p.shape) for p in model.parameters()) <= set(backward_shapes)


@pytest.mark.parametrize("meta", [True, False])
def test_detach_calls_are_those_the_dispatcher_runs(meta):
    """Autograd's own copies of tensors (saved for the backward pass, a view's base) reach a dispatch mode as
    detach calls: only the calls PyTorch's profiler counts in the same step, unrecorded, are kept (one per
    parameter here, as its gradient is handed over; torch 1.13 shows a mode five per parameter and ReLU)."""
    model = torchvision.models.resnet18(num_classes=10).train()
    x = torch.randn(2, 3, 32, 32)
    if op_trace._dispatched_detach() is None:
        pytest.skip("this PyTorch gives a dispatch mode no way to tell the dispatcher's detach from autograd's copies")
    traced = op_trace.trace_once(model, x, meta=meta)
    model.zero_grad(set_to_none=True)
    with torch.profiler.profile() as profile:
        op_trace.training_loss(model(x)).backward()
    model.zero_grad(set_to_none=True)
    profiled = sum(event.name == "aten::detach" for event in profile.events())
    assert sum(op.name == "detach.default" for op in traced) == profiled == len(list(model.parameters()))


def test_in_place_activations_are_costed_as_their_out_of_place_twins():
    """An activation applied in place (an LSTM cell's sigmoid_ and tanh_ on the CPU, ReLU(inplace=True)) runs the
    same kernel as out of place: the same kind and configuration, not the traffic of a copy."""
    from prenet import op_costs

    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            y = self.linear(x)
            outs = [f(y.clone()) for f in (torch.tanh, torch.sigmoid, torch.relu, nn.functional.silu,
                                           nn.functional.hardtanh)]
            ins = [f(y.clone()) for f in (torch.tanh_, torch.sigmoid_, torch.relu_,
                                          lambda t: nn.functional.silu(t, inplace=True),
                                          lambda t: nn.functional.hardtanh(t, inplace=True))]
            return sum(outs) + sum(ins)

    ops = [op for op in op_trace.trace_once(Both().train(), torch.randn(4, 8)) if op.phase == "forward"]
    works = {op.name.split(".")[0]: op_costs.work_of(op) for op in ops}
    for name in ("tanh", "sigmoid", "relu", "silu", "hardtanh"):
        out_of_place, in_place = works[name], works[name + "_"]
        assert in_place.how == out_of_place.how == "layer"
        assert (in_place.kind, in_place.config, in_place.part) == (out_of_place.kind, out_of_place.config, "forward")


@pytest.mark.parametrize("warmup_steps", [op_trace.SCRIPTED_WARMUP_STEPS, 0])
def test_a_torchscript_model_is_traced_past_its_profiled_first_step(monkeypatch, warmup_steps):
    # TorchScript's profiling executor runs a graph's first call as written and later ones with autodiff's backward:
    # without tracing on past the first step, a fresh scripted model is traced otherwise than after a step, and
    # its per-module table (a second trace) finds other operators
    from prenet.estimate import trace_steps

    def fresh():  # of a class of its own: TorchScript shares its compiled graphs between modules of one type
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)

            def forward(self, x):
                return self.b(torch.relu(self.a(x)))

        return torch.jit.script(Net())

    monkeypatch.setattr(op_trace, "SCRIPTED_WARMUP_STEPS", warmup_steps)
    scripted = fresh()
    first, second = ([op.name for op in trace_steps(scripted, 8, 64, (16,)).ops_by_size[8]] for _ in range(2))
    if warmup_steps == 0:  # the fault the warm-up removes (this fails where TorchScript stops profiling first)
        assert first != second
        return
    assert first == second
    estimate = prenet.predict(fresh(), batch=8, gpu="V100", input_shape=(16,), dataset_size=64, progress=False)
    assert estimate.layers["name"].tolist()[-1] == "RecursiveScriptModule"
