"""Whether a network fine-tunes as its linearisation does: a few real SGD steps on predict_steps' subset against the
linearised model's SGD on the same batches.

predict_steps takes the steps of the linearised model (Zancato et al.) for the network's; a network that leaves its
linearisation (on bench/validate_steps.py's digits, a ReLU CNN with batch norms: 88-93% median error of steps) shows
nothing of it in the prediction. The check trains the model for a few steps on the kernel's samples, in training
mode, with the learning rate, momentum and batches of the simulation's first run, then gives the model back its
weights, buffers, gradients and random generators as they were. The real loss curve is matched to the linearised one
by a change of pace, real(t) ~ linearised(t / pace) in log loss relative to the start, least squares over the
evaluated steps: pace 3 means three real steps for each step of the linearised model, so that predict_steps' steps
are about three times too few. The check fails where the pace lies outside [1 / PACE_LIMIT, PACE_LIMIT], where the
curves differ in shape at the best pace (root-mean-square gap of log losses above GAP_LIMIT) or where the real loss
stops being finite. Both limits were set on a first experiment over bench/validate_steps.py's networks; how the
verdict separates good predictions from bad in each of its reports: docs/steps_to_target_loss.md, "Knowing when it
fails".
"""
import copy
import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .loss_dynamics import FunctionSpaceSGD, batch_order

# Real steps a prediction checks by default (predict_steps' check_steps).
CHECK_STEPS = 30


class CheckMode(NamedTuple):
    """A mode the check's real steps may run in: `training`, in_mode's argument; `said`, how the verdict names it."""
    training: object
    said: str


# The modes of predict_steps' check_mode. "train": model.train() (dropout on, batch norms on the batch's statistics);
# "eval": model.eval() (batch norms frozen on their running statistics, the linearisation's own mode); "model": each
# module as the model has it (a fine-tuning that freezes some layers).
CHECK_MODES = {"train": CheckMode(True, ""), "eval": CheckMode(False, " in eval mode"),
               "model": CheckMode(None, " in the model's own modes")}
# The check's verdict by LinearisationCheck.holds.
VERDICTS = {True: "holds", False: "fails", None: "not judged"}
# The real loss is evaluated on the subset at this many steps of the check (and at step 0).
EVALUATIONS = 10
# The check fails beyond this factor of pace either way ...
PACE_LIMIT = 2.0
# ... or where real and linearised losses differ, at the best pace, by more than this root-mean-square of log ratios
# (about 1.5 times apart).
GAP_LIMIT = 0.4
# Paces searched: from 1 / PACE_SEARCH to PACE_SEARCH (the linearised model is run PACE_SEARCH times the check's steps),
# PACE_POINTS of them evenly in log (1.75% apart).
PACE_SEARCH = 8.0
PACE_POINTS = 241
# A check whose real and linearised losses both move less than this fraction of their start does not judge the pace.
LEAST_MOVEMENT = 0.02


class LinearisationWarning(UserWarning):
    """The network's first real SGD steps do not follow its linearised model: predict_steps' steps are unreliable."""


@dataclass
class LinearisationCheck:
    """Real SGD on the subset (losses `real` after `real_steps` steps) against the linearised model's SGD on the
    same batches (`linearised` after 0, 1, 2, ... steps); `pace` is real steps per linearised step (None when
    neither curve moved enough to tell, a bound when it lies beyond the search), `gap` the root-mean-square log
    difference left at that pace (None where the real loss stopped being finite); `mode` the real steps' (of
    CHECK_MODES)."""
    steps: int
    real_steps: np.ndarray = field(repr=False)
    real: np.ndarray = field(repr=False)
    linearised: np.ndarray = field(repr=False)
    pace: object
    gap: object
    seconds: float
    mode: str = "train"

    @property
    def diverged(self):
        return not bool(np.isfinite(self.real).all())

    @property
    def holds(self):
        """True or False, or None when the losses moved too little in the check's steps to judge."""
        if self.diverged:
            return False
        if self.pace is None:
            return None
        return bool(1.0 / PACE_LIMIT <= self.pace <= PACE_LIMIT and self.gap <= GAP_LIMIT)

    @property
    def _bound(self):
        """'at least ' or 'at most ' where the pace is an end of the range searched, not a fit within it."""
        return "at least " if self.pace >= PACE_SEARCH else "at most " if self.pace <= 1 / PACE_SEARCH else ""

    @property
    def verdict(self):
        """'holds', 'fails' or 'not judged' (VERDICTS)."""
        return VERDICTS[self.holds]

    @property
    def summary(self):
        """The verdict in a few words, for a prediction's repr."""
        pace = "" if self.pace is None else f", pace {self._bound}{self.pace:.2g}"
        return f"linearisation {self.verdict} over {self.steps} real steps{CHECK_MODES[self.mode].said}{pace}"

    def __str__(self):
        head = f"{self.steps} real SGD steps{CHECK_MODES[self.mode].said} on the kernel's samples"
        if self.diverged:
            return f"{head}: the network's loss stops being finite"
        if self.pace is None:
            return (f"{head}: the loss moved under {LEAST_MOVEMENT:.0%}, too little to judge; give check_steps "
                    "more steps")
        pace = f"the network needs {self._bound}{self.pace:.2g} real steps per step of the linearised model"
        shape = (f"; their losses still {math.exp(self.gap):.2g} times apart at that pace" if self.gap > GAP_LIMIT
                 else "")
        verdict = "the linearisation holds" if self.holds else "the network leaves its linearisation"
        return f"{head}: {pace}{shape}: {verdict}"


def check_linearisation(model, inputs, targets, loss_fn, kernel, lr, momentum, batch, steps=CHECK_STEPS, seed=0,
                        mode="train"):
    """Runs `steps` real SGD steps (PyTorch's SGD, `lr`, `momentum`, batches of `batch` drawn by
    loss_dynamics.batch_order with `seed`, the model in `mode` of CHECK_MODES) on `inputs` and `targets` (the
    kernel's samples, targets as predict_steps holds them) and compares the loss on them with the linearised
    model's (`kernel`); the model is left as it was."""
    started = time.perf_counter()
    evaluated = np.unique(np.linspace(0, steps, EVALUATIONS + 1).round().astype(int))
    real = _real_losses(model, inputs, targets, loss_fn, lr, momentum, batch, evaluated, seed,
                         CHECK_MODES[mode].training)
    simulation = FunctionSpaceSGD(kernel.block(kernel.samples), kernel.f0, targets, loss_fn, lr, momentum, batch,
                                  "sampled", runs=1, seed=seed)
    linearised = [simulation.mean_loss()]
    for _ in range(int(math.ceil(PACE_SEARCH * steps))):
        simulation.step()
        linearised.append(simulation.mean_loss())
    linearised = np.array(linearised)
    pace, gap = _pace(evaluated, real, linearised) if np.isfinite(real).all() else (None, None)
    return LinearisationCheck(steps=steps, real_steps=evaluated, real=real, linearised=linearised, pace=pace, gap=gap,
                              seconds=time.perf_counter() - started, mode=mode)


def _real_losses(model, inputs, targets, loss_fn, lr, momentum, batch, evaluated, seed, training):
    """The loss on all of `inputs` (eval mode, as the kernel's outputs) after each step in `evaluated` of real SGD
    in training mode (`training` True), eval mode (False) or each module's own (None); the model's state, gradients
    and the random generators are restored afterwards."""
    import torch

    from .model_state import in_mode
    from .tangent_kernel import model_outputs

    state = copy.deepcopy(model.state_dict())
    trainable = [p for p in model.parameters() if p.requires_grad]
    gradients = [None if p.grad is None else p.grad.clone() for p in trainable]
    labels = torch.as_tensor(targets)
    optimizer = torch.optim.SGD(trainable, lr=lr, momentum=momentum)
    order = batch_order(len(inputs), batch, seed)
    losses = []
    try:
        with torch.random.fork_rng(devices=[]), in_mode(model, training):
            for step in range(int(evaluated[-1]) + 1):
                if step in evaluated:
                    outputs = model_outputs(model, inputs, torch.float32).astype(np.float64)
                    losses.append(float(loss_fn.value(outputs, targets)))
                    if not np.isfinite(losses[-1]):
                        losses += [math.nan] * (len(evaluated) - len(losses))
                        break
                if step == evaluated[-1]:
                    break
                rows = torch.as_tensor(next(order))
                optimizer.zero_grad()
                loss_fn.of_tensors(model(inputs[rows]), labels[rows]).backward()
                optimizer.step()
    finally:
        model.load_state_dict(state)
        for parameter, gradient in zip(trainable, gradients):
            parameter.grad = gradient
    return np.array(losses)


def _pace(evaluated, real, linearised):
    """(pace, gap): the factor s for which the linearised curve read at t / s best matches the real one at the
    evaluated steps t > 0, in log loss relative to each curve's start, and the root-mean-square gap left; pace None
    where neither curve moves by LEAST_MOVEMENT."""
    real_log = np.log(np.maximum(real[1:] / real[0], 1e-300))   # a loss fitted to 0 stays finite in log
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        linear_log = np.log(np.nan_to_num(linearised / linearised[0], nan=np.inf, posinf=1e300))
    moved = max(np.abs(real_log).max(), np.abs(linear_log[:int(evaluated[-1]) + 1]).max())
    if moved < -math.log(1 - LEAST_MOVEMENT):
        return None, float(np.sqrt(np.mean((real_log - linear_log[evaluated[1:]]) ** 2)))
    paces = np.geomspace(1 / PACE_SEARCH, PACE_SEARCH, PACE_POINTS)
    read = np.arange(len(linear_log))
    gaps = [np.sqrt(np.mean((np.interp(evaluated[1:] / pace, read, linear_log) - real_log) ** 2)) for pace in paces]
    best = int(np.argmin(gaps))
    return float(paces[best]), float(gaps[best])
