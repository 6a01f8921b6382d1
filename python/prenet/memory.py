"""How much device memory training a model takes, by the protocol's step (docs/measurement_protocol.md: the data set
resident on the device, one optimizer step per batch): its weights, their gradients, the optimizer's state, the
resident samples and the activations the forward pass saves for the backward pass. Those are found exactly, not
guessed from layer types: the forward pass and loss run with a hook on every tensor autograd saves (each storage
counted once, whole, weights left out), on the meta device where the model runs there, else for real at two small
batches, linear in the batch between them. Under activation checkpointing, the segments' inputs and the largest
segment's saves count instead of every segment's (prenet.saved_tensors).

The backward pass's start also holds the gradients the loss's own nodes make on their way to the model's output
(loss_gradient_bytes: a language model's, twice its logits). Against the peak memory measured on the H100
(bench/validate_h100.py) the sum is off by a median 1.8% for the torchvision models (16 cases; the worst, 36% under,
is ResNet-18 at batch 16, measured above its batch 32); the plain-PyTorch BERT and GPT-2 are 23-25% and 15-17% over,
their attention matrices saved where the measured library's fused attention saved none (the same plain models
measured there ourselves: 5.1% over and 3.9% under, bench/validate_gpu_measured.py). Not modelled: the rest of the
backward pass's transients, cuDNN's and cuBLAS's workspaces, the allocator's rounding and fragmentation, and the
CUDA context.
"""
import contextlib
from dataclasses import dataclass

from .lazy_modules import initialized
from .model_inputs import call, input_maker, tensors

# Optimizer state per trainable element, in the parameter's type: momentum (SGD), exp_avg and exp_avg_sq (Adam),
# square_avg (RMSprop without momentum, PyTorch's default), sum (Adagrad).
STATE_PER_ELEMENT = {"sgd": 1, "sgd_nesterov": 1, "sgd_plain": 0, "adam": 2, "adamw": 2, "rmsprop": 1,
                     "adagrad": 1}
GIB = 2 ** 30
# The units sizes are written in: the largest a size reaches, KiB at least (binary_unit).
BINARY_UNITS = (("GiB", GIB), ("MiB", 2 ** 20), ("KiB", 2 ** 10))


def binary_unit(nbytes):
    """(name, bytes) of the unit to write `nbytes` in: the largest of BINARY_UNITS it reaches, KiB at least."""
    return next((unit, size) for unit, size in BINARY_UNITS if nbytes >= size or unit == "KiB")


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes of device memory a training step holds at its peak (the start of the backward pass, where every
    saved activation is alive), by part: `data` is the whole data set resident on the device, as the protocol
    measures and prenet.predict's times assume; `batch_data` one batch of it, all a training loop that copies its
    batches in one at a time holds (`streamed`)."""
    weights: int
    gradients: int
    optimizer_state: int
    data: int
    activations: int
    batch_data: int
    # the gradients the loss's backward makes on its way to the model's output, alive with every saved activation
    # at the backward pass's start (loss_gradient_bytes)
    loss_gradients: int = 0

    @property
    def total(self):
        """With the data set resident (the protocol's step)."""
        return (self.weights + self.gradients + self.optimizer_state + self.data + self.activations +
                self.loss_gradients)

    @property
    def streamed(self):
        """With the data copied to the device a batch at a time instead."""
        return self.total - self.data + self.batch_data

    @property
    def gib(self):
        return self.total / GIB

    def fits(self, memory_gib, resident=True):
        """Whether the step, with the data set resident or (resident=False) streamed a batch at a time, is within
        `memory_gib` GiB (a GPU's memory, as the catalog gives it)."""
        return (self.total if resident else self.streamed) <= memory_gib * GIB

    def __repr__(self):
        unit, size = binary_unit(self.total)
        parts = ", ".join(f"{name} {getattr(self, name) / size:.2f}" for name in
                          ("weights", "gradients", "optimizer_state", "data", "activations", "loss_gradients"))
        return (f"<prenet training memory: {self.total / size:.2f} {unit} ({parts} {unit}); {self.streamed / size:.2f} "
                f"{unit} with the data streamed a batch at a time>")


def loss_gradient_bytes(loss, output):
    """Bytes the backward pass holds at its start beyond the saved activations: the gradients the loss's own nodes
    make on their way to the model's largest output that needs one (a language model's logits: the cross-entropy's
    gradient of the log-probabilities and then of the logits, each as large as the logits), of which a node's
    incoming and outgoing ones are alive together (the engine frees a gradient once the node it feeds has run): the
    largest sum of two made one after the other (views, which make none, between them). Run on the device `loss` is
    on (meta: prenet.meta_model's kernels where torch 1.13 lacks one); 0 where that backward cannot run there."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from .meta_model import meta_kernel
    from .saved_tensors import storage_nbytes, storage_key

    wanted = [t for t in tensors(output) if t.requires_grad and t is not loss]
    if not wanted or not loss.requires_grad:
        return 0
    largest = max(wanted, key=lambda t: t.numel() * t.element_size())
    made = []

    class Sizes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = (meta_kernel(func) if loss.is_meta else func)(*args, **(kwargs or {}))
            given = {storage_key(t) for t in tensors((args, kwargs or {}))}  # a view or in-place result makes none
            new = sum(storage_nbytes(t) for t in tensors(out) if storage_key(t) not in given)
            if new:
                made.append(new)
            return out

    try:
        with Sizes():
            torch.autograd.grad(loss, largest, retain_graph=True, allow_unused=True)
    except (RuntimeError, NotImplementedError, TypeError):  # no meta kernel for some node: not counted
        return 0
    return max([a + b for a, b in zip(made, made[1:])] or made or [0])


def saved_activations(model, inputs, autocast=False, updated=None, labels=None, loss_gradients=None):
    """Bytes of the tensors the forward pass and loss of `model` on `inputs` save for the backward pass, at their
    peak (prenet.saved_tensors: each storage once, the model's parameters and buffers left out; under activation
    checkpointing, the segments' inputs and the largest segment's saves), run on the device `inputs` are on
    (meta: the model's weights are given meta twins for the run, prenet.meta_model). `updated`, a list, gets for each
    parameter the step updates (updated_parameters) its bytes and its gradient's: the same where the gradient is
    dense, the rows looked up (with their int64 indices) where it is sparse (an embedding with sparse=True).
    `labels`, a list, gets the count of class labels the step's loss reads (op_trace.training_loss), which the
    protocol keeps resident with the data: counted with it, not among the activations. `loss_gradients`, a list,
    gets loss_gradient_bytes of the step."""
    import torch

    from .autocast_policy import CudaAutocast
    from .fused_attention import attention_as_devices_run
    from .fused_dropout import dropout_as_devices_run
    from .meta_model import weights_on_meta
    from .op_trace import training_loss
    from .saved_tensors import SavedTensors, made_order, segments_followed, storage_key
    from .sync_batchnorm import as_on_one_gpu

    meta = any(t.is_meta for t in tensors(inputs))
    lookups = {}  # the weight of each sparse embedding -> the indices it looked up in the step
    with weights_on_meta(model) if meta else contextlib.nullcontext(), as_on_one_gpu(model), \
            sparse_lookups_counted(model, lookups), dropout_as_devices_run(), attention_as_devices_run():
        saved = SavedTensors(excluded={storage_key(t) for t in (*model.parameters(), *model.buffers())})

        def resident_labels(count, classes, device):
            made = torch.zeros(count, dtype=torch.long, device=device)
            saved.excluded.add(storage_key(made))
            if labels is not None:
                labels.append(count)
            return made

        with torch.autograd.graph.saved_tensors_hooks(saved.pack_own, lambda tensor: tensor), \
                segments_followed(saved), made_order(saved):
            with CudaAutocast() if autocast else contextlib.nullcontext():
                output = call(model, inputs)
                loss = training_loss(output, labels=resident_labels)
        if loss_gradients is not None:
            loss_gradients.append(loss_gradient_bytes(loss, output))
        if updated is not None:
            for p in updated_parameters(loss, model):
                rows = lookups.get(id(p))
                dense = p.numel() * p.element_size()
                # a sparse gradient: the looked-up rows' values and an int64 index for each
                updated.append((dense, dense if rows is None else rows * (p.shape[-1] * p.element_size() + 8)))
        return saved.peak_bytes()


@contextlib.contextmanager
def sparse_lookups_counted(model, lookups):
    """Within it, each call of an embedding of `model` with sparse=True adds the indices it looks up to
    `lookups[id(weight)]` (the weight as the call sees it: a meta twin inside weights_on_meta)."""
    from .op_trace import sparse_embeddings

    def count(module, inputs, output):
        lookups[id(module.weight)] = lookups.get(id(module.weight), 0) + inputs[0].numel()

    handles = [module.register_forward_hook(count) for _, module in sparse_embeddings(model)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def updated_parameters(loss, model):
    """The parameters of `model` that `loss` reaches through autograd: the ones its backward pass gives a gradient
    and an optimizer updates, with a gradient and state (PyTorch's optimizers skip a parameter without a gradient:
    unused, or used only without gradients). Every parameter that requires a gradient where a reentrant checkpoint
    (torch.utils.checkpoint's CheckpointFunction) hides its segment's until the backward pass."""
    reached, seen, nodes = set(), set(), [loss.grad_fn]
    while nodes:
        node = nodes.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if "Checkpoint" in type(node).__name__:
            return [p for p in model.parameters() if p.requires_grad]
        variable = getattr(node, "variable", None)  # AccumulateGrad: the leaf it accumulates into
        if variable is not None:
            reached.add(id(variable))
        nodes += [following for following, _ in node.next_functions]
    return [p for p in model.parameters() if id(p) in reached]


def training_memory(model, batch=32, input_shape=None, example_input=None, dataset_size=1024, optimizer="sgd",
                    precision="fp32"):
    """The TrainingMemory of training `model` in batches of `batch` on `dataset_size` resident samples with
    `optimizer` in `precision` (arguments as prenet.predict takes them)."""
    from .estimate import MIXED_PRECISIONS, _check
    from .model_state import in_mode, model_kept
    from .op_trace import TRACE_BATCHES, _scale, factories_on_meta
    from .predictors import check_precision

    batch, dataset_size, optimizer = _check(model, batch, dataset_size, optimizer)
    precision = check_precision(precision)  # an unknown one had been taken as fp32
    make_inputs = input_maker(model, input_shape, example_input)
    model = initialized(model, make_inputs)  # lazy modules not yet run: a copy, with its shapes
    autocast = precision in MIXED_PRECISIONS
    labels = []  # the loss's class labels in a step (their count), at the batch of the walk: `walked`
    loss_gradients = []  # loss_gradient_bytes of the walk(s)
    with in_mode(model, True):
        try:
            updated, walked = [], batch
            try:
                activations = saved_activations(model, make_inputs(batch, "meta"), autocast, updated, labels,
                                                loss_gradients)
            except Exception:  # tensors it makes without a device, on the CPU by default: made on meta
                updated, labels[:], loss_gradients[:] = [], [], []
                with factories_on_meta():
                    activations = saved_activations(model, make_inputs(batch, "meta"), autocast, updated, labels,
                                                    loss_gradients)
        except Exception:  # the model needs real data somewhere: two small batches for real, linear in the batch
            at = {b: [] for b in TRACE_BATCHES}
            labels[:], loss_gradients[:], walked = [], [], TRACE_BATCHES[0]
            with model_kept(model):
                model.cpu()
                small, large = ((saved_activations(model, make_inputs(b, "cpu"), autocast, at[b], labels,
                                                   loss_gradients),) for b in TRACE_BATCHES)
            activations = max(0, _scale(small, large, batch)[0])  # as a trace's shapes are
            loss_gradients = [max(0, _scale(loss_gradients[:1], loss_gradients[1:], batch)[0])]
            # a sparse gradient's rows grow with the batch too
            updated = [_scale(a, b, batch) for a, b in zip(*at.values())]
    # the labels are data (int64): resident, as the protocol keeps them, where each sample has the same count
    label_bytes = 8 * labels[0] // walked if labels and labels[0] % walked == 0 else 0
    return TrainingMemory(
        weights=sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers())),
        gradients=sum(gradient for _, gradient in updated),
        # the state is dense (SGD's momentum buffer gathers every row a sparse gradient touches, Adagrad's sums are
        # the table's)
        optimizer_state=STATE_PER_ELEMENT[optimizer] * sum(dense for dense, _ in updated),
        data=_bytes(make_inputs(dataset_size, "meta")) + dataset_size * label_bytes, activations=activations,
        batch_data=_bytes(make_inputs(min(batch, dataset_size), "meta")) + min(batch, dataset_size) * label_bytes,
        loss_gradients=loss_gradients[0])


def _bytes(inputs):
    return sum(t.numel() * t.element_size() for t in tensors(inputs))
