"""Which implementation PyTorch's CPU convolutions run, per configuration: the CPU's analogue of the kernel cuBLAS
picks for a linear layer on a GPU (training.KernelChoiceModel learns either from the configuration).

PyTorch 1.13 runs a float32 convolution on the CPU through oneDNN (mkldnn) unless its own rule sends it to its
native im2col-and-GEMM kernel (slow_conv2d: a 1x1 unstrided kernel at a batch under 16 on one thread, or a tiny
input; aten/src/ATen/native/Convolution.cpp, use_mkldnn), and oneDNN picks among its implementations by shape and
instruction set: blocked direct kernels (`jit:avx512_core`, which reorder every tensor to 16-channel blocks and
back), depthwise ones (`jit_dw`), or an im2col GEMM (`gemm:jit`), separately for the forward pass and the two
gradients (a depthwise convolution's weight gradient falls to the GEMM, group by group). Each runs at its own
efficiency, which a regressor of the configuration alone learns poorly: learning it (a classifier picks the label
from the configuration, 99% right on held-out ones) takes the CPU set's conv2d training step from 13.4% / 42.6% to
11.8% / 33.8% (bench/results/cpu_conv_kernels.md).

The label of a configuration is found by running it once, forward and backward, on one thread, with oneDNN's
verbose log on (ONEDNN_VERBOSE) and its instruction set capped at the measuring host's (ONEDNN_MAX_CPU_ISA: the
implementations depend on it): "<forward>|<input gradient>|<weight gradient>", each oneDNN's implementation name or
"native" where PyTorch's own kernel ran. Labels are data (data/cpu_kernels/, documented in data/README.md), made by
`python -m prenet.onednn_kernels`, resumable.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

# The keys of a convolution configuration, as the CPU set's conv2d rows hold them.
CONV_KEYS = ("batch", "in_channels", "out_channels", "kernel_size", "stride", "padding", "height", "width", "groups",
             "bias")
# Where no oneDNN convolution ran for a pass: PyTorch's own kernel (slow_conv2d and its backward).
NATIVE = "native"
# oneDNN's names of the passes a training step runs (its verbose log's prop_kind), in label order.
PASSES = ("forward_training", "backward_data", "backward_weights")
# The instruction set oneDNN may use on the CPU set's host, an AMD EPYC Zen 5: AVX-512 with VNNI and bfloat16,
# no AMX (oneDNN's names; data/hosts.csv).
EPYC_ZEN5_ISA = "AVX512_CORE_BF16"
# Configurations a worker process labels before its results are written (a killed run loses at most these).
CHUNK = 100
MARKER = "prenet-onednn-config"


def label_of(lines):
    """The label of one configuration from the oneDNN verbose lines its step printed."""
    found = {}
    for line in lines:
        fields = line.split(",")
        if len(fields) > 5 and fields[:2] == ["onednn_verbose", "exec"] and fields[3] == "convolution":
            found.setdefault(fields[5], fields[4])
    return "|".join(found.get(name, NATIVE) for name in PASSES)


def _worker():
    """Reads configurations (JSON lines) on stdin, runs each one's training step, and writes MARKER lines between
    oneDNN's log lines on stdout (oneDNN writes with C's stdio: flushed before each marker)."""
    import ctypes

    import torch

    torch.set_num_threads(1)
    libc = ctypes.CDLL(None)
    for line in sys.stdin:
        c = json.loads(line)
        conv = torch.nn.Conv2d(c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"], c["padding"],
                               groups=c["groups"], bias=bool(c["bias"]))
        x = torch.randn(c["batch"], c["in_channels"], c["height"], c["width"], requires_grad=True)
        conv(x).sum().backward()
        libc.fflush(None)
        os.write(1, f"{MARKER} {line.strip()}\n".encode())


def label_configurations(configs, isa=EPYC_ZEN5_ISA):
    """[label] of each configuration of `configs` (dicts of CONV_KEYS), run in a worker process with oneDNN capped
    at `isa`; RuntimeError naming the failure where the worker fails."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1", ONEDNN_MAX_CPU_ISA=isa, DNNL_MAX_CPU_ISA=isa,
               OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "prenet.onednn_kernels", "--worker"], env=env, text=True,
                         input="".join(json.dumps({k: int(c[k]) for k in CONV_KEYS}) + "\n" for c in configs),
                         capture_output=True)
    if run.returncode:
        raise RuntimeError(f"the oneDNN labelling worker failed (exit {run.returncode}): {run.stderr[-2000:]}")
    labels, lines = [], []
    for line in run.stdout.splitlines():
        if line.startswith(MARKER):
            labels.append(label_of(lines))
            lines = []
        else:
            lines.append(line)
    if len(labels) != len(configs):
        raise RuntimeError(f"the oneDNN labelling worker labelled {len(labels)} of {len(configs)} configurations")
    return labels


def environment(isa):
    """The columns every label row carries: what made it (oneDNN's version as torch's build configuration names
    it, torch 1.13 having no accessor for it)."""
    import platform
    import re

    import torch

    from .host_cost import cpu_model

    onednn = re.search(r"MKL-DNN v([\d.]+)", torch.__config__.show())
    return {"isa_cap": isa, "onednn": onednn.group(1) if onednn else "unknown", "torch": torch.__version__,
            "labelled_on": cpu_model(), "machine": platform.machine()}


def load_labels(path):
    """{configuration tuple (CONV_KEYS order): label} of a label file; {} where it does not exist."""
    if not Path(path).is_file():
        return {}
    with open(path, newline="") as handle:
        return {tuple(int(row[k]) for k in CONV_KEYS): row["kernel"] for row in csv.DictReader(handle)}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Label the CPU set's convolutions with the implementation "
                                                 "PyTorch and oneDNN run for them (appends; resumable)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help="the CPU set's folder (default: data/cpu; its companions are read too)")
    parser.add_argument("--isa", default=EPYC_ZEN5_ISA,
                        help=f"oneDNN's instruction set cap: the measuring host's (default {EPYC_ZEN5_ISA})")
    parser.add_argument("--out", default=None, help="label file (default: <CPU set>_kernels/conv2d.csv)")
    args = parser.parse_args(argv)
    if args.worker:
        return _worker()
    from .datasets import cpu_folder, cpu_folders, load_harness_rows
    from .progress import progress_bar

    folder = Path(args.data) if args.data else cpu_folder()
    out = Path(args.out) if args.out else folder.with_name(f"{folder.name}_kernels") / "conv2d.csv"
    frame = load_harness_rows(cpu_folders(folder))["conv2d"]
    configs = sorted({tuple(int(v) for v in row) for row in frame[list(CONV_KEYS)].itertuples(index=False)})
    done = load_labels(out)
    todo = [dict(zip(CONV_KEYS, c)) for c in configs if c not in done]
    made = environment(args.isa)
    columns = [*CONV_KEYS, "kernel", *made]
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = not out.is_file()
    bar = progress_bar(len(configs), "labelling convolutions", unit="configuration", initial=len(configs) - len(todo))
    with open(out, "a", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        if fresh:
            writer.writeheader()
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start:start + CHUNK]
            for config, label in zip(chunk, label_configurations(chunk, args.isa)):
                writer.writerow({**config, "kernel": label, **made})
            handle.flush()
            bar.update(len(chunk))
    bar.close()
    labels = load_labels(out)
    print(f"{len(labels)} configurations labelled in {out}:")
    for label, count in Counter(labels.values()).most_common():
        print(f"  {count:5d}  {label}")


if __name__ == "__main__":
    main()
