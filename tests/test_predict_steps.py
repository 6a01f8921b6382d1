"""prenet.predict_steps and prenet.predict_training: the function-space dynamics against training the linearised
model for real, the losses against PyTorch's, the subset extrapolation, and errors."""
import copy
import math

import numpy as np
import pytest
import torch

import prenet
from prenet.loss_dynamics import CrossEntropy, MeanSquared, batch_order
from prenet.tangent_kernel import gram_matrix, jacobian_chunks
from prenet.training_steps import _steps_to

SAMPLES, INPUTS, OUTPUTS = 23, 5, 3


def small_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, 8), torch.nn.Tanh(), torch.nn.Linear(8, OUTPUTS))


def small_data(loss, seed=1):
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(SAMPLES, INPUTS, generator=generator)
    if loss == "cross_entropy":
        return inputs, torch.randint(0, OUTPUTS, (SAMPLES,), generator=generator)
    return inputs, torch.randn(SAMPLES, OUTPUTS, generator=generator)


def train_linearised(model, inputs, targets, loss, lr, momentum, batch, steps, seed):
    """Trains f0 + J (w - w0) for real: the Jacobian from torch.autograd.functional.jacobian, torch.optim.SGD,
    torch's loss; batches in batch_order's sequence. Returns the loss on all samples after 0..steps steps."""
    names = [name for name, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    w0 = torch.cat([p.detach().double().reshape(-1) for p in model.parameters()])
    x = inputs.double()
    model64 = model.double()

    def outputs(flat):
        params, start = {}, 0
        for name, shape in zip(names, shapes):
            size = math.prod(shape)
            params[name] = flat[start:start + size].reshape(shape)
            start += size
        return torch.func.functional_call(model64, params, (x,)) if hasattr(torch, "func") else \
            torch.nn.utils.stateless.functional_call(model64, params, (x,))

    f0 = outputs(w0).detach()
    jacobian = torch.autograd.functional.jacobian(outputs, w0)          # (n, K, P)
    delta = torch.zeros_like(w0, requires_grad=True)
    optimizer = torch.optim.SGD([delta], lr=lr, momentum=momentum)
    criterion = torch.nn.CrossEntropyLoss() if loss == "cross_entropy" else torch.nn.MSELoss()
    y = targets if loss == "cross_entropy" else targets.double()
    order = batch_order(len(x), batch, seed)
    losses = []
    for step in range(steps + 1):
        with torch.no_grad():
            losses.append(criterion(f0 + jacobian @ delta, y).item())
        if step == steps:
            break
        rows = torch.as_tensor(next(order))
        optimizer.zero_grad()
        criterion(f0[rows] + jacobian[rows] @ delta, y[rows]).backward()
        optimizer.step()
    model.float()
    return np.array(losses)


@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_function_space_sgd_matches_training_the_linearised_model(loss, momentum):
    model = small_model()
    data = small_data(loss)
    steps, batch, seed = 40, 5, 7
    lr = 0.3 if momentum == 0 else 0.1
    predicted = prenet.predict_steps(model, data, loss=loss, lr=lr, batch=batch, momentum=momentum, runs=1,
                                     seed=seed, max_steps=steps)
    assert predicted.subset_sizes == [SAMPLES]                        # the whole set: nothing extrapolated
    np.testing.assert_array_equal(predicted.curve_steps, np.arange(steps + 1))
    actual = train_linearised(model, *data, loss, lr, momentum, batch, steps, seed)
    assert actual[-1] < 0.85 * actual[0]                              # it did train
    np.testing.assert_allclose(predicted.curve, actual, rtol=1e-10)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_mse_closed_form_matches_full_batch_training(momentum):
    model = small_model(seed=3)
    data = small_data("mse", seed=4)
    predicted = prenet.predict_steps(model, data, loss="mse", lr=0.3, batch=SAMPLES, momentum=momentum,
                                     noise="mean", max_steps=60)
    actual = train_linearised(model, *data, "mse", 0.3, momentum, SAMPLES, 60, seed=0)
    np.testing.assert_allclose(predicted.curve, actual, rtol=1e-9)


def test_losses_and_gradients_match_pytorch():
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(7, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    labels = torch.randint(0, 4, (7,), generator=generator)
    torch.nn.CrossEntropyLoss()(logits, labels).backward()
    f, y = logits.detach().numpy(), labels.numpy()
    assert CrossEntropy.value(f, y) == pytest.approx(torch.nn.CrossEntropyLoss()(logits, labels).item(), rel=1e-13)
    np.testing.assert_allclose(CrossEntropy.gradient(f, y), logits.grad.numpy(), rtol=1e-12)

    predictions = torch.randn(7, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    targets = torch.randn(7, 4, dtype=torch.float64, generator=generator)
    torch.nn.MSELoss()(predictions, targets).backward()
    p, t = predictions.detach().numpy(), targets.numpy()
    assert MeanSquared.value(p, t) == pytest.approx(torch.nn.MSELoss()(predictions, targets).item(), rel=1e-13)
    np.testing.assert_allclose(MeanSquared.gradient(p, t), predictions.grad.numpy(), rtol=1e-12)


def test_batches_are_epochs_of_permutations_with_the_partial_batch_kept():
    order = batch_order(11, 4, seed=2)
    epoch = [next(order) for _ in range(3)]
    assert [len(b) for b in epoch] == [4, 4, 3]
    assert sorted(np.concatenate(epoch)) == list(range(11))
    again = batch_order(11, 4, seed=2)
    assert all((next(again) == b).all() for b in epoch)


@pytest.mark.parametrize("extrapolation, first_step, at_n", [
    ("inverse", lambda m: 300 - 6400 / m, lambda n: 300 - 6400 / n),
    ("log", lambda m: 10 + 20 * math.log(m), lambda n: 10 + 20 * math.log(n)),
    ("power", lambda m: 2 * m ** 0.5, lambda n: 2 * n ** 0.5),
])
def test_subset_steps_are_extrapolated_by_the_named_form(extrapolation, first_step, at_n):
    steps = np.arange(0, 2001)
    curves = {size: (steps, np.where(steps < first_step(size), 1.0, 0.05)) for size in (64, 128, 256)}
    # the subsets cross at ceil(T_m): the fit sees those, so allow one step either way
    assert abs(_steps_to(curves, 1000, 0.1, 2000, extrapolation) - at_n(1000)) <= 1.5
    assert _steps_to(curves, 1000, 0.1, 20, extrapolation) is None            # beyond the cap
    assert _steps_to({64: curves[64]}, 1000, 0.1, 2000, extrapolation) == math.ceil(first_step(64))


@pytest.mark.parametrize("extrapolation", ["inverse", "log", "power"])
def test_more_data_is_never_extrapolated_to_train_faster(extrapolation):
    steps = np.arange(0, 1001)
    falling = {size: (steps, np.where(steps < 300 - size, 1.0, 0.05)) for size in (64, 128)}
    assert _steps_to(falling, 10 ** 6, 0.1, 1000, extrapolation) == 172      # the largest subset's own


def test_a_larger_dataset_is_predicted_from_nested_subsets():
    model = small_model(seed=2)
    generator = torch.Generator().manual_seed(9)
    inputs = torch.randn(300, INPUTS, generator=generator)
    labels = torch.randint(0, OUTPUTS, (300,), generator=generator)
    prediction = prenet.predict_steps(model, (inputs, labels), lr=0.5, batch=8, subset=64, target_loss=[0.95, 0.85],
                                      max_steps=3000, runs=2, extrapolate="log")
    assert prediction.subset_sizes == [16, 23, 32, 45, 64]
    with torch.no_grad():
        whole = torch.nn.CrossEntropyLoss()(model(inputs.double().float()), labels).item()
    assert prediction.initial_loss == pytest.approx(whole, rel=1e-6)   # from all 300 samples, not the subset
    first, second = prediction.steps
    assert first is not None and second is not None and 0 < first < second <= 3000
    assert prediction.steps_to(0.95) == first
    assert "extrapolated (log) from subsets of 16, 23, 32, 45, 64 to 300 samples" in repr(prediction)
    assert prediction.steps_to(0.95, "inverse") is not None
    assert prediction.to_frame()["loss"].is_monotonic_decreasing
    # the kernel is reused for another learning rate, and rejected for other weights
    again = prenet.predict_steps(model, (inputs, labels), lr=0.1, batch=8, subset=64, target_loss=0.95,
                                 max_steps=3000, runs=2, kernel=prediction.kernel)
    assert again.subset_sizes == [64] and "linearised on 64 of 300 samples" in repr(again)   # the default
    assert again.kernel_seconds == 0 and again.steps > first
    with torch.no_grad():
        model[0].bias.add_(0.5)
    with pytest.raises(ValueError, match="not computed on this model's current weights"):
        prenet.predict_steps(model, (inputs, labels), subset=64, kernel=prediction.kernel)


def test_an_unreachable_target_is_said_so():
    model = small_model()
    prediction = prenet.predict_steps(model, small_data("cross_entropy"), lr=0.01, batch=5, target_loss=1e-6,
                                      max_steps=50)
    assert prediction.steps is None and not prediction.rises
    assert f"does not reach 1e-06 within 50 steps (lowest predicted loss {prediction.curve.min():.4g})" in repr(
        prediction)
    # far too large a learning rate: the loss rises, and the statement says why the target is not reached
    with pytest.warns(prenet.LinearisationWarning, match="the network leaves its linearisation"):
        diverging = prenet.predict_steps(model, small_data("cross_entropy"), lr=500.0, batch=5, target_loss=1e-6,
                                         max_steps=50, kernel=prediction.kernel)
    assert diverging.rises and diverging.curve[-1] > diverging.curve[0]
    assert "the learning rate is too large for the linearised model" in repr(diverging)


def test_projected_kernel_approximates_the_exact_one():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3))
    inputs = torch.randn(10, 12)
    exact, f0, parameters, projected = gram_matrix(model, inputs)
    assert projected is None and parameters == 12 * 40 + 40 + 40 * 3 + 3
    # linear layers are factored exactly unless told otherwise: the sketch covers whatever is not
    assert gram_matrix(model, inputs, projection_dim=300)[3] is None
    sketched, f0_again, _, projected = gram_matrix(model, inputs, projection_dim=300, seed=1, factor_layers=False)
    assert projected == 300
    np.testing.assert_array_equal(f0, f0_again)
    assert np.linalg.norm(sketched - exact) < 0.25 * np.linalg.norm(exact)
    np.testing.assert_allclose(np.diag(sketched).sum(), np.diag(exact).sum(), rtol=0.1)
    # The sketch is CountSketch exactly: parameter p's Jacobian column, times sign[p], added into column bucket[p].
    generator = torch.Generator().manual_seed(1)
    bucket = torch.randint(0, 300, (parameters,), generator=generator)
    sign = torch.randint(0, 2, (parameters,), generator=generator).double() * 2 - 1
    jacobian = torch.cat([b.reshape(-1, parameters) for b in jacobian_chunks(model, inputs)])
    columns = torch.zeros(jacobian.shape[0], 300, dtype=torch.float64)
    for p in range(parameters):
        columns[:, bucket[p]] += sign[p] * jacobian[:, p]
    expected = (columns @ columns.T).numpy()                     # a sketched kernel's product is float32's
    np.testing.assert_allclose(sketched, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


def exact_kernel_check(model, inputs):
    """(projected_dim, parameters, the explicit kernel) of gram_matrix's kernel of `model` on `inputs`, having
    checked that kernel and its outputs against the explicit Jacobian's (factor_layers=False): equal to 1e-10."""
    fast, f0, parameters, projected = gram_matrix(model, inputs)
    explicit, f0_explicit, _, _ = gram_matrix(model, inputs, factor_layers=False)
    np.testing.assert_allclose(fast, explicit, rtol=1e-10, atol=1e-12 * np.abs(explicit).max())
    np.testing.assert_array_equal(f0, f0_explicit)
    return projected, parameters, explicit


class SharedLayer(torch.nn.Module):
    """One linear layer run twice (not factored) before a factored one."""
    def __init__(self):
        super().__init__()
        self.twice, self.head = torch.nn.Linear(6, 6), torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.twice(torch.tanh(self.twice(x)))))


@pytest.mark.parametrize("build, features", [
    (lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)), 8),
    (lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                 torch.nn.Linear(16, 16, bias=False), torch.nn.BatchNorm1d(16),
                                 torch.nn.Linear(16, 3)), 8),
    (SharedLayer, 6),
    (lambda: torch.nn.Linear(8, 4), 8),   # the layer is the model: its parameters are named "weight", "bias"
], ids=["mlp", "norms-and-no-bias", "shared-layer", "a-layer-alone"])
def test_factored_linear_layers_give_the_exact_kernel(build, features):
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = build().eval()
    inputs = torch.randn(12, features)
    exact_kernel_check(model, inputs)
    if isinstance(model, SharedLayer):
        assert set(qualifying_layers(model, inputs)) == {"head"}


def small_cnn(**conv):
    """Conv2d(2, 4, **conv) -> tanh -> a 1x1 convolution -> flatten -> linear, on 2 x 7 x 6 images."""
    first = torch.nn.Conv2d(2, 4, **conv)
    with torch.no_grad():
        size = first(torch.zeros(1, 2, 7, 6)).shape
    return torch.nn.Sequential(first, torch.nn.Tanh(), torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4),
                               torch.nn.Flatten(), torch.nn.Linear(4 * size[2] * size[3], 3))


class Conv1dNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(3, 6, 3, stride=2, padding=2, dilation=2, groups=3)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.conv(x)).mean(-1))


@pytest.mark.parametrize("build, shape, factored", [
    (lambda: small_cnn(kernel_size=3, padding=1), (2, 7, 6), {"0", "2", "3", "5"}),
    (lambda: small_cnn(kernel_size=(3, 2), stride=(2, 1), padding=(0, 1), dilation=(1, 2), bias=False), (2, 7, 6),
     {"0", "2", "3", "5"}),
    (lambda: small_cnn(kernel_size=3, groups=2), (2, 7, 6), {"0", "2", "3", "5"}),
    (lambda: small_cnn(kernel_size=3, padding="same"), (2, 7, 6), {"2", "3", "5"}),  # 'same': its Jacobian
    (lambda: small_cnn(kernel_size=3, padding=1, padding_mode="reflect"), (2, 7, 6), {"2", "3", "5"}),
    (Conv1dNet, (3, 11), {"conv", "head"}),
], ids=["conv2d", "strided-dilated-no-bias", "groups", "same-padding", "reflect-padding", "conv1d-grouped"])
def test_convolutions_rows_from_their_sensitivities_give_the_exact_kernel(build, shape, factored):
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = build().eval()
    inputs = torch.randn(9, *shape)
    assert set(qualifying_layers(model, inputs)) == factored
    projected, parameters, _ = exact_kernel_check(model, inputs)
    assert projected is None and parameters == sum(p.numel() for p in model.parameters())


def test_the_kernel_shows_its_progress_when_asked(capsys):
    torch.manual_seed(0)
    model = small_cnn(kernel_size=3, padding=1).eval()
    inputs = torch.randn(6, 2, 7, 6)
    gram_matrix(model, inputs, progress=True)
    assert "Layer sensitivities and rows" in capsys.readouterr().err
    gram_matrix(model, inputs)
    assert capsys.readouterr().err == ""


class NormsNet(torch.nn.Module):
    """Linear layers around a norm of (samples, length, width) activations."""
    def __init__(self, norm):
        super().__init__()
        self.embed, self.norm, self.head = torch.nn.Linear(3, 4), norm, torch.nn.Linear(4, 3)

    def forward(self, x):  # x: (samples, 5, 3)
        z = self.embed(x.reshape(-1, 3)).reshape(x.shape[0], 5, 4)
        if isinstance(self.norm, torch.nn.BatchNorm1d):
            z = self.norm(z.transpose(1, 2)).transpose(1, 2)  # channels second
        else:
            z = self.norm(z)
        return self.head(torch.tanh(z).mean(1))


def with_statistics(norm):
    """`norm` with running statistics unlike a batch's, so that normalising by them shows."""
    norm.running_mean.normal_()
    norm.running_var.uniform_(0.5, 2.0)
    return norm


@pytest.mark.parametrize("norm, factored", [
    (torch.nn.LayerNorm(4), True),
    (torch.nn.LayerNorm((5, 4)), True),
    (with_statistics(torch.nn.BatchNorm1d(4)), True),
    (torch.nn.BatchNorm1d(4, affine=False), False),                  # nothing to train
], ids=["layer-norm", "layer-norm-two-dims", "batch-norm-3d-input", "batch-norm-no-affine"])
def test_norms_scales_from_their_sensitivities_give_the_exact_kernel(norm, factored):
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = NormsNet(norm).eval()
    if model.norm.weight is not None:  # a scale other than 1, so that leaving it out of a row shows
        with torch.no_grad():
            model.norm.weight.uniform_(0.5, 1.5)
    inputs = torch.randn(7, 5, 3)
    assert ("norm" in qualifying_layers(model, inputs)) == factored
    assert exact_kernel_check(model, inputs)[0] is None


def test_a_batch_norm_of_the_batchs_statistics_and_a_layer_of_folded_samples_are_not_factored():
    """A batch norm without running statistics normalises by the batch's even in eval mode, and the embedding layer
    of NormsNet sees samples x positions folded into its first dimension: neither has per-sample rows of its own
    input, so both go through the Jacobian."""
    from prenet.layer_sensitivities import qualifying_layers

    model = NormsNet(torch.nn.BatchNorm1d(4, track_running_stats=False)).eval()
    assert set(qualifying_layers(model, torch.randn(7, 5, 3))) == {"head"}


class SequenceNet(torch.nn.Module):
    """Linear layers applied at every position of (samples, *positions, 3) inputs, a layer norm between, then a
    linear head on the mean over positions."""
    def __init__(self):
        super().__init__()
        self.embed, self.norm = torch.nn.Linear(3, 6), torch.nn.LayerNorm(6)
        self.mix, self.head = torch.nn.Linear(6, 8, bias=False), torch.nn.Linear(8, 3)

    def forward(self, x):
        z = self.mix(torch.tanh(self.norm(self.embed(x))))
        return self.head(torch.tanh(z).flatten(1, -2).mean(1))


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 3)], ids=["sequence", "two-position-dimensions"])
@pytest.mark.parametrize("factored", [True, False], ids=["factored-shares", "rows"])
def test_linear_layers_over_positions_give_the_exact_kernel_either_way(monkeypatch, shape, factored):
    """A linear layer on (samples, *positions, features) is a 1x1 convolution over its positions: its share is
    factored over pairs of positions or made from rows (conv_layer_kernel.factoring_pays decides; both forced
    here), exact against the explicit Jacobian either way."""
    from prenet import conv_layer_kernel
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = SequenceNet().eval()
    inputs = torch.randn(7, *shape)
    positions = {}
    assert set(qualifying_layers(model, inputs, positions)) == {"embed", "norm", "mix", "head"}
    assert positions["embed"] == positions["mix"] == math.prod(shape[:-1]) and positions["head"] == 1
    monkeypatch.setattr(conv_layer_kernel, "factoring_pays", lambda *arguments: factored)
    assert exact_kernel_check(model, inputs)[0] is None


class TokenNet(torch.nn.Module):
    """An embedding of token ids (samples, *positions), a linear layer over positions, the mean, a linear head."""
    def __init__(self, **embedding):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 4, **embedding)
        self.mix, self.head = torch.nn.Linear(4, 5), torch.nn.Linear(5, 3)

    def forward(self, tokens):
        z = torch.tanh(self.mix(self.embed(tokens)))
        return self.head(z.reshape(z.shape[0], -1, 5).mean(1))


@pytest.mark.parametrize("embedding, shape", [
    ({}, (6,)), ({"padding_idx": 0}, (6,)), ({}, (2, 3)), ({}, ()),
], ids=["sequence", "padding-row", "two-position-dimensions", "one-token"])
def test_an_embeddings_rows_from_its_lookups_give_the_exact_kernel(embedding, shape):
    """An embedding's rows are its sensitivities added at the rows it looked up (repeated tokens add up; the padding
    row gets none), placed entry by entry: exact against the Jacobian, and sketched as the sketch would sketch them
    whole."""
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = TokenNet(**embedding).eval()
    tokens = torch.randint(0, 4, (7, *shape))  # few distinct tokens: repeats within a sample and across samples
    assert set(qualifying_layers(model, tokens)) == {"embed", "mix", "head"}
    projected, parameters, _ = exact_kernel_check(model, tokens)
    assert projected is None
    # sketched: the table's 44 columns, then, over positions, the linear layer's 25 (its rows: factoring it does not
    # pay here), in the order the forward pass calls them; on one token the linear layer is exact like the head
    sketched, _, _, projected = gram_matrix(model, tokens, projection_dim=30, seed=5)
    assert projected == 30
    jacobian = torch.cat([b.reshape(-1, parameters) for b in jacobian_chunks(model, tokens)])
    count = 69 if shape else 44                                   # named_parameters order: embed, mix, head
    rows, exact = jacobian[:, :count], jacobian[:, count:]
    generator = torch.Generator().manual_seed(5)
    bucket = torch.randint(0, 30, (count,), generator=generator)
    sign = torch.randint(0, 2, (count,), generator=generator).double() * 2 - 1
    projected_rows = torch.zeros(rows.shape[0], 30, dtype=torch.float64).index_add_(1, bucket, rows * sign)
    expected = exact @ exact.T + projected_rows @ projected_rows.T
    np.testing.assert_allclose(sketched, expected.numpy(), rtol=1e-5, atol=1e-6 * np.abs(expected).max().item())


class TiedTokenNet(TokenNet):
    """TokenNet whose head reads the embedding's table back (a language model's tied output layer)."""
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(5, 4)
        self.out = torch.nn.Linear(4, 11, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        return self.out(torch.tanh(super().forward(tokens)))


def autograd_kernel(model, inputs):
    """The tangent kernel J J^T from one autograd backward pass per sample and output (float64)."""
    model = copy.deepcopy(model).double()
    weights = [v for v in model.parameters() if v.requires_grad]
    rows = []
    for sample in inputs:
        outputs = model(sample.unsqueeze(0))[0]
        for output in outputs:
            rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(output, weights, retain_graph=True)]))
    rows = torch.stack(rows)
    return (rows @ rows.T).numpy()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_tied_weight_is_differentiated_through_both_its_layers(dtype):
    """An embedding's table that an output layer reuses is one weight: its rows are the sum of both uses', so
    neither layer is factored alone, and every functional call sees the tied weight under both its names (torch
    1.13 replaced the first name only, the other kept the model's own weight: both failed, unlike other models)."""
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = TiedTokenNet().eval()
    tokens = torch.randint(0, 6, (5, 3))
    assert set(qualifying_layers(model, tokens)) == {"mix", "head"}
    expected = autograd_kernel(model, tokens)
    for factor_layers in (True, False):
        kernel, _, parameters, _ = gram_matrix(model, tokens, dtype=dtype, factor_layers=factor_layers)
        assert parameters == 44 + 25 + 24
        tolerance = 1e-10 if dtype == torch.float64 else 1e-5
        np.testing.assert_allclose(kernel, expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())


def test_an_embedding_that_renormalises_or_scales_by_counts_is_not_factored():
    from prenet.layer_sensitivities import qualifying_layers

    tokens = torch.randint(0, 4, (5, 6))
    for embedding in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}):
        assert set(qualifying_layers(TokenNet(**embedding).eval(), tokens)) == {"mix", "head"}


def test_convolution_and_norm_rows_are_sketched_after_the_jacobians_columns():
    """The reflect-padded convolution's weights go through the Jacobian; the 1x1 convolution's and the batch norm's
    rows follow, in the order the forward pass calls them."""
    torch.manual_seed(0)
    model = small_cnn(kernel_size=3, padding=1, padding_mode="reflect").eval()
    inputs = torch.randn(6, 2, 7, 6)
    sketched, _, parameters, projected = gram_matrix(model, inputs, projection_dim=40, seed=3)
    assert projected == 40
    named = [(name, p.numel()) for name, p in model.named_parameters()]
    jacobian = torch.cat([b.reshape(-1, parameters) for b in jacobian_chunks(model, inputs)])
    columns = dict(zip([name for name, _ in named], jacobian.split([count for _, count in named], dim=1)))
    linear = torch.cat([columns["5.weight"], columns["5.bias"]], dim=1)                  # exact, factored
    explicit = torch.cat([columns[k] for k in ("0.weight", "0.bias",                      # the Jacobian's
                                               "2.weight", "2.bias", "3.weight", "3.bias")], dim=1)
    generator = torch.Generator().manual_seed(3)
    bucket = torch.randint(0, 40, (explicit.shape[1],), generator=generator)
    sign = torch.randint(0, 2, (explicit.shape[1],), generator=generator).double() * 2 - 1
    projected_rows = torch.zeros(explicit.shape[0], 40, dtype=torch.float64).index_add_(1, bucket, explicit * sign)
    expected = linear @ linear.T + projected_rows @ projected_rows.T  # the sketched part's product is float32's
    np.testing.assert_allclose(sketched, expected.numpy(), rtol=1e-5, atol=1e-6 * np.abs(expected).max().item())


class WideLastConvolution(torch.nn.Module):
    """A CNN whose last convolution has many weights over few positions (factored: its share from patches and
    sensitivities, prenet.conv_layer_kernel) and whose first has few weights over many (its gradient rows)."""
    def __init__(self, conv=torch.nn.Conv2d, groups=1, bias=True):
        super().__init__()
        self.first = conv(2, 8, 3, padding=1)
        self.last = conv(8, 48, 3, stride=2, groups=groups, bias=bias)
        self.head = torch.nn.Linear(48, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.last(torch.tanh(self.first(x)))).flatten(2).mean(-1))


@pytest.mark.parametrize("build, shape", [
    (WideLastConvolution, (2, 4, 4)),
    (lambda: WideLastConvolution(groups=2, bias=False), (2, 4, 4)),
    (lambda: WideLastConvolution(torch.nn.Conv1d), (2, 4)),
], ids=["conv2d", "grouped-no-bias", "conv1d"])
def test_a_wide_convolution_over_few_positions_is_factored_exactly_and_needs_no_sketch(build, shape):
    from prenet.conv_layer_kernel import factoring_pays
    from prenet.layer_sensitivities import qualifying_layers

    torch.manual_seed(0)
    model = build().eval()
    inputs = torch.randn(9, *shape)
    positions = {}
    assert set(qualifying_layers(model, inputs, positions)) == {"first", "last", "head"}
    assert positions["first"] == (16 if len(shape) == 3 else 4) and positions["last"] == positions["head"] == 1
    assert factoring_pays(model.last, 9, 3, positions["last"], sketched=False)  # 3,504 weights or fewer: no sketch
    assert not factoring_pays(model.first, 9, 3, positions["first"], sketched=False)
    projected, _, explicit = exact_kernel_check(model, inputs)
    assert projected is None
    # a sketch narrower than the wide convolution's weights, but wide enough for the first's rows: not needed
    first = sum(p.numel() for p in model.first.parameters())
    assert first < sum(p.numel() for p in model.last.parameters())
    narrow, _, _, projected = gram_matrix(model, inputs, projection_dim=first)
    assert projected is None
    np.testing.assert_allclose(narrow, explicit, rtol=1e-10, atol=1e-12 * np.abs(explicit).max())


def test_a_convolutions_factored_share_is_made_in_blocks_of_samples_alike(monkeypatch):
    """Blocks of sample pairs (PRODUCT_BLOCK_BYTES) down to one sample a side give the share made whole, both
    triangles of it."""
    from prenet import conv_layer_kernel
    from prenet.conv_layer_gradients import conv_gradient_rows

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2).double()
    x = torch.randn(5, 4, 7, 9, dtype=torch.float64)
    d = torch.randn(5, 3, *conv(x).shape[1:], dtype=torch.float64)
    rows = conv_gradient_rows(conv, x, d).reshape(15, -1)
    whole = conv_layer_kernel.conv_layer_gram(conv, x, d)
    monkeypatch.setattr(conv_layer_kernel, "PRODUCT_BLOCK_BYTES", 1)
    blocks = conv_layer_kernel.conv_layer_gram(conv, x, d)
    np.testing.assert_allclose(whole, rows @ rows.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blocks, whole, rtol=1e-12, atol=1e-12)


def test_the_kernel_of_a_model_in_train_mode_is_its_eval_mode_kernel_and_changes_nothing():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Dropout(0.5),
                                torch.nn.Tanh(), torch.nn.Linear(16, 3))
    model[1].running_mean.normal_()  # statistics unlike this batch's, so using or updating them shows
    inputs = torch.randn(12, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    in_train = gram_matrix(model.train(), inputs)
    assert all(module.training for module in model.modules())  # each module's mode restored
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # no statistic updated
    in_eval = gram_matrix(model.eval(), inputs)
    np.testing.assert_array_equal(in_train[0], in_eval[0])
    np.testing.assert_array_equal(in_train[1], in_eval[1])


def test_a_model_without_trainable_parameters_is_refused_by_name():
    model = torch.nn.Linear(3, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        gram_matrix(model, torch.randn(4, 3))


def test_a_frozen_bias_adds_nothing():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    model[0].bias.requires_grad_(False)
    inputs = torch.randn(9, 5)
    np.testing.assert_allclose(gram_matrix(model, inputs)[0], gram_matrix(model, inputs, factor_layers=False)[0],
                               rtol=1e-10, atol=1e-14)
    assert gram_matrix(model, inputs)[2] == 5 * 7 + 7 * 2 + 2


@pytest.mark.parametrize("arguments, message", [
    (dict(loss="hinge"), "unknown loss 'hinge'; known: cross_entropy, mse"),
    (dict(lr=0), "lr must be a number > 0"),
    (dict(momentum=1.0), r"momentum must be a number in \[0, 1\)"),
    (dict(batch=0), "batch must be an integer >= 1"),
    (dict(noise="langevin"), "unknown noise treatment 'langevin'"),
    (dict(target_loss=-1.0), "target_loss must be a number > 0"),
    (dict(extrapolate="cubic"), "unknown extrapolation 'cubic'; known: inverse, log, power or None"),
    (dict(loss="mse"), r"mse needs float targets of shape \(n, 3\)"),
])
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        prenet.predict_steps(small_model(), small_data("cross_entropy"), **arguments)


def test_bad_data_and_models_are_named():
    inputs, labels = small_data("cross_entropy")
    with pytest.raises(ValueError, match=r"class indices must lie in \[0, 3\)"):
        prenet.predict_steps(small_model(), (inputs, labels + 3))
    with pytest.raises(ValueError, match="cross_entropy needs integer class indices"):
        prenet.predict_steps(small_model(), (inputs, labels.float()))
    with pytest.raises(ValueError, match=r"inputs \(23\) and targets \(22\) differ"):
        prenet.predict_steps(small_model(), (inputs, labels[:-1]))
    with pytest.raises(TypeError, match="dataset must be an"):
        prenet.predict_steps(small_model(), 42)
    with pytest.raises(ValueError, match=r"output has shape \(23, 3, 1\)"):
        prenet.predict_steps(torch.nn.Sequential(small_model(), torch.nn.Unflatten(1, (3, 1))), (inputs, labels))


def test_a_torch_dataset_is_accepted():
    inputs, labels = small_data("cross_entropy")
    dataset = torch.utils.data.TensorDataset(inputs, labels)
    from_pairs = prenet.predict_steps(small_model(), (inputs, labels), lr=0.3, batch=5, max_steps=20, runs=1)
    from_dataset = prenet.predict_steps(small_model(), dataset, lr=0.3, batch=5, max_steps=20, runs=1)
    np.testing.assert_allclose(from_dataset.curve, from_pairs.curve, rtol=1e-12)


def test_training_time_chains_steps_with_the_step_time():
    model = small_model()
    data = small_data("cross_entropy")
    by_epochs = prenet.predict_training(model, data, gpu="V100", batch=5, epochs=3, price_per_hour=2.0)
    estimate = prenet.predict(model, batch=5, gpu="V100", example_input=data[0][:1], dataset_size=SAMPLES,
                              optimizer="sgd_plain")
    assert by_epochs.steps == 3 * math.ceil(SAMPLES / 5)
    assert by_epochs.total_seconds == pytest.approx(3 * estimate.epoch_seconds, rel=1e-9)
    assert by_epochs.cost == pytest.approx(by_epochs.total_seconds / 3600 * 2.0)
    assert f"cost {by_epochs.cost:.4g} USD at 2 USD per hour" in repr(by_epochs)
    # whether a step fits the GPU, as the step's estimate says (a small model's memory in KiB)
    available = prenet.find_gpu("V100")["memory_gb"]
    assert repr(by_epochs).endswith(f"; memory {estimate.memory.streamed / 2 ** 10:.2f} KiB a step of its "
                                    f"{available:g} GiB (data copied in a batch at a time)>")
    by_target = prenet.predict_training(model, data, gpu="V100", batch=5, lr=0.5, target_loss=0.8, max_steps=500,
                                        runs=1)
    steps = by_target.steps_prediction.steps
    assert steps is not None and by_target.steps == steps
    whole, rest = divmod(steps, math.ceil(SAMPLES / 5))
    assert by_target.total_seconds == pytest.approx(whole * estimate.epoch_seconds + rest * estimate.step_seconds)
    assert f"{steps} steps (predicted for loss 0.8" in repr(by_target)
    unreached = prenet.predict_training(model, data, gpu="V100", batch=5, lr=0.5, target_loss=1e-6, max_steps=50,
                                        runs=1)
    assert unreached.steps is None and unreached.total_seconds is None
    assert "not reached within 50 predicted steps (lowest predicted loss" in repr(unreached)
    # several target losses: each one's steps, epochs, seconds and cost, in their order (it had failed in divmod)
    several = prenet.predict_training(model, data, gpu="V100", batch=5, lr=0.5, target_loss=[0.8, 1e-6],
                                      max_steps=500, runs=1, price_per_hour=2.0)
    assert several.steps == [steps, None] and several.epochs == [steps / math.ceil(SAMPLES / 5), None]
    assert several.total_seconds[0] == pytest.approx(by_target.total_seconds) and several.total_seconds[1] is None
    assert several.cost == [pytest.approx(by_target.total_seconds / 3600 * 2.0), None]
    assert f"loss 0.8 in {steps} steps" in repr(several) and "loss 1e-06 not reached" in repr(several)
    on_h100 = prenet.predict_training(model, data, gpu="H100", batch=5, epochs=1)
    assert on_h100.cost == pytest.approx(on_h100.total_seconds / 3600 * 2.95)   # data/gpu_prices.csv
    with pytest.raises(ValueError, match="exactly one of epochs"):
        prenet.predict_training(model, data, epochs=1, target_loss=0.5)
    with pytest.raises(ValueError, match="exactly one of epochs"):
        prenet.predict_training(model, data)
    # another optimizer's step time, for a given number of epochs; not for SGD's predicted steps
    adam = prenet.predict_training(model, data, gpu="V100", batch=5, epochs=3, optimizer=torch.optim.Adam)
    by_adam = prenet.predict(model, batch=5, gpu="V100", example_input=data[0][:1], dataset_size=SAMPLES,
                             optimizer="adam")
    assert adam.estimate.optimizer == "adam"
    assert adam.total_seconds == pytest.approx(3 * by_adam.epoch_seconds, rel=1e-9)
    with pytest.raises(ValueError, match="with target_loss the steps are SGD's"):
        prenet.predict_training(model, data, lr=0.5, target_loss=0.8, optimizer="adam")
    with pytest.raises(ValueError, match="max_steps: options of predict_steps"):
        prenet.predict_training(model, data, epochs=3, max_steps=100)


def test_training_time_for_epochs_of_a_data_set_described_by_its_size_and_shape():
    model = small_model()
    described = prenet.predict_training(model, gpu="V100", batch=5, epochs=3, dataset_size=SAMPLES,
                                        input_shape=(INPUTS,), price_per_hour=2.0)
    estimate = prenet.predict(model, batch=5, gpu="V100", input_shape=(INPUTS,), dataset_size=SAMPLES,
                              optimizer="sgd_plain")
    assert described.dataset_size == SAMPLES and described.steps == 3 * math.ceil(SAMPLES / 5)
    assert described.total_seconds == pytest.approx(3 * estimate.epoch_seconds, rel=1e-9)
    # the same as with the data itself, whose samples have that shape
    given = prenet.predict_training(model, small_data("cross_entropy"), gpu="V100", batch=5, epochs=3,
                                    price_per_hour=2.0)
    assert described.total_seconds == pytest.approx(given.total_seconds, rel=1e-9)
    like = prenet.predict_training(model, gpu="V100", batch=5, epochs=3, dataset_size=SAMPLES,
                                   example_input=torch.randn(1, INPUTS))
    assert like.total_seconds == pytest.approx(described.total_seconds, rel=1e-9)
    with pytest.raises(ValueError, match="give the dataset or describe it, not both"):
        prenet.predict_training(model, small_data("cross_entropy"), epochs=1, dataset_size=SAMPLES)
    with pytest.raises(ValueError, match="target_loss: the steps to a loss are predicted from the data itself"):
        prenet.predict_training(model, target_loss=0.5, dataset_size=SAMPLES, input_shape=(INPUTS,))
    with pytest.raises(ValueError, match="with epochs describe it: dataset_size"):
        prenet.predict_training(model, epochs=1, input_shape=(INPUTS,))
    with pytest.raises(ValueError, match="dataset_size must be an integer >= 1"):
        prenet.predict_training(model, epochs=1, dataset_size=0, input_shape=(INPUTS,))


def test_a_reused_kernel_keeps_the_whole_sets_initial_loss():
    class CountingDataset(torch.utils.data.TensorDataset):
        reads = 0

        def __getitem__(self, index):
            CountingDataset.reads += 1
            return super().__getitem__(index)

    generator = torch.Generator().manual_seed(4)
    dataset = CountingDataset(torch.randn(200, INPUTS, generator=generator),
                              torch.randint(0, OUTPUTS, (200,), generator=generator))
    model = small_model()
    first = prenet.predict_steps(model, dataset, lr=0.3, batch=5, subset=32, max_steps=20, runs=1)
    assert CountingDataset.reads == 32 + 200          # the subset, then the whole set's initial loss
    CountingDataset.reads = 0
    again = prenet.predict_steps(model, dataset, lr=0.1, batch=5, subset=32, max_steps=20, runs=1,
                                 kernel=first.kernel)
    assert CountingDataset.reads == 32                # the subset only, to check the kernel against the model
    assert again.initial_loss == first.initial_loss


TRAINING_FILES = '''import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def data():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(40, 5, generator=generator), torch.randint(0, 3, (40,), generator=generator)
'''


def test_the_command_line_gives_the_training_time_of_a_users_model_and_data(run_prenet, tmp_path, monkeypatch):
    import json
    import math
    import sys

    (tmp_path / "user_training.py").write_text(TRAINING_FILES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import user_training

    common = ["user_training.py:build", "--data", "user_training:data", "--gpu", "A100", "--batch", "8", "--json"]
    by_epochs = run_prenet("training", *common, "--epochs", "2")
    assert by_epochs.returncode == 0, by_epochs.stderr
    given = json.loads(by_epochs.stdout)
    expected = prenet.predict_training(user_training.build(), user_training.data(), gpu="A100", batch=8, epochs=2)
    assert given["steps_from"] == "epochs" and given["steps"] == 2 * math.ceil(40 / 8) == expected.steps
    assert given["total_seconds"] == pytest.approx(expected.total_seconds, rel=1e-9)
    assert given["total_seconds"] == pytest.approx(2 * given["epoch_seconds"], rel=1e-9)

    by_loss = run_prenet("training", *common, "--target-loss", "0.8", "--lr", "0.5", "--subset", "32",
                         "--no-progress")
    assert by_loss.returncode == 0, by_loss.stderr
    predicted = json.loads(by_loss.stdout)
    expected = prenet.predict_training(user_training.build(), user_training.data(), gpu="A100", batch=8, lr=0.5,
                                       target_loss=0.8, subset=32)
    assert predicted["steps_from"] == "predict_steps" and predicted["steps"] == expected.steps
    assert predicted["target_loss"] == 0.8 and predicted["initial_loss"] > 0.8
    assert predicted["total_seconds"] == pytest.approx(expected.total_seconds, rel=1e-9)
    check = expected.steps_prediction.check
    assert predicted["linearisation_check"] == {"holds": check.holds, "pace": check.pace, "gap": check.gap,
                                                "steps": 30, "mode": "train", "said": str(check)}
    in_eval = run_prenet("training", *common, "--target-loss", "0.8", "--lr", "0.5", "--subset", "32",
                         "--check-mode", "eval", "--no-progress")
    assert in_eval.returncode == 0, in_eval.stderr
    said = json.loads(in_eval.stdout)["linearisation_check"]
    assert said["mode"] == "eval" and said["said"].startswith("30 real SGD steps in eval mode on the kernel's")
    unchecked = run_prenet("training", *common, "--target-loss", "0.8", "--lr", "0.5", "--subset", "32",
                           "--check-steps", "0", "--no-progress")
    assert unchecked.returncode == 0 and json.loads(unchecked.stdout)["linearisation_check"] is None
    too_fast = run_prenet("training", *common, "--target-loss", "0.8", "--lr", "50", "--subset", "32",
                          "--no-progress")
    assert too_fast.returncode == 0 and json.loads(too_fast.stdout)["linearisation_check"]["holds"] is False
    assert "prenet: warning: 30 real SGD steps on the kernel's samples" in too_fast.stderr
    assert "the network leaves its linearisation; the steps predicted are not to be trusted" in too_fast.stderr
    sys.modules.pop("user_training")

    capped = run_prenet("training", *common, "--target-loss", "0.01", "--lr", "0.5", "--subset", "32",
                        "--max-steps", "3", "--no-progress")
    assert capped.returncode == 0, capped.stderr
    assert json.loads(capped.stdout)["steps"] is None and json.loads(capped.stdout)["total_seconds"] is None

    text = run_prenet("training", *common[:-1], "--epochs", "1")
    assert text.returncode == 0 and "prenet training time:" in text.stdout and "5 steps (given" in text.stdout

    no_data = run_prenet("training", "user_training.py:build", "--data", "nodata", "--epochs", "1")
    assert no_data.returncode == 2 and "data spec 'nodata' must look like 'package.module:factory'" in no_data.stderr
    both = run_prenet("training", *common, "--epochs", "1", "--target-loss", "0.5")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    described_too = run_prenet("training", *common[:-1], "--epochs", "1", "--dataset-size", "10")
    assert described_too.returncode == 2
    assert "--dataset-size: the data set gives its size and samples; give --data or describe it" in described_too.stderr


def test_the_command_line_gives_the_training_time_of_epochs_of_a_described_data_set(run_prenet):
    import json

    resnet = ["torchvision:resnet18", "--gpu", "T4", "--batch", "128", "--epochs", "90"]
    imagenet = run_prenet("training", *resnet, "--dataset-size", "1281167", "--json")
    assert imagenet.returncode == 0, imagenet.stderr
    given = json.loads(imagenet.stdout)
    import torchvision

    expected = prenet.predict(torchvision.models.resnet18(), batch=128, gpu="T4", input_shape=(3, 224, 224),
                              dataset_size=1281167, optimizer="sgd_plain")
    assert given["dataset_size"] == 1281167 and given["steps"] == 90 * math.ceil(1281167 / 128)
    assert given["total_seconds"] == pytest.approx(90 * expected.epoch_seconds, rel=1e-9)
    assert given["memory_gib"] == pytest.approx(expected.memory.streamed / 2 ** 30) and given["fits"] is True
    assert given["cost"] == pytest.approx(given["total_seconds"] / 3600 * given["price_per_hour"])
    small = run_prenet("training", *resnet, "--dataset-size", "1000", "--input-shape", "3,64,64", "--json")
    assert small.returncode == 0, small.stderr
    assert json.loads(small.stdout)["steps"] == 90 * 8
    assert json.loads(small.stdout)["step_seconds"] < given["step_seconds"] / 4   # 64 px against 224
    undescribed = run_prenet("training", *resnet)
    assert undescribed.returncode == 2
    assert "give --data, or with --epochs describe it: --dataset-size" in undescribed.stderr
    loss = run_prenet("training", "torchvision:resnet18", "--target-loss", "0.5", "--dataset-size", "100")
    assert loss.returncode == 2
    assert "--target-loss: the steps to a loss are predicted from the data itself (predict_steps); give --data" \
        in loss.stderr
