"""prenet.predict_steps: how many SGD steps fine-tuning a model needs to reach a target loss, without training it
(Zancato et al., "Predicting Training Time Without Training").

The model is linearised at its current weights; its tangent kernel is computed on a random subset of n of the N
training samples (prenet.tangent_kernel) and SGD is run on the linearised model in function space
(prenet.loss_dynamics); the predicted curve is the subset's, relative to its own initial loss, times the whole
set's initial loss (a forward pass over at most INITIAL_LOSS_SAMPLES of it).

A subset is fitted in fewer steps than the whole set (each sample is revisited N/n times more often), so the
subset's steps can be carried to N: the same dynamics run on nested subsets (n, n/sqrt2, n/2, ...: blocks of one
kernel) and, for each fraction q of the initial loss, the first step T_m(q) is fitted against the subset size
(EXTRAPOLATIONS: a + b/m, a + b log m, or a power law) and read at m = N. This is off by default: on
bench/validate_steps.py's grid the subset's own steps were closer to real fine-tuning (the linearised model
itself trains slower than the real network, which the subset's speed offsets) and the extrapolations amplified
the noise of the subsets' steps (bench/results/steps_validation.md).
"""
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .linearisation_check import CHECK_MODES, CHECK_STEPS, LinearisationWarning, check_linearisation
from .loss_dynamics import NOISE, FunctionSpaceSGD, find_loss, first_step_below, mse_mean_curve
from .tangent_kernel import TangentKernel, model_outputs, tangent_kernel

# Every step is evaluated up to this many, then every ~1/CHECKPOINT_DENSITY of the step count.
CHECKPOINT_DENSITY = 200
# The whole set's initial loss is measured on at most this many samples.
INITIAL_LOSS_SAMPLES = 50000
# Subset sizes for the extrapolation: n * 2^(-k/2) for k < SUBSET_LEVELS, keeping those of two batches or more.
SUBSET_LEVELS = 5


@dataclass
class StepsPrediction:
    """A predicted training-loss curve for the whole data set (`curve` at `curve_steps`) and the first step
    reaching each target (`steps`: an int, or None when not reached within `max_steps`; a list when several
    targets were given). `subset_curves`: {subset size: (steps, losses)} of the linearised model's SGD; `check`:
    the network's first real steps against the linearised model's (prenet.linearisation_check), None when not
    asked for."""
    loss: str
    lr: float
    batch: int
    momentum: float
    noise: str
    runs: int
    extrapolation: object
    dataset_size: int
    initial_loss: float
    target_loss: object
    steps: object
    max_steps: int
    curve_steps: np.ndarray = field(repr=False)
    curve: np.ndarray = field(repr=False)
    subset_curves: dict = field(repr=False)
    kernel: TangentKernel = field(repr=False)
    subset_indices: np.ndarray = field(repr=False)
    kernel_seconds: float = 0.0
    simulation_seconds: float = 0.0
    check: object = field(default=None, repr=False)

    @property
    def subset_sizes(self):
        return sorted(self.subset_curves)

    @property
    def rises(self):
        """Whether the predicted loss ends above where it starts (SGD at this learning rate diverges)."""
        return bool(self.curve[-1] > self.curve[0])

    def shortfall(self):
        """Where the predicted curve gets to, for a target it does not reach: its lowest loss, and why it stops
        short where the loss rises."""
        said = f"lowest predicted loss {np.min(self.curve):.4g}"
        if self.rises:
            said += f", ending at {self.curve[-1]:.4g}: the learning rate is too large for the linearised model"
        return said

    @property
    def seconds(self):
        """What the prediction cost: the kernel (nothing when one was passed back in), the simulation and the
        check's real steps."""
        return self.kernel_seconds + self.simulation_seconds + (self.check.seconds if self.check else 0.0)

    def steps_to(self, target, extrapolation=None):
        """First step at which the predicted loss reaches `target`; None if not within max_steps. `extrapolation`:
        another of EXTRAPOLATIONS than the prediction's own, for comparison."""
        return _steps_to(self.subset_curves, self.dataset_size, target / self.initial_loss, self.max_steps,
                         extrapolation or self.extrapolation)

    def __repr__(self):
        targets = self.target_loss if isinstance(self.target_loss, list) else [self.target_loss]
        steps = self.steps if isinstance(self.steps, list) else [self.steps]
        said = [f"reaches {target:.4g} after {step} steps" if step is not None else
                f"does not reach {target:.4g} within {self.max_steps} steps ({self.shortfall()})"
                for target, step in zip(targets, steps) if target is not None]
        sizes = self.subset_sizes
        how = (f"extrapolated ({self.extrapolation}) from subsets of {', '.join(map(str, sizes))} to "
               f"{self.dataset_size} samples"
               if len(sizes) > 1 else f"linearised on {sizes[0]} of {self.dataset_size} samples")
        checked = f"; {self.check.summary}" if self.check else ""
        return (f"<prenet steps: {self.loss} {self.initial_loss:.4g} at step 0, " + "; ".join(said or ["no target"])
                + f" (lr {self.lr:g}, batch {self.batch}, momentum {self.momentum:g}, noise {self.noise}; {how}"
                f"{checked}; cost {self.seconds:.2f} s)>")

    def to_frame(self):
        """The predicted curve as a DataFrame (step, loss)."""
        import pandas as pd

        return pd.DataFrame({"step": self.curve_steps, "loss": self.curve})

    def plot(self, ax=None):
        """The predicted loss curve, the subsets' curves it is extrapolated from, and the targets."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4))
        if len(self.subset_curves) > 1:
            for size, (steps, losses) in sorted(self.subset_curves.items()):
                ax.plot(steps, losses / losses[0] * self.initial_loss, lw=0.8, alpha=0.6,
                        label=f"linearised, {size} samples")
        ax.plot(self.curve_steps, self.curve, lw=2, label=f"predicted, {self.dataset_size} samples")
        if self.check is not None and not self.check.diverged:
            ax.plot(self.check.real_steps, self.check.real / self.check.real[0] * self.initial_loss, "o", ms=4,
                    label=f"real SGD on the kernel's samples ({self.check.summary})")
        targets = self.target_loss if isinstance(self.target_loss, list) else [self.target_loss]
        for target in targets:
            if target is not None:
                ax.axhline(target, ls="--", color="grey", lw=0.8)
        ax.set_xlabel("SGD step")
        ax.set_ylabel(f"training loss ({self.loss})")
        ax.set_yscale("log")
        ax.legend()
        return ax


def dataset_arrays(dataset, indices):
    """(inputs tensor, targets array) of the samples at `indices` of a (inputs, targets) pair or a Dataset."""
    import torch

    if isinstance(dataset, (tuple, list)) and len(dataset) == 2:
        inputs, targets = (torch.as_tensor(np.asarray(part)) if not isinstance(part, torch.Tensor) else part
                           for part in dataset)
        if len(inputs) != len(targets):
            raise ValueError(f"inputs ({len(inputs)}) and targets ({len(targets)}) differ in length")
        index = torch.as_tensor(indices)
        return inputs[index], targets[index].cpu().numpy()
    pairs = [dataset[int(i)] for i in indices]
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
        raise TypeError("dataset items must be (input, target) pairs")
    inputs = torch.stack([torch.as_tensor(x) for x, _ in pairs])
    targets = np.stack([np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y) for _, y in pairs])
    return inputs, targets


def dataset_length(dataset):
    if isinstance(dataset, (tuple, list)):
        if len(dataset) != 2:
            raise TypeError("dataset must be an (inputs, targets) pair or a torch Dataset of (input, target) pairs")
        return len(dataset[0])
    if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise TypeError(f"dataset must be an (inputs, targets) pair or a torch Dataset, got {type(dataset).__name__}")
    return len(dataset)


def _check(lr, batch, momentum, noise, runs, subset, max_steps, extrapolate, check_steps, check_mode):
    for name, value, ok, want in (("lr", lr, lambda v: v > 0, "a number > 0"),
                                  ("momentum", momentum, lambda v: 0 <= v < 1, "a number in [0, 1)")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
            raise ValueError(f"{name} must be {want}, got {value!r}")
    for name, value in (("batch", batch), ("runs", runs), ("subset", subset), ("max_steps", max_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(check_steps, bool) or not isinstance(check_steps, int) or check_steps < 0:
        raise ValueError(f"check_steps must be an integer >= 0 (0: no check), got {check_steps!r}")
    if check_mode not in CHECK_MODES:
        raise ValueError(f"unknown check_mode {check_mode!r}; known: {', '.join(CHECK_MODES)}")
    if noise not in NOISE:
        raise ValueError(f"unknown noise treatment {noise!r}; known: {', '.join(NOISE)}")
    if extrapolate is not None and extrapolate not in EXTRAPOLATIONS:
        raise ValueError(f"unknown extrapolation {extrapolate!r}; known: {', '.join(EXTRAPOLATIONS)} or None")


def _checkpoints(max_steps):
    """Steps at which the loss is evaluated: all up to CHECKPOINT_DENSITY, then every 1/CHECKPOINT_DENSITY."""
    steps, t = [], 0
    while t <= max_steps:
        steps.append(t)
        t += max(1, t // CHECKPOINT_DENSITY)
    if steps[-1] != max_steps:
        steps.append(max_steps)
    return np.array(steps)


def _subset_sizes(n, dataset_size, batch, extrapolate):
    if n >= dataset_size or not extrapolate:
        return [n]
    sizes = sorted({int(round(n * 2 ** (-k / 2))) for k in range(SUBSET_LEVELS)})
    sizes = [m for m in sizes if m >= 2 * batch]
    return sizes if len(sizes) >= 2 else [n]


# How the first step T_m reaching a loss grows with the subset size m, as a straight line y(T) = a + b x(m) read
# at m = N: name -> (x(m), y(T), T(y), the sign of b for which more data trains slower).
EXTRAPOLATIONS = {
    "inverse": (lambda m: 1.0 / m, lambda t: t, lambda y: y, -1),           # saturating: T = a + b/m
    "log": (np.log, lambda t: t, lambda y: y, 1),                            # T = a + b log m
    "power": (np.log, np.log, np.exp, 1),                                    # log T = a + b log m
}


def _steps_to(subset_curves, dataset_size, fraction, max_steps, extrapolation):
    """First step at which the whole set's loss falls to `fraction` of its initial value: the subsets' first
    steps T_m extrapolated to m = N as EXTRAPOLATIONS[extrapolation] says (one subset: its own step). None
    beyond max_steps or when a subset never gets there."""
    firsts = []
    for size, (steps, losses) in sorted(subset_curves.items()):
        first = first_step_below(steps, losses / losses[0], fraction)
        if first is None:
            return None
        firsts.append(first)
    if len(firsts) == 1 or min(firsts) == 0:
        step = firsts[-1]
    else:
        x_of, y_of, t_of, sign = EXTRAPOLATIONS[extrapolation]
        slope, intercept = np.polyfit(x_of(np.array(sorted(subset_curves), float)), y_of(np.array(firsts, float)), 1)
        # a fitted trend of more data training faster is noise: keep the largest subset's own step then
        step = (math.ceil(float(t_of(intercept + slope * x_of(float(dataset_size)))) - 1e-9) if sign * slope > 0
                else firsts[-1])
    return step if step <= max_steps else None


def _extrapolated_curve(subset_curves, dataset_size, initial_loss, max_steps, extrapolation, points=200):
    """(steps, losses) of the whole set: fractions q of the initial loss, down to the lowest all subsets reached,
    at their extrapolated first steps (kept non-decreasing)."""
    if len(subset_curves) == 1:
        steps, losses = next(iter(subset_curves.values()))
        return steps, losses / losses[0] * initial_loss
    lowest = max(losses.min() / losses[0] for _, losses in subset_curves.values())
    fractions = np.geomspace(1.0, max(lowest, 1e-12), points)
    pairs = [(_steps_to(subset_curves, dataset_size, q, max_steps, extrapolation), q) for q in fractions]
    pairs = [(s, q) for s, q in pairs if s is not None]
    steps = np.maximum.accumulate(np.array([s for s, _ in pairs]))
    return steps, np.array([q for _, q in pairs]) * initial_loss


def _initial_loss(model, dataset, dataset_size, loss_fn, seed):
    """The loss at the linearisation point over the whole set (or INITIAL_LOSS_SAMPLES of it), from outputs in
    float32: a mean loss to about 1e-7, where float64's convolutions take ten times as long on a CPU (ResNet-18 on
    512 images of 32 px: 6.3-7.6 s against 0.6 s, outputs 7e-7 apart, ad hoc)."""
    import torch

    count = min(dataset_size, INITIAL_LOSS_SAMPLES)
    indices = (np.arange(dataset_size) if count == dataset_size else
               np.random.default_rng(seed + 1).choice(dataset_size, count, replace=False))
    total = 0.0
    for start in range(0, count, 1024):
        inputs, targets = dataset_arrays(dataset, indices[start:start + 1024])
        outputs = model_outputs(model, inputs, torch.float32).astype(np.float64)
        total += float(loss_fn.value(outputs, _as_targets(targets, loss_fn))) * len(targets)
    return total / count


def _as_targets(targets, loss_fn):
    return targets.astype(np.int64 if loss_fn.name == "cross_entropy" else np.float64)


def predict_steps(model, dataset, loss="cross_entropy", target_loss=None, lr=0.01, batch=32, momentum=0.0,
                  subset=256, projection_dim=None, max_steps=10000, noise="sampled", runs=4, extrapolate=None,
                  seed=0, kernel=None, check_steps=CHECK_STEPS, check_mode="train", progress=False):
    """Predicted training-loss curve of fine-tuning `model` with SGD (PyTorch's: learning rate `lr`, `momentum`,
    dampening 0) on `dataset` in batches of `batch`, and the first step reaching `target_loss` (a number or a list).

    dataset: an (inputs, targets) pair of tensors or arrays, or a torch Dataset of (input, target) pairs; targets
    are class indices for "cross_entropy", float tensors shaped like the model's output for "mse" (both losses
    averaged as PyTorch's CrossEntropyLoss and MSELoss do). The model must map a batch to (batch, outputs); it is
    linearised in eval mode (dropout off, normalisation statistics fixed).
    subset: samples the kernel is computed on (all of them when the data set is no larger); extrapolate: how the
    steps are carried from nested subsets to the whole set, one of EXTRAPOLATIONS ("log", "inverse", "power"; see
    the module's description) or None to take the subset's own steps; projection_dim: models with more parameters
    than this have their Jacobian randomly projected to this many dimensions (default 16384).
    noise: "sampled" (`runs` independent shuffled batch sequences, averaged) or "mean" (full-batch drift).
    kernel: the `.kernel` of an earlier prediction on the same model, data, subset and seed, not to recompute it
    (nor the whole set's initial loss, which it keeps).
    check_steps: real SGD steps (on the kernel's samples; the model is given back as it was) whose losses are
    compared with the linearised model's on the same batches (prenet.linearisation_check); where the network leaves
    its linearisation, a LinearisationWarning says so and the steps predicted are not to be trusted. 0: no check.
    check_mode: the mode those steps run in, as the real fine-tuning runs: "train" (model.train(): dropout on, batch
    norms on the batch's statistics), "eval" (model.eval(): batch norms frozen on their running statistics) or
    "model" (each module in the mode the model has it in: a fine-tuning that freezes some of its batch norms).
    """
    import torch

    _check(lr, batch, momentum, noise, runs, subset, max_steps, extrapolate, check_steps, check_mode)
    loss_fn = find_loss(loss)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dataset_size = dataset_length(dataset)
    if dataset_size < 2:
        raise ValueError(f"the dataset has {dataset_size} samples; at least 2 are needed")
    n = min(subset, dataset_size)
    indices = (np.arange(dataset_size) if n == dataset_size else
               np.random.default_rng(seed).choice(dataset_size, n, replace=False))
    inputs, targets = dataset_arrays(dataset, indices)
    fresh = kernel is None
    if fresh:
        kernel = tangent_kernel(model, inputs, projection_dim, seed, progress=progress)
    elif kernel.samples != n or not np.allclose(model_outputs(model, inputs), kernel.f0, rtol=1e-6, atol=1e-9):
        raise ValueError("the kernel given was not computed on this model's current weights and this call's "
                         f"subset ({kernel.samples} samples there, {n} here); pass kernel=None to compute it")
    loss_fn.check(targets, kernel.outputs)
    targets = _as_targets(targets, loss_fn)
    wanted = list(target_loss) if isinstance(target_loss, (list, tuple)) else [target_loss]
    for target in wanted:
        if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float)) or target <= 0):
            raise ValueError(f"target_loss must be a number > 0 (or a list of them), got {target!r}")

    check = (check_linearisation(model, inputs, targets, loss_fn, kernel, lr, momentum, batch, check_steps, seed,
                                 check_mode) if check_steps else None)
    if check is not None and check.holds is False:
        warnings.warn(f"{check}; the steps predicted are not to be trusted", LinearisationWarning, stacklevel=2)
    started = time.perf_counter()
    sizes = _subset_sizes(n, dataset_size, batch, extrapolate)
    if n == dataset_size:
        initial_loss = float(loss_fn.value(kernel.f0, targets))
    else:
        key = (loss_fn.name, dataset_size, seed)
        if key not in kernel.whole_set_losses:
            kernel.whole_set_losses[key] = _initial_loss(model, dataset, dataset_size, loss_fn, seed)
        initial_loss = kernel.whole_set_losses[key]
    lowest = min((t for t in wanted if t is not None), default=None)
    stop_fraction = None if lowest is None else lowest / initial_loss
    checkpoints = _checkpoints(max_steps)
    subset_curves = {m: _subset_curve(kernel, targets, loss_fn, m, checkpoints, stop_fraction, lr, momentum,
                                      batch, noise, runs, seed, progress) for m in sizes}
    curve_steps, curve = _extrapolated_curve(subset_curves, dataset_size, initial_loss, max_steps, extrapolate)
    steps = [None if t is None else _steps_to(subset_curves, dataset_size, t / initial_loss, max_steps, extrapolate)
             for t in wanted]
    several = isinstance(target_loss, (list, tuple))
    return StepsPrediction(loss=loss, lr=lr, batch=batch, momentum=momentum, noise=noise, runs=runs,
                           extrapolation=extrapolate if len(sizes) > 1 else None,
                           dataset_size=dataset_size, initial_loss=initial_loss,
                           target_loss=wanted if several else target_loss, steps=steps if several else steps[0],
                           max_steps=max_steps, curve_steps=curve_steps, curve=curve, subset_curves=subset_curves,
                           kernel=kernel, subset_indices=indices,
                           kernel_seconds=kernel.seconds if fresh else 0.0,
                           simulation_seconds=time.perf_counter() - started, check=check)


def _subset_curve(kernel, targets, loss_fn, size, checkpoints, stop_fraction, lr, momentum, batch, noise, runs, seed,
                  progress):
    """(steps, losses) of the linearised model's SGD on the first `size` samples, evaluated at the checkpoints
    until the loss falls to `stop_fraction` of its start or the last checkpoint."""
    from tqdm.auto import tqdm

    if noise == "mean" and loss_fn.name == "mse":
        losses = mse_mean_curve(*kernel.modes(size), kernel.f0[:size], targets[:size], lr, momentum, checkpoints)
        return checkpoints, losses
    sim = FunctionSpaceSGD(kernel.block(size), kernel.f0[:size], targets[:size], loss_fn, lr, momentum, batch,
                           noise, runs, seed)
    losses = []
    with tqdm(total=int(checkpoints[-1]), desc=f"SGD on {size} samples", unit="step", disable=not progress) as bar:
        for step in checkpoints:
            while sim.steps < step:
                sim.step()
            losses.append(sim.mean_loss())
            bar.update(int(step) - bar.n)
            if stop_fraction is not None and losses[-1] <= stop_fraction * losses[0]:
                break
    return checkpoints[:len(losses)], np.array(losses)
