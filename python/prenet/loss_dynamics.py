"""Loss curves of SGD on a linearised network, computed in function space from its tangent kernel.

For the linearised model f = f0 + J (w - w0), one step of PyTorch's SGD (v <- m v + g, w <- w - lr v; dampening
0) on a batch B moves the outputs on n samples by -lr J v, and J v obeys u <- m u + Theta[:, B] dL_B/df_B with the
tangent kernel Theta = J J^T (prenet.tangent_kernel): exactly, in the n*K-dimensional function space, whatever the
number of weights (Zancato et al., Sec. 3). Two treatments of SGD's noise:
- "sampled": batches drawn as a shuffled data loader draws them (every epoch a new permutation, the last partial
  batch kept), several independent runs averaged: the exact distribution of the linearised model's SGD, where the
  paper approximates it by an SDE;
- "mean": the noise-free drift (full-batch steps); for MSE in closed form, mode by mode (below).
"""
import math

import numpy as np


class CrossEntropy:
    """torch.nn.CrossEntropyLoss (mean over samples) on logits f (..., n, K) and class indices y (n,)."""
    name = "cross_entropy"

    @staticmethod
    def check(targets, outputs):
        if targets.ndim != 1 or not np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"cross_entropy needs integer class indices of shape (n,), got {targets.dtype} "
                             f"{targets.shape}")
        if targets.min() < 0 or targets.max() >= outputs:
            raise ValueError(f"class indices must lie in [0, {outputs}) for a model with {outputs} outputs; found "
                             f"{targets.min()}..{targets.max()}")

    @staticmethod
    def value(f, y):
        # mean_i (logsumexp(f_i) - f_i[y_i])
        top = f.max(axis=-1, keepdims=True)
        logsumexp = top[..., 0] + np.log(np.exp(f - top).sum(axis=-1))
        picked = np.take_along_axis(f, np.broadcast_to(y[..., None], f.shape[:-1] + (1,)), axis=-1)[..., 0]
        return (logsumexp - picked).mean(axis=-1)

    @staticmethod
    def gradient(f, y):
        # d mean_i CE_i / d f_i = (softmax(f_i) - onehot(y_i)) / b
        p = np.exp(f - f.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        np.put_along_axis(p, y[..., None], np.take_along_axis(p, y[..., None], axis=-1) - 1.0, axis=-1)
        return p / f.shape[-2]

    @staticmethod
    def of_tensors(outputs, targets):
        """The same loss of a batch of torch tensors, for autograd."""
        import torch

        return torch.nn.functional.cross_entropy(outputs, targets)


class MeanSquared:
    """torch.nn.MSELoss (mean over every element) on predictions f (..., n, K) and targets y (n, K)."""
    name = "mse"

    @staticmethod
    def check(targets, outputs):
        if targets.ndim != 2 or targets.shape[1] != outputs or not np.issubdtype(targets.dtype, np.floating):
            raise ValueError(f"mse needs float targets of shape (n, {outputs}) matching the model's outputs, got "
                             f"{targets.dtype} {targets.shape}")

    @staticmethod
    def value(f, y):
        return ((f - y) ** 2).mean(axis=(-2, -1))

    @staticmethod
    def gradient(f, y):
        # d mean((f - y)^2) / d f = 2 (f - y) / (b K)
        return 2.0 * (f - y) / (f.shape[-2] * f.shape[-1])

    @staticmethod
    def of_tensors(outputs, targets):
        """The same loss of a batch of torch tensors, for autograd."""
        import torch

        return torch.nn.functional.mse_loss(outputs, targets.to(outputs.dtype))


LOSSES = {loss.name: loss for loss in (CrossEntropy, MeanSquared)}
NOISE = ("sampled", "mean")


def find_loss(name):
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; known: {', '.join(LOSSES)}")
    return LOSSES[name]


def batch_order(n, batch, seed):
    """Index arrays of the batches a shuffled loader yields over n samples, forever: each epoch a fresh
    permutation from numpy's generator seeded with `seed`, cut into batches, the last partial one kept."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n)
        for start in range(0, n, batch):
            yield order[start:start + batch]


class FunctionSpaceSGD:
    """SGD (learning rate `lr`, `momentum`, batch `batch`) on the linearised model over n samples, in function
    space: outputs f (n x K) and the momentum's output change u; a step on batch B is u <- m u + Theta[:, B] g_B,
    f <- f - lr u, with g_B = dL_B/df_B. `runs` independent batch sequences (seeds seed, seed+1, ...) at once, or
    the full-batch drift when noise == "mean"."""

    def __init__(self, gram, f0, targets, loss, lr, momentum, batch, noise="sampled", runs=1, seed=0):
        self.n, self.outputs = f0.shape
        self.gram = np.ascontiguousarray(gram)           # (n*K, n*K), sample-major rows
        self.sample_rows = self.gram.reshape(self.n, self.outputs, -1)  # sample i's K rows: one contiguous block
        self.y, self.loss = targets, loss
        self.lr, self.momentum = lr, momentum
        runs = 1 if noise == "mean" else runs
        self.f = np.repeat(f0[None], runs, axis=0)
        self.change = np.zeros_like(self.f)
        full = np.arange(self.n)
        self.orders = [batch_order(self.n, batch, seed + run) if noise == "sampled" else iter(lambda: full, None)
                       for run in range(runs)]
        self.steps = 0

    def mean_loss(self):
        """The loss on all n samples, averaged over the runs."""
        return float(self.loss.value(self.f, self.y).mean())

    def step(self):
        """One SGD step of every run."""
        for run, order in enumerate(self.orders):
            samples = next(order)
            gradient = self.loss.gradient(self.f[run, samples], self.y[samples])
            # Theta[:, B] g_B as rows (Theta is symmetric), a sample's block at a time: no copy of the batch's
            # rows (a gather of b*K rows costs several times the products)
            if len(samples) == self.n:  # the full batch (noise "mean", or a batch of all samples): one product
                every = np.empty_like(gradient)
                every[samples] = gradient
                pushed = every.reshape(-1) @ self.gram
            else:
                pushed = np.zeros(self.n * self.outputs)
                for sample, g in zip(samples, gradient):
                    pushed += g @ self.sample_rows[sample]
            self.change[run] = self.momentum * self.change[run] + pushed.reshape(self.n, self.outputs)
        self.f -= self.lr * self.change
        self.steps += 1


def mse_mean_curve(eigenvalues, eigenvectors, f0, targets, lr, momentum, steps):
    """MSE of the noise-free (full-batch) linearised dynamics after each number of steps in `steps`, in closed
    form.

    Each eigenmode (eigenvalue lam) of the residual r = f - y evolves alone: with a = 2 lr lam / (n K) (MSE's
    gradient 2 r / (n K)) and q the mode's step, q' = m q + a rho, rho' = rho - q', i.e. the 2x2 recurrence
    A = [[1 - a, -m], [a, m]] with eigenvalues mu = (1 - a + m +- sqrt((1 - a + m)^2 - 4 m)) / 2, so
    rho_t = alpha mu1^t + beta mu2^t with rho_1 = (1 - a) rho_0 (Polyak's heavy ball, linear case)."""
    n, outputs = f0.shape
    residual = (f0 - targets).reshape(-1)
    rho0 = eigenvectors.T @ residual
    outside = residual @ residual - rho0 @ rho0   # the part of the residual no mode can move
    a = 2.0 * lr * eigenvalues / (n * outputs)
    trace = 1.0 - a + momentum
    root = np.sqrt((trace ** 2 - 4.0 * momentum).astype(complex))
    mu1, mu2 = (trace + root) / 2, (trace - root) / 2
    t = np.asarray(steps)[:, None]
    distinct = np.abs(mu1 - mu2) > 1e-7 * np.maximum(1.0, np.abs(mu1))
    safe = np.where(distinct, mu1 - mu2, 1.0)
    alpha = rho0 * ((1.0 - a) - mu2) / safe
    two_modes = alpha * mu1 ** t + (rho0 - alpha) * mu2 ** t
    # equal eigenvalues mu: rho_t = rho0 mu^t + t mu^(t-1) ((1 - a) - mu) rho0
    repeated = rho0 * mu1 ** t + t * np.where(t > 0, mu1 ** np.maximum(t - 1, 0), 0) * ((1.0 - a) - mu1) * rho0
    rho = np.where(distinct, two_modes, repeated).real
    return ((rho ** 2).sum(axis=1) + max(outside, 0.0)) / (n * outputs)


def first_step_below(curve_steps, curve, target):
    """First step at which a curve sampled at `curve_steps` reaches `target`, interpolating linearly between
    samples (rounded up to a whole step); None when it never does."""
    below = np.nonzero(curve <= target)[0]
    if not len(below):
        return None
    i = below[0]
    if i == 0:
        return int(curve_steps[0])
    s0, s1, l0, l1 = curve_steps[i - 1], curve_steps[i], curve[i - 1], curve[i]
    return int(math.ceil(s0 + (s1 - s0) * (l0 - target) / (l0 - l1)))
