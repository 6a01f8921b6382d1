"""How much of a measured operator latency is the host's, from the GPU operator set itself.

NeuSight timed each operator alone, between two CUDA events around one Python call (its collection code: the
layers through their nn.Module, nn.Linear, nn.Conv2d, nn.LayerNorm, nn.Softmax, nn.ReLU, nn.GELU; add as
torch.add; the mean of the 5 fastest of 25 calls, so the least disturbed host). The device timestamps the
start event at once, then idles until the host has issued the operator (Python call, dispatch, allocation,
launch), so every latency = the host's issue time (the *gap*) + the kernel's device time. For the streaming
elementwise operators (add, relu, gelu) whose kernels outlast the gap, latency is exactly linear in the bytes
moved: latency = gap + bytes / bandwidth (median residual 0.1-0.5% on every GPU). Below about 2.5x the smallest
latency the kernel ends before the host records the end event, and the latency only bounds the kernel.

The fitted gap, per GPU machine (median over the three operators), is the host's cost of issuing one kernel in a
training step (prenet.estimate); where the predictors learned latencies, it is also taken off every predicted
kernel (device time = latency - gap, never below the kernel's roofline bound). Fitting device time instead
(prenet.datasets.load_neusight(timing="device")) takes each operator's own gap.

Issuing costs differ by operator on one host: the cheapest configurations of a kind sit on a flat floor (on the
V100 host 45 linears of 0.5 to 144 MFLOP all measured 63.3-64.5 us, 244 layer norms of 2 thousand to 1.3 million
elements 57.5-58.6 us, the least add 31.8 us), a fixed cost that kernels that small do not have on the device.
A kind without a streaming fit gets its gap from its floor: floor - the least device time of that host's
streaming kernels (their floor less their gap; the typical one on a host that timed none). For convolutions,
whose cheapest measured configuration still has a few microseconds of work, this overstates the gap by that much;
a module-called kind's gap also holds its nn.Module call (under a microsecond here, host_cost's module_call_us).

`python -m prenet.launch_gap` fits it and writes data/gpu_launch_gaps.json (packaged with prenet).
"""
import functools
import json
import statistics
from pathlib import Path

PACKAGED_GAPS = Path(__file__).resolve().parent / "data" / "gpu_launch_gaps.json"
# Operators whose kernels stream memory at a steady rate once they outlast the gap.
STREAMING_KINDS = ("add", "relu", "gelu")
# Rows above this multiple of the machine's smallest latency (2nd percentile) have kernels longer than the gap.
ABOVE_FLOOR = 2.5


def fit_gap(latency_us, bytes_moved):
    """(gap_us, bandwidth_gbs, rows used, median relative residual) of latency = gap + bytes / bandwidth, least
    squares on the rows above ABOVE_FLOOR x the 2nd-percentile latency."""
    import numpy as np

    latency_us, bytes_moved = np.asarray(latency_us, float), np.asarray(bytes_moved, float)
    keep = latency_us > ABOVE_FLOOR * np.quantile(latency_us, 0.02)
    if keep.sum() < 10:
        raise ValueError(f"only {int(keep.sum())} rows outlast the launch gap; need at least 10 to fit it")
    design = np.c_[np.ones(keep.sum()), bytes_moved[keep]]
    (gap, us_per_byte), *_ = np.linalg.lstsq(design, latency_us[keep], rcond=None)
    residual = np.abs(latency_us[keep] - design @ [gap, us_per_byte]) / latency_us[keep]
    return float(gap), float(1e-3 / us_per_byte), int(keep.sum()), float(np.median(residual))


def fit(folder=None):
    """The gap file's content from the NeuSight set in `folder` (default: prenet.datasets.neusight_folder())."""
    from ._native import core
    from .catalog import native_catalog
    from .datasets import load_neusight, neusight_folder
    from .training import config_keys

    tables = load_neusight(folder)
    catalog = native_catalog()
    per_op = {}
    for kind in STREAMING_KINDS:
        for gpu, rows in tables[kind].groupby("gpu"):
            configs = rows[config_keys(kind, rows)].astype("int64").to_dict("records")
            moved = [core().layer_features(kind, c, catalog, gpu)["forward_bytes"] for c in configs]
            gap, bandwidth, used, residual = fit_gap(1e3 * rows["forward_ms"].to_numpy(), moved)
            per_op.setdefault(gpu, {})[kind] = {"gap_us": round(gap, 2), "bandwidth_gbs": round(bandwidth, 1),
                                                "rows": used, "median_relative_residual": round(residual, 4)}
    gaps = {gpu: round(statistics.median(v["gap_us"] for v in ops.values()), 2) for gpu, ops in per_op.items()}
    kinds = kind_gaps(tables, per_op, gaps)
    return {
        "gap_us": gaps,
        "typical_gap_us": round(statistics.median(gaps.values()), 2),
        "per_operator": per_op,
        "kind_gap_us": kinds,
        "typical_kind_gap_us": {kind: round(statistics.median(g[kind] for g in kinds.values() if kind in g), 2)
                                for kind in sorted(tables)},
        "floor_checks": {"linear": gemm_floor_check(tables["linear"])},
        "method": f"latency = gap + bytes / bandwidth, least squares on rows above {ABOVE_FLOOR}x the 2nd-percentile "
                  f"latency, per GPU and operator ({', '.join(STREAMING_KINDS)}); gap per GPU = median over them; "
                  "typical = median over GPUs (used for GPUs not measured). Other kinds (kind_gap_us): the kind's "
                  "least latency on that host less the least device time of its streaming kernels (their least "
                  "latency, median over the three, less the host's gap; the median over hosts where a host timed "
                  "none); typical_kind_gap_us = median over hosts",
        "source": f"NeuSight operator latencies ({neusight_folder() if folder is None else folder}), "
                  "PyTorch 2.1, CUDA 12.1",
    }


def gemm_floor_check(linear):
    """Whether a linear's floor is paid before its kernel: per host, latency = intercept + FLOPs / rate fitted on
    GEMMs with every dimension >= 512 (tiles fill, a steady rate) between 1.3x and 6x the floor; an intercept
    near the floor (not near the streaming gap) says every GEMM pays it in series."""
    import numpy as np

    out = {}
    for gpu, rows in linear.groupby("gpu"):
        latency_us = 1e3 * rows["forward_ms"].to_numpy()
        flops = 2.0 * (rows["batch"] * rows["seq_len"] * rows["in_features"] * rows["out_features"]).to_numpy()
        floor = latency_us.min()
        keep = ((rows["batch"] * rows["seq_len"] >= 512) & (rows["in_features"] >= 512) &
                (rows["out_features"] >= 512)).to_numpy() & (latency_us > 1.3 * floor) & (latency_us < 6 * floor)
        if keep.sum() < 20:
            continue
        (intercept, us_per_flop), *_ = np.linalg.lstsq(np.c_[np.ones(keep.sum()), flops[keep]], latency_us[keep],
                                                      rcond=None)
        out[gpu] = {"floor_us": round(float(floor), 2), "intercept_us": round(float(intercept), 2),
                    "tflops": round(1e-6 / float(us_per_flop), 2), "rows": int(keep.sum())}
    return out


def kind_gaps(tables, per_op, gaps):
    """{gpu: {kind: gap_us}} for every kind each host timed: the streaming fit where there is one, else the
    kind's floor (least latency) less the host's least streaming device time (module description)."""
    floors = {}
    for kind, frame in tables.items():
        for gpu, least_ms in frame.groupby("gpu")["forward_ms"].min().items():
            floors.setdefault(gpu, {})[kind] = 1e3 * least_ms
    least_kernel = {gpu: statistics.median(floors[gpu][k] for k in STREAMING_KINDS if k in floors[gpu]) - gaps[gpu]
                    for gpu in gaps}
    typical_least = statistics.median(least_kernel.values())
    return {gpu: {kind: (per_op[gpu][kind]["gap_us"] if kind in per_op.get(gpu, {}) else
                         round(floor - least_kernel.get(gpu, typical_least), 2))
                  for kind, floor in sorted(by_kind.items())}
            for gpu, by_kind in sorted(floors.items())}


# What prediction reads of the gap file.
REQUIRED_KEYS = ("gap_us", "typical_gap_us", "kind_gap_us", "typical_kind_gap_us")


def load(path=None):
    """The gap file (default: the packaged one); a missing, unreadable or outdated file raises an error that says
    how to refit it."""
    path = Path(path or PACKAGED_GAPS)
    refit = "fit it with `python -m prenet.launch_gap`"
    if not path.is_file():
        raise FileNotFoundError(f"launch gap file {path} is missing; {refit}")
    try:
        content = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"launch gap file {path} is not JSON ({error}); {refit}") from None
    missing = [key for key in REQUIRED_KEYS if key not in content] if isinstance(content, dict) else REQUIRED_KEYS
    if missing:
        raise ValueError(f"launch gap file {path} lacks {', '.join(missing)} (written by an older prenet?); {refit}")
    return content


def gap_us(gpu, gaps=None, kind=None):
    """The fitted gap of a GPU (canonical name) where it was measured, else the typical one. With `kind`, that
    operator's own gap: on that GPU where its host timed the kind, else the kind's typical gap where any host did
    (issuing F.relu, F.linear and a convolution costs differently); other kinds take the machine's."""
    gaps = gaps or load()
    if kind is not None:
        own = gaps["kind_gap_us"].get(gpu, {}).get(kind, gaps["typical_kind_gap_us"].get(kind))
        if own is not None:
            return own
    return gaps["gap_us"].get(gpu, gaps["typical_gap_us"])


def issue_us(kind=None, gaps=None):
    """What issuing one kernel of `kind` (None: the machine's least, as a streaming kernel) costs the host of a
    training step on any GPU: the typical gap over the measured hosts (gap_us of a GPU none measured). A measured
    GPU's own gap is its NeuSight host's, a property of that machine's CPU and software, not of the GPU: taking it
    for the step's host would rank GPUs on a host-bound step by the machines that measured them (ResNet-50 at batch
    8: the A100 80GB PCIe 8% faster than an H100, by its host's cheaper convolution issue)."""
    return gap_us(None, gaps, kind)


def kind_gaps_ms(gpu, gaps=None):
    """{layer kind: its gap_us on `gpu`, in milliseconds} for every kind of the native table: what a bundle fitted
    on latencies holds in each kernel it predicts, to be taken off for device time."""
    gaps = gaps or load()
    return {kind: 1e-3 * gap_us(gpu, gaps, kind) for kind in _kind_names()}


@functools.lru_cache(maxsize=None)
def _kind_names():
    from ._native import core

    return tuple(kind["name"] for kind in core().layer_kinds())


def host_spread(gaps=None):
    """(low, high) factors on a predicted host time: the smallest and largest machine gap over the typical one
    (how much issuing costs differ between the hosts measured)."""
    gaps = gaps or load()
    values = list(gaps["gap_us"].values())
    return min(values) / gaps["typical_gap_us"], max(values) / gaps["typical_gap_us"]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prenet.launch_gap",
                                     description="Fits the launch gaps of the NeuSight operator set and writes them "
                                                 "to FILE.")
    parser.add_argument("file", nargs="?", default="data/gpu_launch_gaps.json", help="(default: %(default)s)")
    out = Path(parser.parse_args().file)
    content = fit()
    out.write_text(json.dumps(content, indent=1) + "\n")
    print(json.dumps({k: content[k] for k in ("gap_us", "typical_gap_us")}, indent=1))
