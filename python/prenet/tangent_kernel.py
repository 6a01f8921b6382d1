"""The empirical neural tangent kernel of a model at its current weights, on a sample of its training data.

Linearised around its weights w0, a network is f(x; w) = f(x; w0) + J(x) (w - w0) (Zancato et al., Sec. 3), and
all of its training dynamics on a set of n inputs live in the Gram matrix Theta = J J^T of the per-sample,
per-output Jacobian rows (n*K x n*K for K outputs). This module computes Theta with functorch (vmap over samples of
jacrev), in chunks of samples so that memory stays bounded, and, when the model has more parameters than
`projection_dim`, on a CountSketch random projection of the Jacobian rows (an unbiased estimate of every inner
product, Weinberger et al. 2009 / Charikar et al. 2002), which never holds a full P-wide Jacobian. Linear
layers', convolutions' and norms' rows come from their inputs and output sensitivities instead
(prenet.layer_sensitivities: exact; a linear layer's share is factored, prenet.linear_layer_kernel, at a cost set
by its width; a convolution's share is factored too where it has few output positions for its weights,
prenet.conv_layer_kernel, and otherwise its rows are its per-sample weight gradients, prenet.conv_layer_gradients;
a batch or layer norm's rows are sums of its sensitivities, prenet.norm_layer_gradients), so only the other
parameters need a Jacobian.

Nested subsets (the first m of the sample) are blocks of the same kernel, used to extrapolate to the full data set;
eigen-decompositions (for the closed-form MSE curve) are computed on demand.
"""
import time
from dataclasses import dataclass, field

import numpy as np

from .model_state import in_mode

# Model-parameter counts above this are randomly projected to this many dimensions unless told otherwise.
DEFAULT_PROJECTION_DIM = 16384
# Memory for one chunk of Jacobian rows (samples x outputs x parameters, float64).
CHUNK_BYTES = 256 * 2 ** 20
# Rows sketched at once: the sparse product is 2-3x faster on a hundred rows than on thousands (CPU, torch 1.13).
SKETCH_ROWS = 128
# Bytes of convolution gradient rows made at once (one sample's at least): blocks under glibc's 32 MB mmap
# threshold are reused, not faulted in afresh for every block (measured on the CPU, torch 1.13).
CONV_BLOCK_BYTES = 16 * 2 ** 20


def _functional():
    """(functional_call, vmap, jacrev) from torch.func (torch 2.x) or functorch (torch 1.13)."""
    try:
        from torch.func import functional_call, jacrev, vmap
    except ImportError:
        from functorch import jacrev, vmap
        from torch.nn.utils.stateless import functional_call
    return functional_call, vmap, jacrev


def model_outputs(model, inputs, dtype=None):
    """The model's outputs (n, K) on `inputs` in eval mode, computed in `dtype` (float64 by default)."""
    import torch

    functional_call, _, _ = _functional()
    dtype = dtype or torch.float64
    trainable, frozen = _state(model, dtype)
    x = inputs.to(dtype) if torch.is_floating_point(inputs) else inputs
    with in_mode(model, False), torch.no_grad():
        out = functional_call(model, with_tied_names({**trainable, **frozen}, tied_names(model)), (x,))
    return _as_2d(out).numpy()


def tied_names(model):
    """{name: the name named_parameters (or named_buffers) gives it} of every parameter and buffer the model also
    reaches under another name: a weight tied between an embedding and an output layer, a module registered twice."""
    first, tied = {}, {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        for key, tensor in [*module._parameters.items(), *module._buffers.items()]:
            name = f"{prefix}.{key}" if prefix else key
            if tensor is not None and first.setdefault(id(tensor), name) != name:
                tied[name] = first[id(tensor)]
    return tied


def with_tied_names(state, tied):
    """`state` (name: tensor, as functional_call takes it) with each of the `tied` names (tied_names) bound to the
    tensor of the name it is tied to, so that every use of a tied weight sees the tensor given (functional_call of
    torch 1.13 replaces a tensor under the names given only; torch 2's ties them itself, and takes one tensor under
    several names)."""
    return {**state, **{name: state[first] for name, first in tied.items() if first in state}}


def _state(model, dtype):
    """(trainable parameters, everything else: frozen parameters and buffers), detached, floats in `dtype`."""
    trainable = {k: v.detach().to(dtype) for k, v in model.named_parameters() if v.requires_grad}
    frozen = {k: (v.detach().to(dtype) if v.is_floating_point() else v.detach())
              for k, v in list(model.named_parameters()) + list(model.named_buffers()) if k not in trainable}
    return trainable, frozen


def _as_2d(out):
    if not hasattr(out, "dim"):
        raise TypeError(f"the model returned {type(out).__name__}; predict_steps needs a tensor of outputs")
    if out.dim() != 2:
        raise ValueError(f"the model's output has shape {tuple(out.shape)}; predict_steps needs (batch, outputs) "
                         "(logits for cross_entropy, predictions for mse)")
    return out


@dataclass
class TangentKernel:
    """Theta (`gram`, n*K x n*K, sample-major: row i*K + k is output k of sample i) on n samples with the outputs
    `f0` (n x K) at the linearisation point. `projected_dim` is None when Theta is exact."""
    f0: np.ndarray
    gram: np.ndarray = field(repr=False)
    parameters: int
    projected_dim: object
    seconds: float
    _modes: dict = field(default_factory=dict, repr=False)
    # The loss at the linearisation point over the whole data set, by (loss, data set size, seed): a forward pass
    # over all of it, which every prediction reusing this kernel would otherwise repeat.
    whole_set_losses: dict = field(default_factory=dict, repr=False)

    @property
    def samples(self):
        return self.f0.shape[0]

    @property
    def outputs(self):
        return self.f0.shape[1]

    def modes(self, samples=None):
        """(eigenvalues descending, eigenvectors) of the kernel of the first `samples` samples (all when None),
        modes at rounding level (below 1e-13 of the largest) dropped since they cannot move the outputs."""
        samples = self.samples if samples is None else samples
        if samples not in self._modes:
            eigenvalues, eigenvectors = np.linalg.eigh(self.block(samples))
            eigenvalues, eigenvectors = eigenvalues[::-1], eigenvectors[:, ::-1]
            keep = eigenvalues > 1e-13 * max(eigenvalues[0], 0.0)
            self._modes[samples] = eigenvalues[keep], eigenvectors[:, keep]
        return self._modes[samples]

    def block(self, samples):
        """Theta of the first `samples` samples (a view)."""
        rows = samples * self.outputs
        return self.gram[:rows, :rows]


def jacobian_chunks(model, inputs, dtype=None, progress=False, parameters=None):
    """Yields the Jacobian of the model's outputs with respect to its trainable parameters (those named in
    `parameters` only, when given), a chunk of samples at a time (at most CHUNK_BYTES each), as (samples, outputs,
    parameters) tensors in `dtype` (float64 by default), parameters in model.named_parameters() order."""
    import torch
    from tqdm.auto import tqdm

    functional_call, vmap, jacrev = _functional()
    dtype = dtype or torch.float64
    params, frozen = _state(model, dtype)
    if parameters is not None:
        frozen.update({k: v for k, v in params.items() if k not in parameters})
        params = {k: v for k, v in params.items() if k in parameters}
    if not params:
        raise ValueError("the model has no trainable parameters to linearise")
    n_params = sum(v.numel() for v in params.values())
    x_all = inputs.to(dtype) if torch.is_floating_point(inputs) else inputs

    tied = tied_names(model)

    def single(p, x):
        return functional_call(model, with_tied_names({**p, **frozen}, tied), (x.unsqueeze(0),)).squeeze(0)

    with torch.no_grad():
        outputs = _as_2d(functional_call(model, with_tied_names({**params, **frozen}, tied), (x_all[:1],))).shape[1]
    chunk = max(1, CHUNK_BYTES // (8 * outputs * n_params))
    jacobian = vmap(jacrev(single), in_dims=(None, 0))
    for start in tqdm(range(0, len(x_all), chunk), desc="Jacobian", unit="chunk", disable=not progress):
        block = jacobian(params, x_all[start:start + chunk])
        yield torch.cat([block[k].reshape(block[k].shape[0], outputs, -1) for k in params], dim=2)


class CountSketch:
    """CountSketch (Charikar et al. 2002) of `parameters` columns into `columns`: parameter p adds sign[p] * J[:, p]
    to column bucket[p], keeping inner products in expectation."""

    def __init__(self, parameters, columns, seed=0, dtype=None):
        import torch

        generator = torch.Generator().manual_seed(seed)
        self.columns = columns
        self.bucket = torch.randint(0, columns, (parameters,), generator=generator)
        self.sign = torch.randint(0, 2, (parameters,), generator=generator).to(dtype or torch.float64) * 2 - 1
        self._last = (None, None)  # the last matrix made: rows are projected a block at a time over one range

    def matrix(self, first=0, count=None):
        """The sketch of parameters first .. first + count - 1 as a sparse (columns x count) matrix."""
        import torch

        count = len(self.bucket) - first if count is None else count
        if self._last[0] != (first, count):
            index = torch.stack([self.bucket[first:first + count], torch.arange(count)])
            self._last = ((first, count),
                          torch.sparse_coo_tensor(index, self.sign[first:first + count], (self.columns, count)))
        return self._last[1]

    def project(self, rows, first=0):
        """Rows (r x count) of Jacobian columns for parameters first .. first + count - 1, sketched (r x columns)."""
        import torch

        # contiguous, so that stacking chunks of rows is a plain copy
        return torch.sparse.mm(self.matrix(first, rows.shape[1]), rows.T).T.contiguous()

    def add_entries(self, target, rows, columns, values):
        """Adds the entries (rows, parameter columns, values) of Jacobian rows, sketched, into `target`'s rows."""
        target.index_put_((rows, self.bucket[columns]), self.sign[columns] * values, accumulate=True)


class _ExplicitRows:
    """The Jacobian rows of the parameters not factored exactly, side by side (`columns` wide) or summed into
    `sketch`'s buckets, in `dtype`; `matrix` (Jacobian rows x columns or the sketch's width)."""

    def __init__(self, rows, columns, sketch, dtype):
        import torch

        self.sketch, self.dtype = sketch, dtype
        self.matrix = torch.zeros(rows, sketch.columns if sketch else columns, dtype=dtype)

    def place(self, first_row, block, first_column):
        """Rows of Jacobian columns first_column .. on, from row first_row on."""
        if self.sketch is None:
            self.matrix[first_row:first_row + block.shape[0], first_column:first_column + block.shape[1]] = block
            return
        for start in range(0, block.shape[0], SKETCH_ROWS):
            piece = block[start:start + SKETCH_ROWS].to(self.dtype)
            self.matrix[first_row + start:first_row + start + len(piece)] += self.sketch.project(piece, first_column)

    def add_entries(self, first_row, rows, columns, values, first_column):
        """Entries (rows, columns, values; a repeated pair adds up) of rows of Jacobian columns first_column .. on,
        from row first_row on."""
        rows, columns, values = rows + first_row, columns + first_column, values.to(self.dtype)
        if self.sketch is None:
            self.matrix.index_put_((rows, columns), values, accumulate=True)
        else:
            self.sketch.add_entries(self.matrix, rows, columns, values)


def gram_matrix(model, inputs, projection_dim=None, seed=0, dtype=None, progress=False, factor_layers=True):
    """(Theta, f0, parameters, projected_dim) for `inputs` (n samples): Theta is the (n*K x n*K) Gram matrix of
    the Jacobian rows of the model's outputs with respect to its trainable parameters, ordered sample-major
    (row i*K + k is output k of sample i). `factor_layers`: linear layers', convolutions' and norms' rows from their
    inputs and sensitivities (prenet.layer_sensitivities; exact, no Jacobian over their weights), the other
    parameters' from their Jacobian. Rows other than linear layers' and the factored convolutions'
    (prenet.conv_layer_kernel.factoring_pays) are CountSketch-projected when they cover more than `projection_dim`
    parameters (the Jacobian's first, in named_parameters order, then the convolutions' and norms', in the order
    the forward pass calls them). The model is linearised in eval mode (its own modes restored after)."""
    with in_mode(model, False):
        return _gram_matrix(model, inputs, projection_dim, seed, dtype, progress, factor_layers)


def _gram_matrix(model, inputs, projection_dim, seed, dtype, progress, factor_layers):
    import torch

    from .conv_layer_kernel import factoring_pays
    from .layer_sensitivities import factored_kind, qualifying_layers

    dtype = dtype or torch.float64
    f0 = model_outputs(model, inputs, dtype)
    n_params = sum(v.numel() for v in model.parameters() if v.requires_grad)
    limit = DEFAULT_PROJECTION_DIM if projection_dim is None else int(projection_dim)
    if limit < 1:
        raise ValueError(f"projection_dim must be a positive integer or None, not {projection_dim!r}")
    if not n_params:
        raise ValueError("the model has no trainable parameters to linearise")
    positions = {}
    layers = qualifying_layers(model, inputs, positions) if factor_layers else {}
    # the factored layers' parameters, known by identity (a factored layer may be the model itself)
    factored = {id(v) for layer in layers.values() for v in layer.parameters() if v.requires_grad}
    rest = {name: v.numel() for name, v in model.named_parameters() if v.requires_grad and id(v) not in factored}
    rest_params = sum(rest.values())
    # linear layers on batches of vectors: their share factored (prenet.linear_layer_kernel); convolutions and linear
    # layers over positions: factored (prenet.conv_layer_kernel) where that costs less than their rows, sketched
    # where the rows of all else would exceed the limit
    vectors = {name for name, layer in layers.items() if factored_kind(layer).on_vectors and positions[name] == 1}
    over_positions = {name for name, layer in layers.items() if factored_kind(layer).at_positions} - vectors

    def weights(names):
        return sum(v.numel() for name in names for v in layers[name].parameters() if v.requires_grad)

    sketched = rest_params + weights(set(layers) - vectors) > limit
    gram_convs = {name for name in over_positions
                  if factoring_pays(layers[name], len(inputs), f0.shape[1], positions[name], sketched)}
    # the other convolutions', linear layers' over positions and norms' weights: gradient rows from their
    # sensitivities (_factored_layers)
    row_params = weights(set(layers) - vectors - gram_convs)
    project = rest_params + row_params > limit
    # a sketch's estimate is ~1e-2 off: float32's rounding (~1e-7) adds nothing to it, at half the memory traffic;
    # so then the Jacobian and the sensitivities are taken in float32 too, the exact shares with them (ResNet-18's
    # kernel on 64 samples of 32 px: half the time, 1.5e-7 from float64's, ad hoc)
    rows_dtype = torch.float32 if project else dtype
    sketch = CountSketch(rest_params + row_params, limit, seed, rows_dtype) if project else None
    # Jacobian rows of the parameters not factored exactly: the Jacobian's (columns from 0), then the other layers'
    # (columns from rest_params, in the order the forward pass calls them)
    explicit = _ExplicitRows(f0.size, rest_params + row_params, sketch, rows_dtype)
    first_row = 0
    for block in (jacobian_chunks(model, inputs, rows_dtype, progress, parameters=set(rest)) if rest else ()):
        explicit.place(first_row, block.reshape(-1, rest_params), 0)
        first_row += block.shape[0] * block.shape[1]
    theta = (_factored_layers(model, inputs, rows_dtype, layers, vectors, gram_convs, explicit, rest_params,
                              progress) if layers else None)
    if rest_params + row_params:
        gram = (explicit.matrix @ explicit.matrix.T).to(dtype).numpy()
        theta = gram if theta is None else theta + gram
    return theta, f0, n_params, (limit if project else None)


def _factored_layers(model, inputs, dtype, layers, vectors, gram_convs, explicit, first_column, progress):
    """The kernel share (None without any) of the linear layers on vectors named in `vectors` and of the
    convolutions (or linear layers over positions) named in `gram_convs`, from their inputs and sensitivities; the
    gradient rows of the other layers, from theirs, placed in `explicit` (_ExplicitRows) a few samples at a time,
    their columns from `first_column` on; all in `dtype`. `progress`: a bar over the samples done."""
    import torch
    from tqdm.auto import tqdm

    from .conv_layer_kernel import conv_layer_gram
    from .layer_sensitivities import factored_kind, sensitivity_chunks
    from .linear_layer_kernel import linear_layers_gram

    trainable, frozen = _state(model, dtype)
    x = inputs.to(dtype) if torch.is_floating_point(inputs) else inputs
    linear = {name: layer for name, layer in layers.items() if name in vectors}
    rows_of = {name: factored_kind(layer) for name, layer in layers.items()
               if name not in linear and name not in gram_convs}
    kept = [*linear, *gram_convs]  # layers whose inputs and sensitivities are kept for their share at the end
    kept_inputs, kept_sensitivities = {name: [] for name in kept}, {name: [] for name in kept}
    first_sample, itemsize = 0, torch.empty(0, dtype=dtype).element_size()
    bar = tqdm(total=len(x), desc="Layer sensitivities and rows", unit="sample", disable=not progress)
    state = with_tied_names({**trainable, **frozen}, tied_names(model))
    for layer_inputs, sensitivities in sensitivity_chunks(model, state, x, layers, CHUNK_BYTES):
        for name in kept:
            kept_inputs[name].append(layer_inputs[name])
            kept_sensitivities[name].append(sensitivities[name])
        samples = len(next(iter(sensitivities.values())))
        column = first_column
        for name, kind in rows_of.items():
            layer = layers[name]
            if kind.entries:  # rows as wide as the table, with few entries
                rows, columns, values = kind.gradients(layer, layer_inputs[name], sensitivities[name])
                explicit.add_entries(first_sample * sensitivities[name].shape[1], rows, columns, values, column)
                column += layer.weight.numel()
                continue
            row_bytes = sensitivities[name].shape[1] * layer.weight.numel() * itemsize
            block = max(1, CONV_BLOCK_BYTES // row_bytes)
            for start in range(0, samples, block):
                part = slice(start, start + block)
                rows = kind.gradients(layer, layer_inputs[name][part], sensitivities[name][part])
                explicit.place((first_sample + start) * rows.shape[1], rows.reshape(-1, rows.shape[2]), column)
            column += rows.shape[2]
        first_sample += samples
        bar.update(samples)
    bar.close()
    kept_inputs = {name: torch.cat(v) for name, v in kept_inputs.items()}
    kept_sensitivities = {name: torch.cat(v) for name, v in kept_sensitivities.items()}
    shares = [conv_layer_gram(layers[name], kept_inputs[name], kept_sensitivities[name]).numpy()
              for name in gram_convs]
    if linear:
        shares.append(linear_layers_gram(linear, kept_inputs, kept_sensitivities))
    return sum(shares) if shares else None


def tangent_kernel(model, inputs, projection_dim=None, seed=0, dtype=None, progress=False):
    """TangentKernel of `model` (put in eval mode while computing, restored after) on `inputs`."""
    started = time.perf_counter()
    gram, f0, n_params, projected = gram_matrix(model, inputs, projection_dim, seed, dtype, progress)
    return TangentKernel(f0=f0, gram=gram, parameters=n_params, projected_dim=projected,
                         seconds=time.perf_counter() - started)
