"""prenet.linearisation_check: real SGD steps against the linearised model's, the pace between them, the verdict,
predict_steps' warning, and the model left as it was."""
import math
import warnings

import numpy as np
import pytest
import torch

import prenet
from prenet.linearisation_check import GAP_LIMIT, PACE_SEARCH, LinearisationCheck, _pace

SAMPLES, INPUTS, OUTPUTS = 40, 6, 3


def data(loss="mse", seed=1):
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(SAMPLES, INPUTS, generator=generator)
    if loss == "cross_entropy":
        return inputs, torch.randint(0, OUTPUTS, (SAMPLES,), generator=generator)
    return inputs, torch.randn(SAMPLES, OUTPUTS, generator=generator)


class Product(torch.nn.Module):
    """Outputs a * b * (W x): linear in neither scale; at a large learning rate the product of the steps of a and b,
    which the linearisation leaves out, holds the real loss up (it falls 1.4% in 30 steps, the linearised 10%)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(INPUTS, OUTPUTS)
        self.a, self.b = torch.nn.Parameter(torch.tensor(0.3)), torch.nn.Parameter(torch.tensor(0.3))

    def forward(self, x):
        return self.a * self.b * self.linear(x)


def linear_model():
    torch.manual_seed(0)
    return torch.nn.Linear(INPUTS, OUTPUTS)


def predict(model, lr, loss="mse", **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prediction = prenet.predict_steps(model, data(loss), loss=loss, lr=lr, batch=8, target_loss=0.5,
                                          max_steps=500, runs=1, **options)
    return prediction, [w for w in caught if issubclass(w.category, prenet.LinearisationWarning)]


def test_a_linear_model_is_its_own_linearisation():
    prediction, warned = predict(linear_model(), lr=0.05)
    check = prediction.check
    # real SGD and the function-space simulation of the same batches agree to float32's rounding
    assert np.allclose(check.real, check.linearised[check.real_steps], rtol=1e-4)
    assert check.pace == pytest.approx(1.0, rel=0.02) and check.gap < 1e-3
    assert check.holds is True and not warned
    assert "linearisation holds over 30 real steps, pace 1" in repr(prediction)
    assert prediction.seconds >= check.seconds > 0


def test_the_pace_is_the_change_of_time_between_the_curves():
    steps = np.arange(0, 31, 3)
    linearised = np.exp(-0.1 * np.arange(0, 241))
    real = np.exp(-0.1 * steps / 3.0)            # three real steps for each linearised one
    pace, gap = _pace(steps, real, linearised)
    assert pace == pytest.approx(3.0, rel=0.02) and gap < 0.02
    pace, _ = _pace(steps, np.exp(-0.1 * steps / 20.0), linearised)
    assert pace == PACE_SEARCH                   # beyond the search: its end, said to be a bound
    check = LinearisationCheck(steps=30, real_steps=steps, real=real, linearised=linearised, pace=pace, gap=0.0,
                               seconds=0.0)
    assert check.holds is False and "needs at least 8 real steps per step of the linearised model" in str(check)
    # the same pace but a curve of another shape fails on its gap
    bent = np.exp(-0.1 * steps / 3.0) * np.where(steps > 15, math.exp(3 * GAP_LIMIT), 1.0)
    assert _pace(steps, bent, linearised)[1] > GAP_LIMIT


def test_a_network_leaving_its_linearisation_is_warned_of_and_left_as_it_was():
    model = Product()
    model.a.grad = torch.full_like(model.a, 7.0)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    torch.manual_seed(5)
    expected_draw = torch.rand(3)
    torch.manual_seed(5)
    prediction, warned = predict(model, lr=2.0)
    assert prediction.check.holds is False and prediction.check.pace == PACE_SEARCH   # the real network lags
    assert len(warned) == 1 and "the network leaves its linearisation" in str(warned[0].message)
    assert "not to be trusted" in str(warned[0].message)
    assert "linearisation fails over 30 real steps, pace at least 8" in repr(prediction)
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert model.a.grad.item() == 7.0 and model.b.grad is None
    assert torch.equal(torch.rand(3), expected_draw)   # the check's batches drew nothing from torch's generator


def test_a_batch_norms_running_statistics_are_given_back():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(INPUTS, 8), torch.nn.BatchNorm1d(8), torch.nn.Tanh(),
                                torch.nn.Linear(8, OUTPUTS))
    model.eval()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    prediction, _ = predict(model, lr=0.1, loss="cross_entropy")
    assert prediction.check.holds is not None
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert not any(module.training for module in model.modules())   # trained in training mode, given back in eval


def test_a_real_loss_that_overflows_fails_the_check():
    prediction, warned = predict(linear_model(), lr=1e7)
    assert prediction.check.diverged and prediction.check.holds is False and prediction.check.gap is None
    assert "the network's loss stops being finite" in str(warned[0].message)


def test_too_little_movement_is_not_judged_and_no_check_is_run_when_asked():
    prediction, warned = predict(linear_model(), lr=1e-6)
    assert prediction.check.pace is None and prediction.check.holds is None and not warned
    assert "linearisation not judged over 30 real steps" in repr(prediction)
    unchecked, _ = predict(linear_model(), lr=0.05, check_steps=0)
    assert unchecked.check is None and "linearisation" not in repr(unchecked)
    longer, _ = predict(linear_model(), lr=0.05, check_steps=12)
    assert longer.check.steps == 12 and longer.check.real_steps[-1] == 12


@pytest.mark.parametrize("steps", [-1, 2.5, True])
def test_bad_check_steps_are_named(steps):
    with pytest.raises(ValueError, match="check_steps must be an integer >= 0"):
        prenet.predict_steps(linear_model(), data(), loss="mse", check_steps=steps)


class ModeSpy(torch.nn.Module):
    """An identity that records the mode of each call made with gradients (a real step's, not a loss reading's)."""

    def __init__(self):
        super().__init__()
        self.modes = []

    def forward(self, x):
        if torch.is_grad_enabled():
            self.modes.append(self.training)
        return x


def frozen_norm_model():
    """Linear, batch norm, tanh, linear; the batch norm's running statistics those of other data than the
    fine-tuning's (means 1 off, variances 4 times), as a network pre-trained elsewhere has them."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(INPUTS, 8), torch.nn.BatchNorm1d(8), ModeSpy(), torch.nn.Tanh(),
                                torch.nn.Linear(8, OUTPUTS))
    with torch.no_grad():
        hidden = model[0](data()[0])
        model[1].running_mean.copy_(hidden.mean(0) + 1)
        model[1].running_var.copy_(hidden.var(0) * 4)
    return model


@pytest.mark.parametrize("mode, expected", [("train", True), ("eval", False), ("model", False)])
def test_the_checks_steps_run_in_the_mode_asked(mode, expected):
    """"model" keeps each module's own mode: here the batch norm and the spy frozen in a model being trained."""
    model = frozen_norm_model().train()
    model[1].eval(), model[2].eval()
    kernel = predict(model, lr=0.1, loss="cross_entropy", check_steps=0)[0].kernel
    model[2].modes.clear()                                                  # the kernel's own calls
    prediction, _ = predict(model, lr=0.1, loss="cross_entropy", check_mode=mode, kernel=kernel)
    assert model[2].modes == [expected] * 30 and prediction.check.mode == mode
    assert [module.training for module in model] == [True, False, False, True, True]   # modes given back
    assert ("in eval mode" in repr(prediction)) == (mode == "eval")


def test_a_frozen_batch_norm_fine_tuned_in_eval_mode_follows_its_linearisation():
    """The linearisation is taken in eval mode, so steps in eval mode train its own network: the check holds with
    a pace near 1; in training mode the batch's statistics, not the running ones, normalise and the running ones
    move towards them, and the check fails."""
    eval_mode, warned = predict(frozen_norm_model(), lr=0.05, loss="cross_entropy", check_mode="eval")
    assert eval_mode.check.holds is True and not warned
    assert eval_mode.check.pace == pytest.approx(1.0, rel=0.15) and eval_mode.check.gap < 0.05
    train_mode, warned = predict(frozen_norm_model(), lr=0.05, loss="cross_entropy", check_mode="train")
    assert train_mode.check.holds is False and warned


def test_an_unknown_check_mode_is_named():
    with pytest.raises(ValueError, match="unknown check_mode 'frozen'; known: train, eval, model"):
        prenet.predict_steps(linear_model(), data(), loss="mse", check_mode="frozen")
