"""prenet.measure: the measured epoch time of a model, exactly as docs/measurement_protocol.md defines the ground truth
that every prediction is judged against, so that a user can check a prediction on their own machine.

N synthetic samples resident on the device, consumed in order in batches of B (the last partial batch kept);
one step = zero_grad(set_to_none=True), forward, loss, backward, optimizer step; the loss is the model's own when
it returns one (Hugging Face models called with labels=), else cross-entropy on the logits (per token for
sequence outputs) against random labels. One warm-up epoch, then `repeats` (>= 3) timed epochs, each between two
device synchronisations on the host's monotonic clock; the median epoch is reported with min and max.
"""
import contextlib
import platform
import statistics
import time
import warnings
from dataclasses import dataclass, field

from . import host_memory
from .estimate import _check, epoch_batches, epoch_steps_text
from .host_cost import cpu_model
from .lazy_modules import initialized
from .model_inputs import call, input_maker, map_batch, map_tensors, tensors
from .model_state import model_kept
from .op_trace import training_loss
from .predictors import check_precision
from .progress import progress_bar
from .sync_batchnorm import as_on_one_gpu

# Precisions as prenet.predict names them (prenet.predictors.PRECISIONS): "fp32" touches nothing (PyTorch's
# defaults), "fp32_strict" turns TF32 off for cuDNN and matmuls, "tf32" turns it on for both, "bf16" / "fp16"
# autocast forward and loss (fp16 with a GradScaler).
TF32_FLAGS = {"fp32_strict": False, "tf32": True}  # cuDNN's and matmuls' allow_tf32 set for the epochs


@dataclass
class Measurement:
    """A measured training time, with the fields of an Estimate where they apply."""
    device: str
    batch: int
    dataset_size: int
    optimizer: str
    precision: str
    epoch_seconds: float
    epoch_min_seconds: float
    epoch_max_seconds: float
    step_seconds: float
    iterations: int
    epochs: list = field(repr=False)
    environment: dict = field(repr=False)

    def __repr__(self):
        kept = "; freed memory kept" if self.environment.get("allocator") == host_memory.KEPT else ""
        return (f"<prenet measurement: {self.epoch_seconds:.3f} s per epoch (min {self.epoch_min_seconds:.3f}, max "
                f"{self.epoch_max_seconds:.3f}; {epoch_steps_text(self.batch, self.dataset_size)}) on {self.device}; "
                f"{self.optimizer}, {self.precision}{kept}>")


def make_optimizer(name, parameters):
    """The protocol's optimizers: 'sgd' is SGD with momentum 0.9; default hyper-parameters otherwise."""
    import torch

    builders = {"sgd": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9),
                "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, nesterov=True),
                "sgd_plain": lambda p: torch.optim.SGD(p, lr=1e-3), "adam": torch.optim.Adam,
                "adamw": torch.optim.AdamW, "rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad}
    return builders[name](parameters)


def _grad_scaler():
    """A CUDA GradScaler: torch.amp's where it has one (torch >= 2.3; torch.cuda.amp's is deprecated there)."""
    import torch

    scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    return scaler("cuda") if scaler is not None else torch.cuda.amp.GradScaler()


def _environment(model, device):
    import torch
    from threadpoolctl import threadpool_info

    env = {"host_cpu": cpu_model(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available()
           else None, "params": sum(p.numel() for p in model.parameters()), "model": type(model).__name__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(device_name=props.name, device_units=props.multi_processor_count, device_units_kind="SMs",
                   peak_memory_mib=torch.cuda.max_memory_allocated(device) / 2**20)
    else:
        env.update(device_name=env["host_cpu"], device_units=torch.get_num_threads(), device_units_kind="threads",
                   library_threads={pool["internal_api"]: pool["num_threads"] for pool in threadpool_info()},
                   allocator=host_memory.allocator(), first_touch_us_per_page=host_memory.first_touch_us_per_page())
    return env


@contextlib.contextmanager
def cpu_threads(threads):
    """PyTorch's intra-op threads and every native thread pool (the BLAS library's own among them, which
    torch.set_num_threads leaves alone) at `threads` inside, restored after; None: as they are."""
    import torch
    from threadpoolctl import threadpool_limits

    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def measure(model, batch=32, input_shape=None, example_input=None, dataset_size=1024, optimizer="sgd",
            precision="fp32", device="cuda", repeats=3, threads=None, progress=False, keep_memory=False):
    """Measures the model's training epoch on `device` ("cuda", "cuda:N" or "cpu") by the protocol; `progress`: a
    bar over the epochs (the warm-up and the timed ones), moved between them. `threads` (device "cpu"): the CPU
    threads it runs on, PyTorch's and the BLAS library's alike (None: as they are); prenet.predict(gpu="cpu")
    predicts one thread, so compare it with threads=1. The environment records the threads of every native thread
    pool, how the C library treats freed memory, what faulting in a fresh page costs here and how many pages a step
    faulted in (page_faults_per_step, the median over the timed epochs; None where the system does not count them).
    `keep_memory` (device "cpu", glibc): keep freed memory for reuse, for the rest of the process, as PyTorch's
    caching allocator does on a GPU (prenet.host_memory): where fresh pages are costly (a virtual machine) the
    default allocator's steps are slower than their kernels, which is what prenet.predict times. The epochs train
    the model on random data; afterwards it is as it was (weights and their device, gradients, modes, random number
    generators; prenet.model_state), at the cost of a copy of its weights in host memory while it runs."""
    import torch

    batch, dataset_size, optimizer = _check(model, batch, dataset_size, optimizer)
    precision = check_precision(precision)
    if not isinstance(repeats, int) or repeats < 3:
        raise ValueError(f"repeats must be an integer >= 3 (the protocol times at least 3 epochs), got {repeats!r}")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {str(device)!r}")
    if threads is not None and (device.type != "cpu" or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads is a positive integer for device='cpu' (None leaves them as they are), got "
                         f"{threads!r} for device {str(device)!r}")
    if keep_memory and device.type != "cpu":
        raise ValueError("keep_memory is for device='cpu' (on a GPU, PyTorch's caching allocator keeps freed memory "
                         f"already), got device {str(device)!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available on this machine; measure with device='cpu' or on a GPU machine")
    cuda_devices = ([device.index if device.index is not None else torch.cuda.current_device()]
                    if device.type == "cuda" else [])
    make_inputs = input_maker(model, input_shape, example_input)
    model = initialized(model, make_inputs)  # lazy modules: a copy, shaped
    _check_resident(make_inputs, dataset_size, device)
    sizes = epoch_batches(batch, dataset_size)  # as many as the resident data's batches
    if keep_memory:
        host_memory.keep_freed_memory()
    # a model converted to SyncBatchNorm trains as on one GPU, as torch 2 runs it without a process group (torch
    # 1.13's refuses CPU tensors, and asks for a process group on a GPU)
    with model_kept(model, cuda_devices), as_on_one_gpu(model):
        bar = progress_bar(1 + repeats, f"measuring {type(model).__name__} on {device}", progress, unit="epoch")
        try:
            times, env = _timed_epochs(model.to(device).train(), device, sizes, input_shape, example_input,
                                       optimizer, precision, repeats, threads, bar.update)
        finally:
            bar.close()
    median = statistics.median(times)
    faults, page_us = env.get("page_faults_per_step"), env.get("first_touch_us_per_page")
    fault_seconds = None if faults is None or page_us is None else 1e-6 * faults * page_us
    if (env.get("allocator") == host_memory.DEFAULT and host_memory.costly_pages(page_us) and
            (fault_seconds is None or fault_seconds >= NOTABLE_FAULT_SHARE * median / len(sizes))):
        share = ("" if fault_seconds is None else
                 f" (here {faults:,.0f} a step: about {fault_seconds:.3f} s of its {median / len(sizes):.3f} s)")
        warnings.warn(f"faulting in a fresh page costs {env['first_touch_us_per_page']:.1f} us on this machine (bare "
                      "metal: about 0.1-0.3 us), and with the C library's default allocator a step's tensors land on "
                      f"fresh pages{share}: this measurement includes those faults, which prenet.predict does not "
                      "model; keep_memory=True measures without them", stacklevel=2)
    env.update(precision=precision, optimizer=optimizer, batch=batch, dataset_size=dataset_size,
               python=platform.python_version())
    return Measurement(device=env["device_name"], batch=batch, dataset_size=dataset_size, optimizer=optimizer,
                       precision=precision, epoch_seconds=median, epoch_min_seconds=min(times),
                       epoch_max_seconds=max(times), step_seconds=median / len(sizes), iterations=len(sizes),
                       epochs=times, environment=env)


# Page faults worth a warning where pages are costly: this share of a step's time or more.
NOTABLE_FAULT_SHARE = 0.05


def _check_resident(make_inputs, dataset_size, device):
    """ValueError where the protocol's resident data set (`dataset_size` samples of `make_inputs`, made on the CPU,
    then moved to `device`) needs more memory than this machine, or the GPU, has available, naming both sizes."""
    import torch

    # one sample's bytes times the samples (each tensor's batch dimension repeats a sample, each list holds one item
    # per sample): a data set of 10^10 samples is never built, not even on meta
    need = dataset_size * sum(t.numel() * t.element_size() for t in tensors(make_inputs(1, "meta")))
    free = {"this machine's memory": available_memory()}
    if device.type == "cuda":
        free[f"{device}'s memory"] = torch.cuda.mem_get_info(device)[0]
    for where, available in free.items():
        if available is not None and need > available:
            raise ValueError(f"the protocol keeps the data set resident: {dataset_size:,} samples take "
                             f"{need / 2 ** 30:,.1f} GiB, more than {where} has available ({available / 2 ** 30:,.1f} "
                             "GiB); measure fewer samples (dataset_size): an epoch's time grows with its steps, and "
                             "prenet.predict takes the same dataset_size")


def available_memory(meminfo="/proc/meminfo"):
    """Bytes of memory available to a new allocation without swapping (Linux's MemAvailable); None where the system
    does not say."""
    try:
        with open(meminfo) as lines:
            for line in lines:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def minor_faults():
    """Pages this process has faulted in so far without reading a disk (getrusage's ru_minflt); None where the
    system does not count them (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class ResidentLabels:
    """The protocol's class labels, resident with the data: drawn once for the whole data set, by the warm-up
    epoch's first step (the positions of a sample that take a label, and the classes, are known from the model's
    output only), and read by each step as its batch's slice, a view (no kernel in the timed epochs)."""

    def __init__(self, dataset_size):
        self.dataset_size, self.labels = dataset_size, None

    def of_batch(self, start, size):
        """training_loss's `labels` for the batch of `size` samples from sample `start`."""
        import torch

        def take(count, classes, device):
            per_sample, rest = divmod(count, size)
            if rest or not per_sample:  # an output not laid out by sample: labels drawn for it
                return torch.randint(classes, (count,), device=device)
            if self.labels is None:
                self.labels = torch.randint(classes, (self.dataset_size * per_sample,), device=device)
            return self.labels[start * per_sample:(start + size) * per_sample]

        return take


def _timed_epochs(model, device, sizes, input_shape, example_input, optimizer, precision, repeats, threads,
                  epoch_done):
    """(seconds of each timed epoch, environment) of training `model`, already on `device`, by the protocol, in
    batches of `sizes` (epoch_batches); `epoch_done(1)` is called after each epoch, outside its timing."""
    import torch

    make_inputs = input_maker(model, input_shape, example_input)
    data = make_inputs(sum(sizes))  # resident on the device, consumed in order
    data = map_tensors(lambda tensor: tensor.to(device), data)
    opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = _grad_scaler() if precision == "fp16" and device.type == "cuda" else None

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    labels = ResidentLabels(sum(sizes))

    def epoch():
        start = 0
        for size in sizes:
            chunk = map_batch(data, lambda part: part[start:start + size], lambda part: part[start:start + size])
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                output = call(model, chunk)
                loss = training_loss(output, labels=labels.of_batch(start, size))
            start += size
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()

    if device.type == "cuda":  # the peak this measurement reaches, not an earlier one of the process
        torch.cuda.reset_peak_memory_stats(device)
    flags = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    if precision in TF32_FLAGS:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = TF32_FLAGS[precision]
    try:
        with cpu_threads(threads):
            epoch()  # warm-up
            synchronize()
            epoch_done(1)
            times, faults = [], []
            for _ in range(repeats):
                synchronize()
                faulted, started = minor_faults(), time.monotonic()
                epoch()
                synchronize()
                times.append(time.monotonic() - started)
                faults.append(None if faulted is None else minor_faults() - faulted)
                epoch_done(1)
            env = _environment(model, device)
            # the pages a step faults in afresh (each costs first_touch_us_per_page here), over the timed epochs
            env["page_faults_per_step"] = (None if None in faults else
                                           statistics.median(faults) / len(sizes))
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = flags
    return times, env
