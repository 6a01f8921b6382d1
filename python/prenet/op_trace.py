"""Every operation of one training step of a model, with its real shapes: forward, loss and backward, recorded
at the level of PyTorch's operators (aten), not of modules, so functional code (a residual add, attention written
with matmul and softmax, a reshape) is seen like any layer.

The step is first run on the meta device (prenet.meta_model): shapes and dtypes without data, at the requested
batch itself, for the cost of dispatching each operator. A model that needs its data (an operator without a meta
kernel, a branch on a tensor's value, a tensor made on the CPU in its forward) is run for real instead, but only at
two small batches (2 and 3): the shapes at the requested batch are extrapolated per dimension (a dimension that
grows by d from batch 2 to 3 grows by d per sample), so no real compute is paid at the requested batch. Should the
two small traces differ in their operations (control flow that depends on the batch), the step is traced at the
requested batch instead. Either way the model is left as it was: its weights, gradients, buffers (BatchNorm's
running statistics) and the random number generator.
"""
import contextlib
import functools
import itertools
import re
from dataclasses import dataclass, field

# Stands in `Op.arguments` for a positional tensor argument (its shape is in `Op.inputs`).
TENSOR = "<tensor>"
# Operators that look rows of a table up by index (nn.Embedding, nn.EmbeddingBag): the position of the indices.
TOKEN_INDICES = {"embedding.default": 1, "_embedding_bag.default": 1, "_embedding_bag_forward_only.default": 1}
# Traced batches: two, so that batch-proportional dimensions can be told from fixed ones; from 2, because some
# layers (BatchNorm in training mode on a 1x1 map) reject a batch of 1.
TRACE_BATCHES = (2, 3)
# Seconds a real trace runs before its progress bar shows (most take a fraction of one).
REAL_TRACE_BAR_DELAY_S = 2.0


# The matrix products cuBLAS runs (aten's names): their matrices' alignment is recorded (Op.matrix_alignment).
MATRIX_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm"})
# The alignment cuBLAS's tensor-core kernels load operands at (cuBLAS documentation, "Tensor Core Usage": pointers
# and leading dimensions multiples of 16 bytes), and its elements in the narrowest type they multiply (2 bytes).
ALIGNED_BYTES = 16
ALIGNED_ELEMENTS = ALIGNED_BYTES // 2


@dataclass(slots=True)
class Op:
    """One operator call: `name` as aten names its overload ("convolution.default"), `phase` (forward, backward),
    the shapes of its tensor inputs and outputs (None for a non-tensor output), its positional arguments (TENSOR
    where a tensor stands), the module
    that was running (the innermost one, "" outside any), and the dtype of its first tensor input; the dtypes of
    all tensor inputs and outputs in `input_dtypes` and `output_dtypes` (None for a non-tensor output);
    `channels_last`: a convolution whose 4-d tensors (input and weight) are laid out channels_last (NHWC);
    `module_input`: the shape of that module's first positional tensor argument in the call that ran the op
    (None outside any module, or where it took none), as its forward received it: a BatchNorm's first operator
    updates its step counter, a Linear's first transposes its weight; `runs_on`: "" for an op every device runs,
    "cpu" for one the CPU (and the meta device) runs where a GPU does not, "cuda" for a kernel a GPU runs in their
    place (prenet.fused_recurrent, fused_dropout, fused_attention; batch norm's reserve, _mark_batch_norm_reserves);
    `autograd_records`: autograd records the call for a backward pass (gradients on and a tensor input that
    requires one: not so in a frozen layer, which then runs as in inference); `matrix_alignment`: for a matrix
    product, the elements (8, 4, 2 or 1) its matrices' rows and starts are aligned to in memory
    (matrix_alignment()), ALIGNED_ELEMENTS for any other op."""
    phase: str
    name: str
    inputs: list
    outputs: list
    arguments: list
    module: str
    dtype: str = ""
    input_dtypes: list = field(default_factory=list)
    output_dtypes: list = field(default_factory=list)
    channels_last: bool = False
    module_input: tuple = None
    runs_on: str = ""
    autograd_records: bool = True
    matrix_alignment: int = ALIGNED_ELEMENTS


def device_op(phase, name, inputs, outputs, arguments, module, input_dtypes, output_dtypes, module_input=None,
              runs_on="cuda", autograd_records=True):
    """An Op the trace did not dispatch: a kernel a device runs in place of the operators traced on the CPU or meta
    device (a cuDNN recurrent layer, prenet.fused_recurrent; fused dropout, prenet.fused_dropout). Its dtype is its
    first input's; its module input is kept in the forward phase only, as the recorder keeps it."""
    return Op(phase, name, inputs, outputs, arguments, module, input_dtypes[0] if input_dtypes else "",
              input_dtypes, output_dtypes, False, module_input if phase == "forward" else None, runs_on,
              autograd_records)


def matrix_alignment(matrices):
    """The elements (8, 4, 2 or 1) to which every matrix's leading dimension and start are aligned, as cuBLAS reads
    it: the stride between its rows where they are contiguous, between its columns where those are (a transposed
    view), its width where neither is (aten copies it first); tensors of fewer than two dimensions are passed over."""
    alignment = ALIGNED_ELEMENTS
    for matrix in matrices:
        if not hasattr(matrix, "stride") or matrix.dim() < 2:  # a tensor of two dimensions or more
            continue
        rows, columns = matrix.shape[-2:]
        row_stride, column_stride = matrix.stride()[-2:]
        leading = (row_stride if column_stride == 1 or columns == 1 else
                   column_stride if row_stride == 1 or rows == 1 else columns)
        for value in (leading, matrix.storage_offset()):
            while value % alignment:
                alignment //= 2
    return alignment


class StepOps(list):
    """The operators of one training step (Op, in the order they ran), with `module_calls`: how many times the
    model's modules were called in it (a module called three times counts three: each call runs its Python), and
    `updated`: the sizes of the parameters its backward pass gave a gradient, the ones an optimizer updates
    (PyTorch's skip a parameter without one: unused, or used only without gradients), and `touched`: the elements of
    each that its gradient holds, its size where the gradient is dense, the rows looked up times their width where it
    is sparse (an embedding with sparse=True), which an optimizer with a sparse update touches alone."""
    module_calls = 0
    updated = touched = ()

    @classmethod
    def of(cls, ops, module_calls, updated=(), touched=None):
        found = cls(ops)
        found.module_calls, found.updated = module_calls, tuple(updated)
        found.touched = found.updated if touched is None else tuple(touched)
        return found


class _DtypeNames(dict):
    """torch.dtype -> its name without the module ("float32"), each computed once."""
    def __missing__(self, dtype):
        name = self[dtype] = str(dtype).replace("torch.", "")
        return name


dtype_names = _DtypeNames()


def _tensors(values):
    """The tensors among an operator's arguments or outputs, looking one level into lists and tuples (torch.cat
    takes a list of tensors; an operator returns a tuple)."""
    import torch

    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


def _direct_mode_setter():
    """torch 1.13 keeps its stack of dispatch modes in Python: every operator passes through a Python frame that
    pops the mode, calls it and pushes it back (a third of a meta trace's time). There, with no other mode
    active, the recorder installs itself as the C++ dispatch mode directly and steps aside around each call;
    returns that setter, or None where this does not apply (any other PyTorch, or a mode already active)."""
    import torch

    setter = getattr(torch._C, "_set_torch_dispatch_mode", None)
    if not torch.__version__.startswith("1.13.") or setter is None or torch._C._len_torch_dispatch_stack() != 0:
        return None
    return setter


@functools.lru_cache(maxsize=None)
def _dispatched_detach():
    """A check, made inside a dispatch mode on an aten.detach call, of whether the dispatcher runs it (None where
    this PyTorch gives no way to tell). Under a dispatch mode, autograd's own shallow copies of a tensor (of a
    tensor it saves for the backward pass, as it saves it and as it unpacks it; of a view's base, inside
    Tensor.detach itself) reach the mode as aten.detach calls too (pytorch/pytorch#71725), where a step without
    a mode makes them in C++ with no operator dispatched: three of five detach calls in a ResNet-50 step. The
    dispatcher's own call arrives below the autograd and view layer (the ADInplaceOrView key excluded), the copies
    above it. Probed once: a Tensor.detach() must reach a mode exactly once from below for the check to hold."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    excluded = getattr(torch._C, "_dispatch_tls_is_dispatch_key_excluded", None)
    key = getattr(torch._C.DispatchKey, "ADInplaceOrView", None)
    if excluded is None or key is None:
        return None
    seen = []

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.detach.default:
                seen.append(excluded(key))
            return func(*args, **(kwargs or {}))

    with Probe():
        torch.empty(1, device="meta").detach()
    return functools.partial(excluded, key) if seen.count(True) == 1 else None


def _recorder(meta=False, direct=None):
    """A dispatch mode recording every operator into `.ops`; `meta`: run them on meta tensors
    (prenet.meta_model.meta_kernel); `direct`: torch 1.13's setter of the C++ dispatch mode (_direct_mode_setter),
    used instead of the Python mode stack."""
    from torch import Tensor
    from torch.utils._python_dispatch import TorchDispatchMode

    import torch

    from .meta_model import channels_last, meta_kernel

    detach = torch.ops.aten.detach.default
    dispatched_detach = _dispatched_detach()
    grad_enabled = torch.is_grad_enabled

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            # `modules`: a stack of (label, first tensor argument's shape) of the module calls under way;
            # `backward_owner`: (label, None) of the module whose node the backward pass runs (_BackwardOwners);
            # `runs_on`: stamped on each op (Op.runs_on); `paused`: operators not recorded (a boundary's own)
            self.ops, self.phase, self.modules, self.backward_owner = [], "forward", [], ("", None)
            self.runs_on, self.paused = "", False
            # id of an operator -> (what runs it, its name, whether it is detach, whether a convolution, the
            # position of its indices for a table lookup or None, whether it makes a tensor on the meta device in a
            # meta trace), found once per operator: keyed by id, as an operator's own hash is a Python call (an
            # operator object lives as long as the process, so its id is never reused)
            self.operators = {}

        def __enter__(self):
            if direct is None:
                return super().__enter__()
            direct(self)
            return self

        def __exit__(self, *exception):
            if direct is None:
                return super().__exit__(*exception)
            direct(None)

        def resident_labels(self, count, classes, device):
            """Labels for training_loss, made unrecorded: the protocol keeps them resident with the data, so a step
            reads its batch's slice of them and runs no kernel to make them."""
            with marked(self, paused=True):
                return torch.zeros(count, dtype=torch.long, device=device)

        def _operator(self, func):
            name = func.__name__
            found = self.operators[id(func)] = (meta_kernel(func) if meta else func, name, func is detach,
                                                name.startswith("convolution"), TOKEN_INDICES.get(name),
                                                meta and _makes_a_tensor(func),
                                                name.split(".")[0] in MATRIX_PRODUCTS)
            return found

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            run, name, is_detach, is_convolution, indices, factory, is_product = (self.operators.get(id(func)) or
                                                                                   self._operator(func))
            if factory and kwargs:
                kwargs = _made_on_meta(kwargs)
            if indices is not None and args[indices].is_floating_point():
                # eager PyTorch refuses these indices; torch 2's meta kernels let them through
                raise TypeError(f"an embedding's indices must be integers (Long or Int), got {args[indices].dtype}")
            if direct is None:
                out = run(*args, **kwargs) if kwargs else run(*args)
            else:
                direct(None)
                try:
                    out = run(*args, **kwargs) if kwargs else run(*args)
                finally:
                    direct(self)
            if self.paused:
                return out
            module, module_input = self.modules[-1] if self.modules else self.backward_owner
            if is_detach:  # a view, the most frequent operator by far (autograd hands over each gradient
                # through one): recorded without the general walk over arguments and outputs, unless it is
                # autograd's own copy of a tensor, which no real step dispatches (_dispatched_detach)
                if dispatched_detach is not None and not dispatched_detach():
                    return out
                shape, dtype = tuple(out.shape), dtype_names[out.dtype]
                self.ops.append(Op(self.phase, "detach.default", [shape], [shape], [TENSOR], module, dtype, [dtype],
                                   [dtype], False, module_input, self.runs_on))
                return out
            tensors, arguments = [], []
            for value in args:  # one pass: the tensors, and the arguments with TENSOR in their place
                if isinstance(value, Tensor):
                    tensors.append(value)
                    arguments.append(TENSOR)
                    continue
                if isinstance(value, (list, tuple)):
                    tensors.extend(v for v in value if isinstance(v, Tensor))
                arguments.append(value)
            if kwargs:
                tensors += _tensors(kwargs.values())
            shapes = [tuple(t.shape) for t in tensors]
            input_dtypes = [dtype_names[t.dtype] for t in tensors]
            if isinstance(out, Tensor):  # most operators return one tensor
                output_shapes, output_dtypes = [tuple(out.shape)], [dtype_names[out.dtype]]
                if out.is_sparse:  # its kernels touch the values (torch 2 clones a sparse gradient into .grad)
                    with marked(self, paused=True):
                        shapes = [tuple(t._values().shape) if t.is_sparse else shape
                                  for t, shape in zip(tensors, shapes)]
                        output_shapes = [tuple(out._values().shape)]
            else:
                outputs = out if isinstance(out, (tuple, list)) else (out,)
                output_shapes = [tuple(t.shape) if isinstance(t, Tensor) else None for t in outputs]
                output_dtypes = [dtype_names[t.dtype] if isinstance(t, Tensor) else None for t in outputs]
            # a convolution's layout: input and weight (the last two 4-d tensors it reads; its backward reads dY
            # first) both NHWC, at least one of them only NHWC (a 1x1 kernel or a 1x1 plane is either layout)
            nhwc = False
            if is_convolution:
                four_d = [t for t in tensors if t.dim() == 4][-2:]
                nhwc = (len(four_d) == 2 and all(t.is_contiguous(memory_format=torch.channels_last) for t in four_d)
                        and any(channels_last(t) for t in four_d))
            self.ops.append(Op(self.phase, name, shapes, output_shapes, arguments, module,
                               input_dtypes[0] if tensors else "", input_dtypes, output_dtypes, nhwc, module_input,
                               self.runs_on,  # the backward pass runs with gradients off: no walk there
                               grad_enabled() and any(t.requires_grad for t in tensors),
                               matrix_alignment([*tensors[-2:], out]) if is_product else ALIGNED_ELEMENTS))
            return out

    return Recorder()


@contextlib.contextmanager
def marked(recorder, paused=False, runs_on=""):
    """Within the block the recorder skips operators (`paused`) or marks them with `runs_on` (Op.runs_on); as before
    after."""
    before = recorder.paused, recorder.runs_on
    recorder.paused, recorder.runs_on = paused, runs_on
    try:
        yield
    finally:
        recorder.paused, recorder.runs_on = before


def sparse_embeddings(model):
    """(name, module) of the embeddings of `model` with sparse=True, whose gradients are sparse: the rows looked up."""
    import torch

    return [(name, module) for name, module in model.named_modules()
            if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse]


def _traced_alone(model, make_inputs, size, autocast, partial):
    """The ops of a step of `size` samples, traced for real on the CPU; a ValueError (the model rejected the input)
    says, where the epoch has other batches (`partial`), that this is its last one."""
    try:
        return trace_once(model, make_inputs(size), autocast)
    except ValueError as error:
        if not partial:
            raise
        raise ValueError(f"{error} (at {size} sample{'s' if size > 1 else ''}: the epoch's last batch, the rest of "
                         "dataset_size over batch; a dataset_size that leaves another rest avoids it)") from error


@functools.lru_cache(maxsize=None)
def _makes_a_tensor(func):
    """Whether the operator `func` makes a tensor from nothing (a factory: torch.arange, zeros, ones, full, empty,
    rand...): no tensor among its arguments, and a device to make it on."""
    arguments = func._schema.arguments
    return (any(argument.name == "device" for argument in arguments) and
            not any("Tensor" in str(argument.type) for argument in arguments))


def _made_on_meta(kwargs):
    """A factory's keyword arguments with its device made meta where it is the CPU, the default: a tensor the model
    makes in its forward (torch.arange(n) for positions, a mask of ones) is made beside the meta inputs it meets, as
    on the inputs' device in training."""
    import torch

    return dict(kwargs, device=torch.device("meta")) if kwargs.get("device") == torch.device("cpu") else kwargs


def factories_on_meta():
    """A dispatch mode within which tensors made without a device are made on meta (_made_on_meta, as the recorder
    of a meta trace makes them): for a walk of a model on meta tensors that records nothing (prenet.memory's)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class FactoriesOnMeta(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            return func(*args, **(_made_on_meta(kwargs) if _makes_a_tensor(func) else kwargs))

    return FactoriesOnMeta()


class _BackwardOwners:
    """Which module each backward operator belongs to. The autograd engine runs a step's nodes in the reverse of
    the order the forward pass made them (on one device it takes the ready node made last), so the module whose
    code made a node changes, going backward, where it changed going forward: at the node made last before a module
    call starts (its inputs' node, made by the caller) and before it ends (its output's node, made by itself).
    Each such node gets a hook that, as the backward pass starts it, names the module that made it for the
    operators from there on (a leaf's gradient accumulation, run right after the node that feeds it, included).
    A node the caller made between two calls from a tensor it does not pass on is counted to the later call."""

    def __init__(self, recorder):
        self.recorder, self.marked, self.hooks = recorder, set(), {}

    def mark(self, tensors, label):
        """Mark the nodes that made `tensors` as `label`'s, where not marked already (by an inner module)."""
        for tensor in tensors:
            node = tensor.grad_fn
            if node is None or node in self.marked:
                continue
            self.marked.add(node)
            node.register_prehook(self.hooks.get(label) or self._hook(label))

    def _hook(self, label):
        recorder, owner = self.recorder, (label, None)

        def start(grad_outputs):
            recorder.backward_owner = owner

        self.hooks[label] = start
        return start


class NotTrainable(ValueError):
    """The model ran, but gives a training step nothing to do: no tensor output, or no parameter to train."""


def _first_tensor(value):
    """The tensor a training loss is taken from: the output itself, the model's own loss
    (prenet.model_inputs.own_loss), a model output's `logits`, or the first tensor of a tuple, list or dict."""
    import torch

    from .model_inputs import own_loss

    if isinstance(value, torch.Tensor):
        return value
    own = own_loss(value)
    if own is not None:
        return own
    found = value.get("logits") if hasattr(value, "get") else getattr(value, "logits", None)
    if isinstance(found, torch.Tensor):
        return found
    items = value.values() if hasattr(value, "values") else value if isinstance(value, (tuple, list)) else ()
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def training_loss(output, labels=None):
    """The loss a training step takes from a model's output, as docs/measurement_protocol.md defines it: the model's
    own (a 0-d tensor, prenet.model_inputs.own_loss), else the cross-entropy of its logits (_first_tensor; classes along
    the last dimension, every other position a sample, each with a class label) in float32, or the mean
    of a 1-d output. prenet.measure trains with it and prenet.predict traces it: on a language model's output
    (a token's logits over the vocabulary) a cross-entropy reads and writes those logits several times where a mean
    reads them once. `labels(count, classes, device)`: the step's `count` labels, which the protocol keeps resident
    with the data (prenet.measure's ResidentLabels: a slice, no kernel of the step); None: drawn at random here.
    NotTrainable for an output without a tensor."""
    import torch

    tensor = _first_tensor(output)
    if tensor is None:
        raise NotTrainable(f"the model returned no tensor to train on ({type(output).__name__})")
    if tensor.dim() == 0:
        return tensor
    if tensor.dim() == 1:
        return tensor.float().mean()
    classes = tensor.shape[-1]
    logits = tensor.reshape(-1, classes).float()
    targets = (labels(logits.shape[0], classes, tensor.device) if labels else
               torch.randint(classes, (logits.shape[0],), device=tensor.device))
    return torch.nn.functional.cross_entropy(logits, targets)


def trace_once(model, inputs, autocast=False, meta=False, direct_mode=True, attribute=True):
    """The ops (StepOps, the model's module calls counted) of one forward, loss (training_loss: the model's own loss if
    it returns one, else the cross-entropy of its logits) and backward, on `inputs` as given; `autocast`: forward
    and loss under CUDA autocast's casting rules (prenet.autocast_policy), the backward pass in the dtypes they
    leave; `meta`: on meta twins of the weights and of `inputs` (prenet.meta_model), leaving the model's own tensors
    untouched; `direct_mode`: on torch 1.13, record without its Python mode stack (_direct_mode_setter);
    `attribute`: each op's module and module input found (hooks on every module call and on the autograd nodes at
    their boundaries: a tenth of a meta trace's time), else left empty, and an error raised as PyTorch gave it (no
    module to name). Traced for real, the step starts and ends with no gradients (trace_batches puts the model's own
    back, prenet.model_state)."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    from .autocast_policy import CudaAutocast
    from .fused_attention import attention_as_devices_run
    from .fused_dropout import dropout_as_devices_run
    from .fused_recurrent import fused_recurrent_layers
    from .memory import sparse_lookups_counted
    from .meta_model import to_meta, weights_on_meta
    from .model_inputs import call, module_label, rejected
    from .sync_batchnorm import as_on_one_gpu

    recorder = _recorder(meta, _direct_mode_setter() if direct_mode else None)
    owners = _BackwardOwners(recorder)
    named_modules = list(model.named_modules())
    labels = {id(module): module_label(name, module) for name, module in named_modules}

    calls = [0]  # the model's module calls

    def count(module, inputs):
        if id(module) in labels:
            calls[0] += 1

    def enter(module, inputs):
        label = labels.get(id(module))
        if label is not None:
            calls[0] += 1
            tensors = _tensors(inputs)
            owners.mark(tensors, recorder.modules[-1][0] if recorder.modules else "")
            recorder.modules.append((label, tuple(tensors[0].shape) if tensors else None))

    def leave(module, inputs, output):
        label = labels.get(id(module))
        if label is not None:
            recorder.modules.pop()
            owners.mark(_tensors(output.values() if isinstance(output, dict) else (output,)), label)

    # One pair of hooks on every module call, kept to this model's modules (a pair per module costs more to
    # register than the whole forward pass on meta tensors); without attribution one that counts the calls.
    handles = ([register_module_forward_pre_hook(enter), register_module_forward_hook(leave)] if attribute else
               [register_module_forward_pre_hook(count)])
    if meta:
        inputs = to_meta(inputs)
    else:
        model.zero_grad(set_to_none=True)
    lookups = {}  # the weight of each sparse embedding -> the indices it looked up in the step
    try:
        with weights_on_meta(model) if meta else contextlib.nullcontext(), as_on_one_gpu(model), \
                sparse_lookups_counted(model, lookups), \
                fused_recurrent_layers(named_modules, recorder), dropout_as_devices_run(recorder), \
                attention_as_devices_run(recorder), recorder:
            with CudaAutocast() if autocast else contextlib.nullcontext():
                loss = training_loss(call(model, inputs), labels=recorder.resident_labels)
                if not loss.requires_grad:
                    raise NotTrainable("the model's output depends on no parameter that requires a gradient, so "
                                       "a training step has no backward pass or update to time")
            recorder.phase, recorder.modules = "backward", []
            loss.backward()
            given = [p for p in model.parameters() if p.grad is not None]  # the twins, on meta
            # a sparse gradient holds a row for each lookup, counted at an nn.Embedding's call (torch 2's meta clone
            # of a sparse gradient into .grad holds none), else read from it
            with marked(recorder, paused=True):  # reading a sparse gradient's values is no work of the step
                updated, touched = ([p.numel() for p in given],
                                    [(lookups[id(p)] * p.shape[-1] if id(p) in lookups else p.grad._values().numel())
                                     if p.grad.is_sparse else p.numel() for p in given])
    except NotTrainable:
        raise
    except Exception as error:
        if not attribute:
            raise
        where = recorder.modules[-1][0] if recorder.modules else "before any module"
        raise rejected(where, inputs, error, model) from error
    finally:
        for handle in handles:
            handle.remove()
        if not meta:
            model.zero_grad(set_to_none=True)
    _mark_batch_norm_reserves(recorder.ops)
    return StepOps.of(recorder.ops, calls[0], updated, touched)


def _mark_batch_norm_reserves(ops):
    """Batch norm's empty reserve, which aten's batch norm makes beside native_batch_norm where the trace runs (the
    CPU, the meta device), marked as the CPU's: a GPU runs cuDNN's batch norm, which makes its own within its call
    and dispatches no such operator (bench/results/gpu_trace_vs_device_h100.md)."""
    for op in ops:
        if op.name == "empty.memory_format" and op.outputs == [(0,)] and op.output_dtypes == ["uint8"] and \
                not op.runs_on:
            op.runs_on = "cpu"


def trace_meta(model, make_inputs, size, autocast=False, attribute=True, scripted=None):
    """The ops of a training step of `size` samples on meta tensors (trace_once with meta); `make_inputs(b,
    device)` builds inputs of b samples on a device. A model with TorchScript modules runs its graphs' first calls
    as written, profiling them, and later ones optimized (autodiff's own backward operators): its step is traced
    until it runs the operators of the step before (at most SCRIPTED_WARMUP_STEPS more), as training runs past its
    first steps (`scripted`: whether it has any, None: found here)."""
    import torch

    traced = trace_once(model, make_inputs(size, "meta"), autocast, meta=True, attribute=attribute)
    if scripted is None:
        scripted = any(isinstance(module, torch.jit.ScriptModule) for module in model.modules())
    if scripted:
        for _ in range(SCRIPTED_WARMUP_STEPS):
            again = trace_once(model, make_inputs(size, "meta"), autocast, meta=True, attribute=attribute)
            if [op.name for op in again] == [op.name for op in traced]:
                break
            traced = again
    return traced


# Steps a TorchScript model is traced again at most, until its operators repeat (torch's profiling executor
# optimizes a graph after one profiled run by default: torch._C._jit_set_num_profiled_runs)
SCRIPTED_WARMUP_STEPS = 4


def _scale(small, large, batch):
    """Per dimension: fixed where the two traces agree, else grown linearly to `batch`."""
    b0, b1 = TRACE_BATCHES
    if small is None or large is None:
        return small
    return tuple(a if a == b else a + (b - a) * (batch - b0) // (b1 - b0) for a, b in zip(small, large))


def trace_small(model, make_inputs, autocast=False, done=None):
    """The ops of a training step at the two TRACE_BATCHES; `make_inputs(b)` builds inputs of b samples; `done()`,
    where given, is called after each. A ValueError (the model rejected the input) says at which batch."""
    traces = []
    for b in TRACE_BATCHES:
        try:
            traces.append(trace_once(model, make_inputs(b), autocast))
        except NotTrainable:
            raise
        except ValueError as error:  # the shapes it names have this batch, not the caller's
            raise ValueError(f"{error} (prenet traces the step for real at a batch of {b} and scales it to the "
                             "batch asked for)") from error
        if done is not None:
            done()
    return tuple(traces)


def at_batch(traces, batch, model=None, make_inputs=None, autocast=False):
    """Ops of one training step at `batch`, extrapolated from `traces` (trace_small); where the two traces differ
    in their operations, the step is traced at `batch` itself (needs `model` and `make_inputs`)."""
    import copy

    first, second = traces
    same = len(first) == len(second) and all(
        a.name == b.name and len(a.inputs) == len(b.inputs) and len(a.outputs) == len(b.outputs)
        for a, b in zip(first, second))
    if not same:
        if model is None:
            raise ValueError("the model runs different operations at different batch sizes; trace it at the batch")
        return trace_once(model, make_inputs(batch), autocast)
    ops = []
    for small, large in zip(first, second):
        op = copy.copy(small)
        op.inputs = [_scale(x, y, batch) for x, y in zip(small.inputs, large.inputs)]
        op.outputs = [_scale(x, y, batch) for x, y in zip(small.outputs, large.outputs)]
        op.module_input = _scale(small.module_input, large.module_input, batch)
        # Arguments that are sizes (views, expands) scale like shapes; others (strides, flags) stay.
        op.arguments = [_scale(tuple(x), tuple(y), batch) if isinstance(x, (list, tuple)) and
                        isinstance(y, (list, tuple)) and len(x) == len(y) and
                        all(isinstance(v, int) for v in list(x) + list(y)) and tuple(x) != tuple(y) else x
                        for x, y in zip(small.arguments, large.arguments)]
        ops.append(op)
    # a sparse gradient's rows grow with the batch, as shapes do
    touched = [_scale((x,), (y,), batch)[0] for x, y in zip(first.touched, second.touched)]
    return StepOps.of(ops, first.module_calls, first.updated, touched)


def trace_batches(model, make_inputs, sizes, autocast=False, attribute=True, progress=False):
    """({size: ops of a training step at that batch size}, how it was traced: "meta" or "cpu", why it was traced
    for real: None on meta), for the batch sizes `sizes`; `make_inputs(b, device)` builds inputs of b samples on a
    device. On meta tensors at each size where the model runs there, their modules found only with `attribute`
    (trace_once); else for real at TRACE_BATCHES on the CPU (modules found), extrapolated (at_batch), the model put
    back on its device and as it was after (prenet.model_state). `progress`: a bar over the real traces, shown
    once they have taken REAL_TRACE_BAR_DELAY_S (a detection model's take a minute on two cores)."""
    import torch

    from .model_state import model_kept
    from .progress import progress_bar

    # A recurrent layer runs another algorithm on meta tensors (inputs projected step by step) than on the CPU and
    # in cuDNN (the inputs of all steps projected in one product): traced for real.
    types = {type(module) for module in model.modules()}
    recurrent = any(issubclass(kind, torch.nn.RNNBase) for kind in types)
    scripted = any(issubclass(kind, torch.jit.ScriptModule) for kind in types)
    why = "it has recurrent layers, which run otherwise on meta tensors than on the CPU and in cuDNN"
    if not recurrent:
        try:
            return ({size: trace_meta(model, make_inputs, size, autocast, attribute, scripted) for size in sizes},
                    "meta", None)
        except Exception as error:  # the model needs real data somewhere: traced for real, which names what it rejects
            if not attribute:  # the module it failed in, for the reason given
                try:
                    trace_meta(model, make_inputs, sizes[0], autocast)
                except Exception as named:
                    error = named
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            # PyTorch's own message names the operator, then a paragraph on selective builds
            first_line = re.sub(r"Could not run '([^']+)' with arguments from the 'Meta' backend.*",
                                r"this torch has no meta kernel for \1", first_line)
            why = "the meta device cannot run it: " + (first_line if len(first_line) <= 200 else
                                                       first_line[:197] + "...")

    def real_inputs(b):
        return make_inputs(b, "cpu")

    if any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers())):
        raise ValueError(f"the model's weights are on the meta device, but it must be traced with real data ({why}); "
                         "build it on the CPU")
    bar = progress_bar(len(TRACE_BATCHES), f"tracing {type(model).__name__}'s step for real on the CPU", progress,
                       unit="step", delay=REAL_TRACE_BAR_DELAY_S)

    def retrace_inputs(b):  # at_batch traces at the batch itself: one step more for the bar
        bar.total += 1
        return real_inputs(b)

    try:
        with model_kept(model):
            model.cpu()  # traced on the CPU; model_kept puts the model back on its device
            traces, ops = trace_small(model, real_inputs, autocast, done=bar.update), {}
            for size in sizes:
                steps = bar.total
                # below the traced batches a step is traced itself (a batch of one is cheap, and some layers refuse
                # it: batch normalization in training over one value per channel)
                ops[size] = (_traced_alone(model, retrace_inputs, size, autocast, len(sizes) > 1)
                             if size < TRACE_BATCHES[0] else at_batch(traces, size, model, retrace_inputs, autocast))
                bar.update(bar.total - steps)
            return ops, "cpu", why
    finally:
        bar.close()
