"""Collection of layer timings: random configurations timed by the native harness, appended to a CSV file.

Resumable: rows are keyed by their sample index; started again with the same arguments, a collection skips the
indices already in the file, drops a half-written last line, and continues. A configuration that fails
(invalid, out of memory, a crash or a hang of the harness) is recorded with status "failed" and its reason.
"""
import csv
import fcntl
import io
import json
import os
import select
import subprocess
import time
from pathlib import Path

from .progress import progress_bar
from .sampling import sample_config, sampler

# Configuration keys of every harness kind, in column order (the union of what the samplers draw).
CONFIG_COLUMNS = ["batch", "seq_len", "in_features", "out_features", "activation", "in_channels", "out_channels",
                  "kernel_size", "stride", "padding", "height", "width", "groups", "bias", "input_size",
                  "hidden_size", "num_layers", "bidirectional", "embed_dim", "num_heads", "num_embeddings",
                  "embedding_dim", "normalized_shape", "channels", "features", "op", "m", "k", "n", "optimizer"]
_STATS = ["", "_p25", "_p75", "_min", "_max"]
TIMING_COLUMNS = ([f"forward{s}_ms" for s in _STATS] + ["forward_reps", "forward_converged"]
                  + [f"train_{phase}{s}_ms" for phase in ("forward", "backward", "optimizer", "step") for s in _STATS]
                  + ["train_reps", "train_converged", "measure_s"])
# The host's speed as a CPU row was timed: a fixed product and a fixed copy, timed right after it by the harness
# (cpp/harness/speed_reference.hpp); empty on a GPU.
SPEED_COLUMNS = ["reference_matmul_ms", "reference_copy_ms"]
ENVIRONMENT_COLUMNS = ["device", "device_name", "device_units", "device_units_kind", "host_cpu", "threads", "blas",
                       "torch_version", "cuda_driver", "cuda_runtime", "cudnn", "dtype"]
COLUMNS = (["sample", "kind", "status", "error"] + CONFIG_COLUMNS + TIMING_COLUMNS + SPEED_COLUMNS + ENVIRONMENT_COLUMNS
           + ["timestamp"])
# The columns of files written before the speed reference (data/cpu, data/gpu): still read, and appended to in
# their own columns.
LEGACY_COLUMNS = [c for c in COLUMNS if c not in SPEED_COLUMNS]


class HarnessError(RuntimeError):
    pass


class CollectionBusy(RuntimeError):
    """Another process is collecting into the same file."""


def harness_path():
    """The prenet-harness executable: PRENET_HARNESS, else the one installed with the package."""
    path = Path(os.environ.get("PRENET_HARNESS", Path(__file__).resolve().parent / "prenet-harness"))
    if not path.is_file():
        raise FileNotFoundError(f"prenet-harness not found at {path}: build prenet with LibTorch "
                                "(PRENET_BUILD_HARNESS=ON, the default) or set PRENET_HARNESS")
    return path


class Harness:
    """A running prenet-harness process answering one request at a time."""

    def __init__(self, device="cpu", threads=None, extra_args=()):
        self.args = [str(harness_path()), "--device", device, *extra_args]
        self.env = dict(os.environ)
        if threads:
            self.args += ["--threads", str(threads)]
            # OpenBLAS keeps its own thread pool, sized from the environment when the library loads.
            self.env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        self.process = None
        self.environment = None
        self.start()

    def start(self):
        self.process = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1, env=self.env)
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise HarnessError(f"prenet-harness refused to start (exit {self.process.returncode}): "
                               f"{self.process.stderr.read().strip()}")
        self.environment = json.loads(line)
        self.environment.update(_python_torch_versions(self.environment.get("torch_version", "")))

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def time(self, request_id, kind, config, timeout):
        """The harness's result dict for one configuration; a crash or hang becomes a failed result."""
        fields = " ".join(f"{k}={v}" for k, v in config.items())
        try:
            self.process.stdin.write(f"id={request_id} kind={kind} {fields}\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if ready:  # end of output: the harness died on this configuration
            code = self.process.wait()
            reason = f"harness died with signal {-code}" if code < 0 else f"harness exited with code {code}"
        else:
            reason = f"timed out after {timeout:g} s"
        self.stop()
        self.start()
        return {"status": "failed", "error": reason}


def _python_torch_versions(harness_torch):
    """CUDA runtime and cuDNN versions from Python's torch, when it is the torch the harness was built against
    (as on a GPU machine that builds the harness from its torch wheel)."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.__version__.startswith(harness_torch) or not torch.version.cuda:
        return {}
    return {"cuda_runtime": torch.version.cuda, "cudnn": torch.backends.cudnn.version() or ""}


def _completed_samples(path):
    """(sample indices already in `path`, its columns: COLUMNS or LEGACY_COLUMNS); truncates a half-written last
    line left by a kill."""
    if not path.exists() or path.stat().st_size == 0:
        return set(), COLUMNS
    with open(path, "rb+") as f:
        data = f.read()
        if not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)
            data = data[: data.rfind(b"\n") + 1]
    reader = csv.DictReader(io.StringIO(data.decode()))
    if reader.fieldnames not in (COLUMNS, LEGACY_COLUMNS):
        raise ValueError(f"{path} has other columns than this version of prenet writes; use a new --out file")
    return {int(row["sample"]) for row in reader}, reader.fieldnames


def _drop_samples(path, dropped):
    """Rewrites `path` without the rows of the sample indices `dropped` (the rest byte for byte, in order), through
    a temporary file renamed over it."""
    if not path.exists():
        return
    lines = path.read_bytes().splitlines(keepends=True)  # bytes: the csv module's line ends kept as written
    kept = lines[:1] + [line for line in lines[1:] if int(line.split(b",", 1)[0]) not in dropped]
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(b"".join(kept))
    partial.replace(path)


def collect(kind, samples, out, device="cpu", seed=0, threads=None, timeout=300.0, max_minutes=None,
            progress=True, harness_args=(), again=(), profile="wide"):
    """Times configurations 0..samples-1 of `kind` into the CSV file `out`; returns rows written this run.
    `again`: (first, last) ranges of sample indices whose rows are dropped from `out` and timed again (as when
    the machine was found to have changed speed while they were collected); `profile`: the sampling profile
    (prenet.sampling.PROFILES)."""
    sampler(kind, profile)  # an unknown profile or kind fails before any file is touched
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    for first, last in again:
        if not 0 <= first <= last < samples:
            raise ValueError(f"cannot time samples {first}-{last} again: a range within 0-{samples - 1}, first "
                             "<= last, is needed")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = open(out.with_name(out.name + ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise CollectionBusy(f"another collection is writing {out}") from None
    try:
        done, columns = _completed_samples(out)
        if again:
            _drop_samples(out, {i for first, last in again for i in range(first, last + 1)} & done)
            done, columns = _completed_samples(out)
        pending = [i for i in range(samples) if i not in done]
        if not pending:
            return 0
        return _run(kind, pending, samples, len(done), out, device, seed, threads, timeout, max_minutes, progress,
                    harness_args, profile, columns)
    finally:
        lock.close()


def _run(kind, pending, samples, already, out, device, seed, threads, timeout, max_minutes, progress, harness_args,
         profile="wide", columns=COLUMNS):
    harness = Harness(device, threads, harness_args)
    environment = {k: harness.environment.get(k, "") for k in ENVIRONMENT_COLUMNS}
    deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
    bar = progress_bar(samples, f"{kind} on {device}", progress, unit="config", initial=already)
    written = 0
    new_file = not out.exists() or out.stat().st_size == 0
    try:
        with open(out, "a", newline="") as f:
            if new_file:
                csv.DictWriter(f, fieldnames=columns).writeheader()
            for index in pending:
                if deadline and time.monotonic() > deadline:
                    break
                config = sample_config(kind, index, seed=seed, device=device, profile=profile)
                row = result_row(kind, index, config, environment, harness.time(index, kind, config, timeout))
                f.write(_csv_line(row, columns))
                f.flush()
                os.fsync(f.fileno())
                written += 1
                bar.update(1)
    finally:
        bar.close()
        harness.stop()
    return written


def result_row(kind, index, config, environment, result):
    """One CSV row (a dict of COLUMNS) of configuration number `index` of `kind`: its configuration, the harness's
    `environment` and `result`, and the time it was written."""
    measured = TIMING_COLUMNS + SPEED_COLUMNS
    return {**config, **environment, **{k: v for k, v in result.items() if k in measured}, "sample": index,
            "kind": kind, "status": result["status"], "error": result.get("error", ""),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _csv_line(row, columns=COLUMNS):
    """One complete CSV line of `columns`, so that each row reaches the file in a single write."""
    buffer = io.StringIO()
    csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore").writerow(row)
    return buffer.getvalue()


def collect_all(kinds, samples, out_dir, device="cpu", round_size=25, max_minutes=None, **options):
    """Collects every kind into out_dir/<kind>.csv in rounds of `round_size`, so that a time budget
    spreads over all kinds; returns rows written per kind. A kind that another process is collecting is
    skipped in that round, so several processes (one per core) can share the work."""
    deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
    written = {kind: 0 for kind in kinds}
    for target in range(round_size, samples + round_size, round_size):
        for kind in kinds:
            left = (deadline - time.monotonic()) / 60 if deadline else None
            if left is not None and left <= 0:
                return written
            try:
                written[kind] += collect(kind, min(target, samples), Path(out_dir) / f"{kind}.csv", device=device,
                                         max_minutes=left, **options)
            except CollectionBusy:
                continue
    return written
