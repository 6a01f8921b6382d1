"""prenet.predict: the training time of a whole model, per step and per epoch, on a GPU of the catalog or on this
machine's CPU, before paying for either.

One training step is recorded operator by operator (prenet.op_trace), each operator is costed on the device by the
layer predictors (prenet.op_costs, the native estimator), the optimizer's update per parameter tensor, and the
host's work (dispatch, kernel launches, autograd, the optimizer's loop) from costs measured on this machine
(prenet.host_cost) and the launch gap of GPU hosts (prenet.launch_gap). On a GPU the host issues kernels ahead of
the device and the two meet in the launch queue (prenet.launch_queue), op by op over the whole epoch; on the CPU
they add up. An epoch is ceil(dataset_size / batch) steps, the last one at the remaining batch.
"""
import functools
import math
import numbers
import warnings
from dataclasses import dataclass, field

from . import (gpu_calibration, host_calibration, host_cost, launch_gap, launch_queue, lazy_modules, op_costs, op_trace,
               uncertainty)
from ._native import core
from .catalog import device_catalog, find_gpu, host_catalog, unmeasured_host_warning
from .collector_paused import collector_paused
from .sibling_gpu import SiblingBundle
from .model_inputs import input_maker, module_label
from .model_state import in_mode
from .predictors import (MIXED_PRECISIONS, PACKAGED_UNSEEN_BUNDLE, check_precision, gpu_bundle_folder,
                         learned_timing, resolve)

# Optimizer names as prenet.predict and prenet.measure take them (docs/measurement_protocol.md: "sgd" is SGD with
# momentum 0.9) -> the native optimizer table's names.
OPTIMIZERS = {"sgd": "sgd_momentum", "sgd_nesterov": "sgd_momentum", "sgd_plain": "sgd", "adam": "adam",
              "adamw": "adamw", "rmsprop": "rmsprop", "adagrad": "adagrad"}
# Those whose PyTorch optimizer refuses a sparse gradient (an embedding with sparse=True): "Adam does not support
# sparse gradients, please consider SparseAdam instead" (torch.optim, 1.13 and 2.x).
DENSE_ONLY_OPTIMIZERS = {"adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop"}
# Those whose update of a parameter with a sparse gradient touches only its rows there (torch.optim: plain SGD adds
# the sparse gradient; Adagrad's sparse branch updates its state and the weights at the gradient's indices). With
# momentum, SGD's buffer is costed dense.
SPARSE_UPDATES = {"sgd_plain", "adagrad"}


# What an estimate says of a GPU whose vendor no fitted GPU shares (prenet.uncertainty.extrapolation).
OTHER_VENDOR = ("an {vendor} GPU, timed as NVIDIA's libraries (cuDNN, cuBLAS) run on NVIDIA GPUs, at its own "
                "specifications; its vendor's libraries (AMD's: MIOpen, rocBLAS) are not modelled: a rough guide")


@dataclass
class Estimate:
    """A predicted training time. `layers`: one row per module (and the autograd work no module owns) with its
    input's shape (as its forward received it), operations, FLOPs, bytes, forward and backward milliseconds and
    share of the step; `ops`: every operator (both DataFrames built when first read, by `tables`, which for a
    meta trace first traces the step again to find each operator's module: Traced.attributed)."""
    gpu: str
    batch: int
    dataset_size: int
    optimizer: str
    precision: str
    step_seconds: float
    epoch_seconds: float
    iterations: int
    device_ms: float
    host_ms: float
    optimizer_ms: float
    tables: object = field(repr=False, compare=False)  # () -> (layers, ops)
    # 80% interval of epoch_seconds (low, high) from the leave-one-device-out errors (prenet.uncertainty) and the
    # launch gap's spread over hosts (prenet.launch_gap), its high side reaching the CUDA-core time of operators on
    # tensor cores (_device_times), and how far the GPU lies from the fitted ones
    # ({"nearest", "distance", "outside"}, and "timed_as": the fitted twin it was timed as, where it has one,
    # prenet.predictors.measured_twin, or "timed_through": its fitted sibling, prenet.sibling_gpu); None on the CPU.
    interval_seconds: object = None
    extrapolation: object = None
    # How the step was traced (prenet.op_trace): "meta" (shapes only, at the batch) or "cpu" (run for real at two
    # small batches, extrapolated).
    traced: str = "meta"
    traced_for_real_because: str = None
    # On the CPU of a machine that is not the measured host, or on a GPU calibrated by timed layers: the
    # calibration's description (prenet.host_calibration, prenet.gpu_calibration).
    calibrated: str = None
    # The model's own 2-byte weight types ("float16", "bfloat16"), whose operators run in that type whatever
    # `precision` (autocast's) says.
    narrow_weights: tuple = ()
    # () -> the step's prenet.training_memory (`memory`), walked when first asked for; None where not known (an
    # estimate of prenet.compare, whose table has it)
    memory_of: object = field(default=None, repr=False, compare=False)

    @property
    def _on_gpu(self):
        return self.extrapolation is not None  # how far the GPU lies from the fitted ones; None on the CPU

    @functools.cached_property
    def memory(self):
        """The step's device memory (prenet.memory.TrainingMemory), found when first read (a walk of the model on
        meta tensors, as long as a meta trace); None where the estimate does not know its model."""
        return self.memory_of() if self.memory_of else None

    @property
    def _gpu_memory_gb(self):
        return find_gpu(self.gpu)["memory_gb"]  # the catalog's

    @property
    def fits(self):
        """Whether the step fits the GPU's memory (the catalog's) with the data copied in a batch at a time, as
        prenet.compare's `fits`; None on the CPU or where `memory` is None."""
        if self.memory is None or not self._on_gpu:
            return None
        return self.memory.fits(self._gpu_memory_gb, resident=False)

    def _memory_text(self):
        """The repr's words on memory: for a GPU, and a model traced on meta tensors (its memory walk as quick)."""
        if self.memory_of is None or not self._on_gpu or self.traced != "meta":
            return ""
        from .memory import binary_unit

        available = self._gpu_memory_gb
        try:
            need = self.memory.streamed
        except Exception as error:  # a repr does not raise: `memory` does, when read itself
            return f"; memory not known ({type(error).__name__}: {error})"
        unit, size = binary_unit(need)
        if self.fits:
            return (f"; memory {need / size:.2f} {unit} a step of its {available:g} GiB (data copied in a batch at a "
                    "time)")
        return (f"; memory {need / size:.2f} {unit} a step (data copied in a batch at a time): more than its "
                f"{available:g} GiB, the step does not fit")

    @functools.cached_property
    def _tables(self):
        return self.tables()

    @property
    def layers(self):
        return self._tables[0]

    @property
    def ops(self):
        return self._tables[1]

    @property
    def bound(self):
        """"host" or "device": the side with more work per step (the step itself takes at least that long)."""
        return "host" if self.host_ms > self.device_ms else "device"

    def __repr__(self):
        sure = ""
        if self.interval_seconds:
            sure += f"; 80% interval {self.interval_seconds[0]:.3f}-{self.interval_seconds[1]:.3f} s"
        if self.extrapolation:
            x = self.extrapolation
            sure += (f"; nearest fitted GPU {x['nearest']} (distance {x['distance']:.2f}"
                     + (f", beyond the fitted range in {', '.join(x['outside'])}" if x["outside"] else "") + ")")
            if x.get("timed_as"):
                sure += f"; timed as {x['timed_as']}, a fitted GPU of the same specifications but memory size"
            if x.get("other_vendor"):
                sure += f"; {OTHER_VENDOR.format(vendor=x['other_vendor'])}"
            if x.get("timed_through"):
                sure += (f"; timed through {x['timed_through']}, a fitted GPU of the same chip, scaled to this one by "
                         "the unseen-GPU predictors")
        if self.traced == "cpu":
            sure += f"; traced for real at small batches ({self.traced_for_real_because})"
        if self.calibrated:
            sure += f"; {self.calibrated}"
        steps = epoch_steps_text(self.batch, self.dataset_size)
        weights = f" ({' and '.join(self.narrow_weights)} weights)" if self.narrow_weights else ""
        return (f"<prenet estimate: {self.epoch_seconds:.3f} s per epoch ({steps}) on {self.gpu}; step "
                f"{1e3 * self.step_seconds:.2f} ms (device {self.device_ms:.2f} ms incl. optimizer "
                f"{self.optimizer_ms:.2f} ms, host {self.host_ms:.2f} ms: {self.bound}-bound); {self.optimizer}, "
                f"{self.precision}{weights}{self._memory_text()}{sure}>")

    def plot(self, top=15, ax=None):
        """Horizontal bars of the `top` modules by share of the step (forward and backward stacked), with a panel of
        device time by operator and the optimizer's update beside them where no `ax` is given (prenet.step_plot).
        Returns the modules' axes."""
        from .step_plot import plot_step

        return plot_step(self, top, ax)


def epoch_steps_text(batch, dataset_size):
    """An epoch's steps in words: "32 steps of batch 32, 1024 samples", "1 step of 10 samples (all, fewer than
    the batch of 64)"."""
    runs = epoch_runs(batch, dataset_size)
    if dataset_size < batch:
        return f"1 step of {dataset_size} samples (all, fewer than the batch of {batch})"
    count = sum(n for _, n in runs)
    last = runs[-1][0]
    return f"{count} step{'s' if count > 1 else ''} of batch {batch}, {dataset_size} samples" + (
        f", the last of {last}" if last < batch else "")


def epoch_runs(batch, dataset_size):
    """An epoch's batch sizes in order, as runs of (size, how many steps in a row): ceil(dataset_size / batch)
    steps, the last one at the remainder."""
    full, rest = divmod(dataset_size, batch)
    return ([(batch, full)] if full else []) + ([(rest, 1)] if rest else [])


def epoch_batches(batch, dataset_size):
    """The batch size of each step of an epoch, in order (epoch_runs spelled out)."""
    return [size for size, count in epoch_runs(batch, dataset_size) for _ in range(count)]


def optimizer_name(optimizer):
    """`optimizer` by its name in OPTIMIZERS: given as a name in any case ("SGD", "AdamW"), a torch.optim class
    or a subclass of one (SGD as the protocol's, with momentum), or an optimizer itself (an SGD by its first
    group's momentum and nesterov flag)."""
    import torch

    name = optimizer.lower() if isinstance(optimizer, str) else None
    kind = optimizer if isinstance(optimizer, type) else type(optimizer)
    if name is None and issubclass(kind, torch.optim.Optimizer):
        name = next((c.__name__.lower() for c in kind.__mro__ if c.__name__.lower() in OPTIMIZERS), None)
        if name == "sgd" and isinstance(optimizer, torch.optim.Optimizer):
            group = optimizer.param_groups[0]
            name = "sgd_nesterov" if group.get("nesterov") else "sgd" if group.get("momentum") else "sgd_plain"
        if name in OPTIMIZERS and isinstance(optimizer, torch.optim.Optimizer):
            _warn_unmodelled(optimizer.param_groups[0], name)
    if name not in OPTIMIZERS:
        shown = (repr(optimizer) if isinstance(optimizer, str) else optimizer.__name__ if isinstance(optimizer, type)
                 else f"of type {kind.__name__}")
        raise ValueError(f"unknown optimizer {shown}; known: {', '.join(OPTIMIZERS)}, or torch.optim's SGD, Adam, "
                         "AdamW, RMSprop or Adagrad (a class or an optimizer)")
    return name


# An optimizer's settings whose step costs otherwise than its name's: (setting, the value that does, what it does).
UNMODELLED_SETTINGS = (("amsgrad", True, "a third state tensor and a maximum per element"),
                       ("centered", True, "a mean of the gradients kept and subtracted"),
                       ("foreach", False, "a loop over the tensors, launching each one's kernels, not a multi-tensor "
                                          "pass on a GPU"),
                       ("fused", True, "one fused kernel for the whole update"))


def _warn_unmodelled(group, name):
    """Warns, at predict's caller, of the settings of an optimizer's first parameter group (UNMODELLED_SETTINGS, and
    RMSprop's momentum) that prenet leaves out: its update is `name`'s with PyTorch's defaults (as prenet.measure
    makes it, and as the host costs and the memory's optimizer state count it)."""
    found = [f"{setting}={value} ({what})" for setting, value, what in UNMODELLED_SETTINGS
             if group.get(setting) is value]
    if name == "rmsprop" and group.get("momentum"):
        found.append(f"momentum={group['momentum']} (a momentum buffer)")
    if found:
        warnings.warn(f"the optimizer's {'; '.join(found)}: not taken, its update is {name}'s with PyTorch's "
                      "defaults", stacklevel=6)  # past this, optimizer_name, _check, predict and its wrapper


def _check(model, batch, dataset_size, optimizer):
    """Rejects bad arguments of predict and measure by name (each checks its precision with check_precision).
    Returns (batch, dataset_size) as ints and the optimizer's name (optimizer_name)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not any(p.requires_grad for p in model.parameters()):
        raise op_trace.NotTrainable("the model has no parameter that requires a gradient, so a training step "
                                    "has no backward pass or update to time")
    for name, value in (("batch", batch), ("dataset_size", dataset_size)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r} ({type(value).__name__})")
    return int(batch), int(dataset_size), optimizer_name(optimizer)


def _op_precision(work, precision):
    """The precision an op's kernels run in within a step of `precision`: for ops on 2-byte tensors their type
    (the step's mixed type under autocast, or that of a model kept in bf16 or fp16), for the rest PyTorch's fp32
    rules as the step sets them (its defaults, strict fp32, or TF32 matmuls). An fp16 step is traced in bf16
    (prenet.autocast_policy.TRACE_DTYPE, of the same element size): its 2-byte kernels are fp16's."""
    if work.narrow:
        return "fp16" if precision == "fp16" else work.narrow
    return precision if precision in ("fp32_strict", "tf32") else "fp32"


# Bytes of an element of the types tensor cores multiply in, by the precision of an op's kernels.
_TENSOR_CORE_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4}


def _misaligned(work, kernel_precision):
    """Whether a matrix product on tensor cores has a matrix whose rows or start are not 16 bytes apart in memory
    (Op.matrix_alignment; a vocabulary of 50,257 in bf16): cuBLAS's kernels for it load an element at a time
    (GPT-2's output layer ran Turing-era align1 kernels at a tenth of the H100's bf16 rate,
    bench/results/device_profile_h100.md)."""
    element_bytes = _TENSOR_CORE_ELEMENT_BYTES.get(kernel_precision)
    return element_bytes is not None and work.alignment * element_bytes < op_trace.ALIGNED_BYTES


def _device_times(ops, native, catalog, device, optimizer, precision, gaps_ms, with_cuda_core=False):
    """Per op: (Work or None, device milliseconds, basis, its time on CUDA cores over that time); `gaps_ms`:
    {kind: the launch gap in the latencies learned for it}, taken off each kernel by its own kind (a composite
    layer's kernels included). Each distinct configuration is predicted once, for its forward and backward parts
    together (a model repeats its blocks, and a layer's backward ops have its forward's configuration).
    `with_cuda_core`: the last is found (else all 1), for the interval's high side. The predictors learned their
    efficiencies from fp32 CUDA-core kernels only (no data here times a tensor-core kernel), so an op on tensor
    cores is known only between that efficiency kept at the tensor-core rate (the estimate, prenet/precision.hpp; a
    convolution's from its implicit GEMM, prenet/layer_time.hpp) and its CUDA-core kernel (the same configuration
    in fp32_strict, predicted in the same native call): the ratio of the two, at least 1; 1 for an op not on
    tensor cores, and for a convolution whose CUDA-core kernel the estimate already chose (the faster of the two).
    A matrix product on tensor cores with a misaligned matrix (_misaligned) runs kernels between the two, known to
    neither: it is timed at the geometric mean of its tensor-core and CUDA-core times (the median of a log-uniform
    spread between those bounds)."""
    works = [op_costs.work_of(op) for op in ops]
    groups = {}  # (kind, precision, misaligned) -> {configuration: indices of the ops that run it}
    for index, work in enumerate(works):
        if work is not None:
            kernel_precision = _op_precision(work, precision)
            group = groups.setdefault((work.kind, kernel_precision, _misaligned(work, kernel_precision)), {})
            group.setdefault(tuple(work.config.items()), []).append(index)  # one rule builds a kind's keys in one order
    for kernel_precision in sorted({p for _, p, _ in groups} & set(MIXED_PRECISIONS)):
        try:  # a 2-byte type the device lacks is named here, not taken for a configuration out of range below
            check_precision(kernel_precision, device)
        except ValueError as error:
            raise type(error)(f"operators of the model run in {kernel_precision}: {error}") from None
    ms, basis, spread = [0.0] * len(ops), ["view"] * len(ops), [1.0] * len(ops)
    for (kind, kernel_precision, misaligned), by_config in groups.items():
        configs = [works[indices[0]].config for indices in by_config.values()]
        cuda_core = with_cuda_core or misaligned  # a misaligned product is timed between the two
        try:
            times = native.estimate(kind, configs, catalog, device, optimizer, kernel_precision, gaps_ms, cuda_core)
        except ValueError:  # a configuration outside its kind's range: cost its ops by their traffic
            times = []
            for config, indices in zip(configs, by_config.values()):
                try:
                    times += native.estimate(kind, [config], catalog, device, optimizer, kernel_precision,
                                             gaps_ms, cuda_core)
                except ValueError:
                    for i in indices:
                        works[i] = op_costs.traffic(op_costs.moved_bytes(ops[i]) / op_costs.FP32_BYTES)
                        t = native.estimate("add", [works[i].config], catalog, device, optimizer, "fp32",
                                            gaps_ms)[0]
                        ms[i], basis[i] = works[i].count * t["forward_ms"], "traffic"
                    times.append(None)
        for indices, t in zip(by_config.values(), times):
            if t is None:
                continue
            for i in indices:
                part = _timed_part(works[i], ops[i])
                ms[i] = works[i].count * (math.sqrt(t[f"{part}_ms"] * t[f"cuda_core_{part}_ms"]) if misaligned
                                          else t[f"{part}_ms"])
                basis[i] = works[i].how if works[i].how == "traffic" else t[f"{part}_basis"]
                if with_cuda_core and works[i].how == "layer" and ms[i]:
                    spread[i] = max(1.0, works[i].count * t[f"cuda_core_{part}_ms"] / ms[i])
    return works, ms, basis, spread


def _bias_kernels_after(work):
    """Kernels (and operators) a GPU runs after a layer's forward to add its bias (a cuDNN convolution's
    `output.add_(bias)`: LayerKind::gpu_bias_kernels); 0 for a layer without them."""
    if work.part != "forward" or not work.config.get("bias") or work.kind not in _kinds_with_bias_kernels():
        return 0
    return core().gpu_bias_kernel_count(work.kind, work.config)


@functools.lru_cache(maxsize=None)
def _kinds_with_bias_kernels():
    return frozenset(kind["name"] for kind in core().layer_kinds() if kind["gpu_bias_kernels"])


def _timed_part(work, op):
    """The part of a layer's time an op runs: a layer's forward run by the forward pass is the forward inside a
    training step ("step_forward", autograd recording the backward's inputs) where autograd records it; the same
    kernel run by the backward pass (a gradient's product, an elementwise op), or by a frozen layer (no input that
    requires a gradient, Op.autograd_records), records nothing."""
    return ("step_forward" if work.part == "forward" and op.phase == "forward" and op.autograd_records
            else work.part)


def _owners(ops):
    """Module owning each op: the one whose forward ran it or made the autograd node that runs it in the backward
    pass (prenet.op_trace); for an op of no module, "(loss)" in the forward pass (the loss the step takes from the
    model's output, prenet.op_trace.training_loss) and "(autograd)" in the backward pass (the loss's gradient)."""
    return [op.module or ("(autograd)" if op.phase == "backward" else "(loss)") for op in ops]


# fp16 trains with a GradScaler (docs/measurement_protocol.md; torch/cuda/amp/grad_scaler.py). Before the optimizer's
# step: the loss scaled (1 kernel), the inverse scale (3) and the overflow flag (1) made, every gradient unscaled
# in place by a multi-tensor pass that reads and writes it and checks it for inf and NaN, and the flag read on the
# host (.item(): the host waits for the device); after it, the scale updated (1 kernel).
GRAD_SCALER_KERNELS = (5, 1)
# PyTorch's multi-tensor launches over one list of tensors: at most 110 tensors and 320 chunks of 65,536 elements
# each (aten/src/ATen/native/cuda/MultiTensorApply.cuh).
MULTI_TENSOR_LIMITS = (110, 320 * 65536)


def _grad_scaler(parameters, native, catalog, device, issue_us, update_gap):
    """((host us, device ms) before the host waits, (host us, device ms) after it) of a GradScaler's work in one
    step with the trainable tensors of sizes `parameters` (GRAD_SCALER_KERNELS); `update_gap`: as _step's, the
    gap a bundle learned in its add kernels."""
    before, after = GRAD_SCALER_KERNELS
    elements = float(sum(parameters))
    # the unscale's traffic as add-shaped work (an add moves 3 elements per element, the unscale 2 per gradient)
    configs = [{"batch": 1, "features": 1}, {"batch": 1, "features": max(1, round(2 * elements / 3))}]
    tiny, unscale = (t["forward_ms"] for t in native.estimate("add", configs, catalog, device, "sgd", "fp32",
                                                              update_gap))
    launches = max(math.ceil(len(parameters) / MULTI_TENSOR_LIMITS[0]), math.ceil(elements / MULTI_TENSOR_LIMITS[1]))
    issue = issue_us(None)
    return (((before + launches + 1) * issue, before * tiny + unscale),  # + the flag's copy to the host
            (after * issue, after * tiny))


@dataclass
class _StepCost:
    """One step's costs, op by op in issue order (the optimizer's update last): host and device milliseconds and
    each op's kind (for the interval's factors); `rows()`: the per-op rows of Estimate.ops; `spread`: per op, the
    CUDA-core time over the estimate (_device_times; None where no interval is stated)."""
    host: object
    device: object
    kinds: list
    update_ms: float
    rows: object
    spread: object = None  # per op (and the update): _device_times's, for the interval's high side
    waits_after: int = None  # the host waits for the device after this many entries (fp16's GradScaler)

    @property
    def device_ms(self):
        return float(self.device.sum())

    @property
    def host_ms(self):
        return float(self.host.sum())


def _step(traced, size, native, catalog, device, optimizer, precision, on_gpu, costs, gaps, gap_in_kernels,
          with_spread=False):
    """The _StepCost of the training step of `size` samples of `traced`. On a GPU each op's host cost is its dispatch
    (measured here), a kernel issue per library call it makes (its kind's typical launch gap, whatever the GPU,
    prenet.launch_gap.issue_us, which includes dispatch; the machine's for ops costed by traffic), and an autograd
    node in the backward pass; module calls are spread over the forward ops; the protocol's frame around them
    (prenet.step_frame) where the host costs hold one: on a GPU its fixed cost, on the CPU also each module call's
    Python. `gap_in_kernels`: the bundle's predictions hold each kind's gap (learned from latencies), to be taken
    off each kernel; `with_spread`: also each op's CUDA-core time over its estimate (_device_times)."""
    import numpy as np

    def runs_here(ops):  # a recurrent layer or cell as this device runs it (Op.runs_on, prenet.fused_recurrent):
        # the CPU's layer operator or a cell's operators, or cuDNN's calls
        return [op for op in ops if op.runs_on in ("", "cuda" if on_gpu else "cpu")]

    ops_step = traced.ops_by_size[size]
    ops = runs_here(ops_step)
    issue_us = functools.lru_cache(None)(lambda kind: launch_gap.issue_us(kind, gaps) if on_gpu else 0.0)
    gaps_ms = launch_gap.kind_gaps_ms(device, gaps) if gap_in_kernels else {}
    works, ms, basis, spread = _device_times(ops, native, catalog, device, OPTIMIZERS[optimizer], precision, gaps_ms,
                                             with_cuda_core=with_spread)
    generator_ns = None if on_gpu else costs.get("bernoulli_element_ns")
    if generator_ns is not None:  # the CPU's generator draws a bernoulli_'s elements one at a time (prenet.host_cost)
        for i, op in enumerate(ops):
            if op.name.startswith("bernoulli"):
                ms[i], basis[i] = 1e-6 * generator_ns * op_costs.numel(op.outputs[0]), "generator"
    # the tensors the step updates (StepOps.updated); an optimizer with a sparse update touches only the rows a sparse
    # gradient holds (StepOps.touched)
    parameters = list(ops_step.touched if optimizer in SPARSE_UPDATES else ops_step.updated)
    # PyTorch's optimizers default to their multi-tensor (foreach) path when every parameter is on a CUDA device:
    # each of the update's kernels then covers all tensors at once; on the CPU they loop over tensors.
    groups = [float(sum(parameters))] if on_gpu and parameters else [float(n) for n in parameters]
    # the update's kernels, as add kernels of a bundle that learned latencies: their measuring host's gap taken off
    update_gap = {"add": 1e-3 * launch_gap.gap_us(device, gaps)} if gap_in_kernels else {}
    element_ns = None if on_gpu else host_cost.update_element_ns(costs, optimizer, sum(parameters))
    if element_ns is not None:  # the CPU's update, timed per element on its host (prenet.host_cost)
        update_ms = 1e-6 * element_ns * float(sum(parameters))
    else:  # its passes over memory as add kernels
        update_ms = sum(native.update_ms(groups, catalog, device, OPTIMIZERS[optimizer], update_gap))
    per_tensor = costs["optimizer_tensor_us"]["adam" if optimizer.startswith("adam") else "sgd_momentum"]
    modules = traced.modules  # the module calls of a step
    forward_ops = max(1, sum(1 for op in ops if op.phase == "forward"))
    frame = costs.get("step_frame")  # the protocol's work around the operators, where measured (prenet.step_frame)
    if on_gpu:
        def launch_us(work):  # the gap's share beyond the dispatch counted per op, for each library call, and
            # the operator adding a cuDNN convolution's bias after it, dispatched and issued as an add
            if work is None:
                return 0.0
            own = work.kernels * max(0.0, issue_us(work.kind if work.how == "layer" else None) - costs["op_us"])
            return own + _bias_kernels_after(work) * max(costs["op_us"], issue_us("add"))

        host_us = [costs["op_us"] + launch_us(w) +
                   (costs["autograd_node_us"] if op.phase == "backward" else modules * costs["module_call_us"] /
                    forward_ops) for op, w in zip(ops, works)]
        # A multi-tensor update launches its kernels once per group of tensors (PyTorch's MultiTensorApply takes
        # 36 to 110 tensors per launch depending on how many lists it updates: 36 taken).
        spec = next(o for o in core().optimizers() if o["name"] == OPTIMIZERS[optimizer])
        update_host_us = (len(parameters) * per_tensor +
                          spec["kernels_per_tensor"] * math.ceil(len(parameters) / 36) * issue_us(None) +
                          # the protocol's frame around the operators (prenet.step_frame), measured on a CPU host:
                          # its fixed cost only, as each op, module call and tensor is counted here on its own
                          (frame["fixed_us"][optimizer] if frame else 0.0))
    else:  # the CPU predictors' times already include each operator's dispatch
        host_us = [0.0] * len(ops)
        if frame:  # the step's frame and each module call's Python, measured on this host (prenet.step_frame)
            update_host_us = (frame["fixed_us"][optimizer] + modules * frame["module_us"] +
                              len(parameters) * frame["tensor_us"][optimizer])
        else:  # host costs measured before the frame was (before 2026-11-26 23:00 UTC)
            update_host_us = modules * costs["module_call_us"] + len(parameters) * per_tensor

    def rows():  # the same ops, with their modules (Traced.attributed)
        ops = runs_here(traced.attributed(size))
        return [{"module": owner, "phase": op.phase, "op": op.name, "kind": w.kind if w else None,
                 "how": b, "inputs": op.inputs, "outputs": op.outputs, "module_input": op.module_input, "ms": t,
                 "host_ms": 1e-3 * h,
                 "config": w.config if w else None, "part": w.part if w else None, "count": w.count if w else 0}
                for op, w, t, b, owner, h in zip(ops, works, ms, basis, _owners(ops), host_us)]

    host, device_ms, kinds = host_us + [update_host_us], ms + [update_ms], [w.kind if w else None for w in works]
    waits_after = None
    if on_gpu and precision == "fp16":  # the GradScaler's work around the update, the host waiting before it
        (pre_host, pre_ms), (post_host, post_ms) = _grad_scaler(parameters, native, catalog, device, issue_us,
                                                                update_gap)
        host, device_ms = host_us + [pre_host, update_host_us, post_host], ms + [pre_ms, update_ms, post_ms]
        waits_after = len(ops) + 1
    kinds += ["add"] * (len(device_ms) - len(kinds))
    spread = np.append(spread, [1.0] * (len(device_ms) - len(ms))) if with_spread else None
    return _StepCost(host=1e-3 * np.array(host), device=np.array(device_ms), kinds=kinds, update_ms=update_ms,
                     rows=rows, spread=spread, waits_after=waits_after)


def _epoch_ms(runs, on_gpu, scale=None, host_scale=1.0):
    """Milliseconds of the steps run in order, given as runs of (step, how many times in a row): on a GPU through
    the launch queue (prenet.launch_queue), on the CPU one after another. `scale(step)`: per-op factors on device
    times, `host_scale` a factor on host times (the interval's bounds); each distinct step is costed once."""
    summaries = {}

    def summary(step):
        if id(step) not in summaries:
            device = step.device if scale is None else step.device * scale(step)
            if not on_gpu:
                summaries[id(step)] = step.host_ms + float(device.sum())
            else:
                host, cut = host_scale * step.host, step.waits_after or len(device)
                summaries[id(step)] = [launch_queue.summarize(host[:cut], device[:cut], bool(step.waits_after))]
                if step.waits_after:
                    summaries[id(step)].append(launch_queue.summarize(host[cut:], device[cut:]))
        return summaries[id(step)]

    if on_gpu:
        return launch_queue.epoch_ms_repeated([(summary(step), count) for step, count in runs])
    return sum(summary(step) * count for step, count in runs)


def _layers_table(rows, catalog, device, step_ms):
    import pandas as pd

    ops = pd.DataFrame(rows)
    flops, bytes_, known = [], [], {}
    for row in rows:
        if row["kind"] and row["config"]:
            key = (row["kind"], tuple(sorted(row["config"].items())))
            if key not in known:
                known[key] = core().layer_features(row["kind"], row["config"], catalog, device)
            features = known[key]
            # the pass of its kind the op runs (an add in the backward phase runs an add's forward kernel)
            part = row["part"]
            flops.append(row["count"] * features[f"{part}_flops"] if row["how"] not in ("traffic", "generator")
                         else 0.0)
            bytes_.append(row["count"] * features[f"{part}_bytes"])
        else:
            flops.append(0.0)
            bytes_.append(0.0)
    ops["flops"], ops["bytes"] = flops, bytes_
    first = ops[ops["phase"] == "forward"].groupby("module", sort=False)
    layers = pd.DataFrame({
        # an op without a kind is None, or NaN where pandas stores strings in its own type (pandas >= 2)
        "kinds": first["kind"].agg(lambda k: ", ".join(sorted({x for x in k if isinstance(x, str) and x}))),
        "input_shape": first["module_input"].first(),
        "operations": ops.groupby("module", sort=False)["op"].count(),
    })
    per_phase = ops.pivot_table(index="module", columns="phase", values="ms", aggfunc="sum", fill_value=0.0)
    layers = layers.join(per_phase, how="outer").rename(columns={"forward": "forward_ms", "backward": "backward_ms"})
    for column in ("forward_ms", "backward_ms"):
        if column not in layers:
            layers[column] = 0.0
    layers["flops"] = ops.groupby("module")["flops"].sum()
    layers["bytes"] = ops.groupby("module")["bytes"].sum()
    layers = layers.fillna({"forward_ms": 0.0, "backward_ms": 0.0, "operations": 0})
    layers["step_share"] = (layers["forward_ms"] + layers["backward_ms"]) / step_ms
    layers = layers.reset_index().rename(columns={"index": "name", "module": "name"})
    return layers[["name", "kinds", "input_shape", "operations", "flops", "bytes", "forward_ms", "backward_ms",
                   "step_share"]], ops


@collector_paused
def predict(model, batch=32, gpu="V100", input_shape=None, example_input=None, dataset_size=1024,
            optimizer="sgd", precision="fp32", bundle=None, progress=True):
    """Predicted training time of `model` (see the module's description). `gpu`: a catalog name (prenet.gpus())
    or "cpu" (one thread of this project's measured host CPU; on another CPU, calibrated to it where
    `prenet calibrate` was run, else with a warning). `progress`: a bar (stderr) while a model that cannot be
    traced on meta tensors is traced for real, once that has taken two seconds. Returns an Estimate."""
    batch, dataset_size, optimizer = _check(model, batch, dataset_size, optimizer)
    # an unknown precision or GPU, or a mixed one on the CPU, fails before tracing
    precision = check_precision(precision, gpu)
    native, catalog, device = resolve(gpu, bundle)
    if (catalog is host_catalog() and not isinstance(native, host_calibration.CalibratedBundle) and
            (other_host := unmeasured_host_warning(device))):
        # attributed to predict's caller, past predict and its collector_paused wrapper
        warnings.warn(f"{other_host}; `prenet calibrate` (two to four minutes) calibrates the predictors to this CPU",
                      stacklevel=3)
    traced = trace_steps(model, batch, dataset_size, input_shape, example_input, precision, progress)
    estimate = estimate_traced(traced, batch, gpu, dataset_size, optimizer, precision, bundle)
    from .memory import training_memory

    estimate.memory_of = functools.partial(training_memory, model, batch, input_shape, example_input, dataset_size,
                                           optimizer, precision)
    return estimate


@dataclass
class Traced:
    """What predict costs on a device, found once (prenet.compare reuses it for every GPU): the operators of a step
    at each batch size an epoch uses (`ops_by_size`), the epoch's batch sizes (`runs`: epoch_runs), how it was
    traced ("meta" or "cpu", prenet.op_trace, and why it was traced for real), and of the model: its module calls in
    a step (`modules`: a module called three times counts three) and the 2-byte dtypes among its weights (the
    tensors a step updates are its StepOps.updated). A meta trace records no module per operator (what a step costs
    does not depend on it, and finding it is a tenth of the trace): `retrace(size)` traces the step again with them
    when per-module tables are first asked for (`attributed`); None where `ops_by_size` has them."""
    ops_by_size: dict
    runs: list
    how: str
    why_real: object
    modules: int
    narrow_weights: list
    retrace: object = None
    # the modules whose gradients are sparse (embeddings with sparse=True), which some optimizers refuse
    sparse_gradients: list = field(default_factory=list)
    _attributed: dict = field(default_factory=dict, repr=False)

    def attributed(self, size):
        """The ops of the step at `size` with the module each belongs to (prenet.op_trace.Op.module)."""
        if self.retrace is None:
            return self.ops_by_size[size]
        if size not in self._attributed:
            again = self.retrace(size)
            if [(op.name, op.inputs) for op in again] != [(op.name, op.inputs) for op in self.ops_by_size[size]]:
                raise ValueError("the model no longer runs the operators it was traced with (changed since "
                                 "predict, or compiling itself as it runs?): predict again for its per-module tables")
            self._attributed[size] = again
        return self._attributed[size]


@collector_paused
def trace_steps(model, batch, dataset_size, input_shape=None, example_input=None, precision="fp32", progress=False):
    """The Traced steps of an epoch of `model`; under a mixed precision, forward and loss are traced with CUDA
    autocast's casts (prenet.autocast_policy); `progress`: a bar over a real trace (op_trace.trace_batches)."""
    dtypes = {p.dtype for p in model.parameters()}
    _check_weight_types(model, dtypes)
    make_inputs = input_maker(model, input_shape, example_input)
    runs = epoch_runs(batch, dataset_size)
    autocast = precision in MIXED_PRECISIONS
    try:
        model = lazy_modules.initialized(model, make_inputs)  # lazy modules not yet run: a copy, with its shapes
        with in_mode(model, True):  # a training step, as the model's own train() sets it up
            ops, how, why = op_trace.trace_batches(model, make_inputs, sorted(size for size, _ in runs), autocast,
                                                   attribute=False, progress=progress)
    except ValueError as error:
        if input_shape is None or len(input_shape) < 2 or input_shape[0] != batch:
            raise
        raise ValueError(f"{error}; input_shape {tuple(input_shape)} begins with the batch size: it is one "
                         f"sample's shape, without the batch dimension (e.g. {tuple(input_shape[1:])})") from error
    dtypes = {op_trace.dtype_names[dtype] for dtype in dtypes}
    return Traced(ops, runs, how, why, ops[runs[0][0]].module_calls, sorted(dtypes & op_costs.NARROW_FLOATS.keys()),
                  _meta_retrace(model, make_inputs, autocast) if how == "meta" else None,
                  [module_label(name, module) for name, module in op_trace.sparse_embeddings(model)])


def _check_weight_types(model, dtypes):
    """ValueError for a model with float64 weights (`dtypes`: its parameters' types): the predictors learned fp32
    kernels (bf16 and fp16 ones through the tensor-core rates), and double precision runs at a GPU's FP64 rate, 1/2
    to 1/64 of its FP32 rate by model, which the catalog does not hold. A warning for complex weights: their
    operators are costed as real ones of the same shapes, where complex arithmetic does about four times the work
    of a product."""
    import torch

    if not any(dtype == torch.float64 or dtype.is_complex for dtype in dtypes):
        return
    weights = [t for t in model.parameters() if t.is_floating_point() or t.is_complex()]
    doubles = sum(t.numel() for t in weights if t.dtype == torch.float64)
    if doubles:
        raise ValueError(f"the model has {doubles:,} float64 weights: prenet predicts fp32, bf16 and fp16 training "
                         "(a GPU runs float64 at its FP64 rate, 1/2 to 1/64 of its FP32 rate, which the catalog does "
                         "not hold); predict the model as it would train in float32 (model.float())")
    complex_weights = sum(t.numel() for t in weights if t.is_complex())
    if complex_weights:
        warnings.warn(f"the model has {complex_weights:,} complex weights: their operators are costed as real ones of "
                      "the same shapes and bytes, where a complex product does about four times the arithmetic",
                      stacklevel=6)  # past trace_steps, predict or compare, and their wrappers


def _meta_retrace(model, make_inputs, autocast):
    """size -> the ops of the model's step at that size on meta tensors, each with its module (Traced.retrace).
    It holds the model (and an example input), so that an estimate of a model built in the call itself, as in
    `prenet.predict(resnet50(), ...).layers`, can still give its tables."""
    def retrace(size):
        with in_mode(model, True):
            return op_trace.trace_meta(model, make_inputs, size, autocast)

    return retrace


@collector_paused
def estimate_traced(traced, batch, gpu, dataset_size, optimizer="sgd", precision="fp32", bundle=None,
                    host_costs=None, calibrated=True):
    """The Estimate of a model's Traced steps on `gpu`; UnsupportedPrecision where the GPU lacks the precision's
    type, or that of the model's own 2-byte weights. `host_costs`: used instead of the host's (prenet.host_cost);
    `calibrated`: False for the packaged bundles, as fitted (prenet.predictors.resolve)."""
    precision = check_precision(precision, gpu)
    optimizer = optimizer_name(optimizer)
    if traced.sparse_gradients and optimizer in DENSE_ONLY_OPTIMIZERS:
        names = ", ".join(map(repr, traced.sparse_gradients))
        raise ValueError(f"the model's embeddings {names} have sparse gradients (sparse=True), which PyTorch's "
                         f"{DENSE_ONLY_OPTIMIZERS[optimizer]} refuses; train with sgd or adagrad (or "
                         "torch.optim.SparseAdam for those layers), or give them sparse=False")
    for dtype in traced.narrow_weights:
        try:  # their operators run kernels of that type (prenet.op_costs.narrow_precision)
            check_precision(op_costs.NARROW_FLOATS[dtype], gpu)
        except ValueError as error:
            raise type(error)(f"the model's weights are {dtype}: {error}") from None
    # `device`: the one timed, `gpu`'s fitted twin where it has one
    native, catalog, device = resolve(gpu, bundle, calibrated)
    on_gpu = catalog is not host_catalog()
    asked = device_catalog(gpu)[1]
    calibrated = isinstance(native, (host_calibration.CalibratedBundle, gpu_calibration.CalibratedGpuBundle))
    costs = host_costs or (native.calibration.host_costs if calibrated and native.calibration.host_costs
                           else host_cost.load(gpu=on_gpu))
    gaps = launch_gap.load() if on_gpu else None
    # A bundle fitted on latencies holds the gap in every kernel it predicts: taken off; one fitted on device time
    # does not.
    folder = gpu_bundle_folder(bundle, device) if on_gpu else None
    in_kernels = on_gpu and learned_timing(str(folder)) == "latency"
    # the seen-GPU bundle has no leave-one-device-out errors of its own: the unseen one's are stated (wider)
    factors = on_gpu and (uncertainty.interval_factors(folder) or uncertainty.interval_factors(PACKAGED_UNSEEN_BUNDLE))
    if factors and isinstance(native, gpu_calibration.CalibratedGpuBundle):  # narrower where timed on the GPU
        factors = gpu_calibration.interval_factors(factors, native.calibration)
    steps = {size: _step(traced, size, native, catalog, device, optimizer, precision, on_gpu, costs, gaps,
                         in_kernels, with_spread=bool(factors)) for size in traced.ops_by_size}
    epoch = [(steps[size], count) for size, count in traced.runs]
    # A step: the steady state of the epoch's full-size steps (the last, partial one counts in the epoch only).
    step, full = epoch[0]
    step_ms = _epoch_ms(epoch[:1], on_gpu) / full
    epoch_ms = _epoch_ms(epoch, on_gpu)
    interval = reach = None
    if on_gpu:
        reach = uncertainty.extrapolation(asked, uncertainty.fitted_devices(folder))
        if device != asked:
            reach["timed_as"] = device
        served = native.bundle if isinstance(native, gpu_calibration.CalibratedGpuBundle) else native
        if isinstance(served, SiblingBundle):  # calibrated or not
            reach["timed_through"] = served.sibling
        if reach.get("other_vendor"):
            # attributed to the caller of predict or compare, past their and this function's collector_paused wrappers
            warnings.warn(f"{asked}: {OTHER_VENDOR.format(vendor=reach['other_vendor'])}", stacklevel=5)
        if factors:
            # per op: its kind's leave-one-device-out factor, and on the high side as slow as CUDA cores where it
            # runs on tensor cores; the host's side as far as the issue cost differs between the measured hosts
            host = launch_gap.host_spread(gaps)

            def scale(side):
                return lambda s: uncertainty.kind_factors(s.kinds, factors, side) * (s.spread if side else 1.0)

            interval = tuple(1e-3 * _epoch_ms(epoch, on_gpu, scale(side), host[side]) for side in (0, 1))
    return Estimate(gpu=asked, batch=batch, dataset_size=dataset_size, optimizer=optimizer, precision=precision,
                    step_seconds=1e-3 * step_ms, epoch_seconds=1e-3 * epoch_ms,
                    iterations=sum(count for _, count in traced.runs),
                    device_ms=step.device_ms, host_ms=step.host_ms, optimizer_ms=step.update_ms,
                    tables=lambda: _layers_table(step.rows(), catalog, device, step_ms), interval_seconds=interval,
                    extrapolation=reach, traced=traced.how, traced_for_real_because=traced.why_real,
                    calibrated=native.calibration.describe() if calibrated else None,
                    narrow_weights=tuple(traced.narrow_weights))
