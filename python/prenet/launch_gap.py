"""How much of a measured operator latency is the host's, from the GPU operator set itself.

NeuSight timed each operator alone, between two CUDA events around one Python call. The device timestamps the
start event at once, then idles until the host has issued the operator (Python call, dispatch, allocation,
launch), so every latency = the host's issue time (the *gap*) + the kernel's device time. For the streaming
elementwise operators (add, relu, gelu) whose kernels outlast the gap, latency is exactly linear in the bytes
moved: latency = gap + bytes / bandwidth (median residual 0.1-0.5% on every GPU). Below about 2.5x the smallest
latency the kernel ends before the host records the end event, and the latency only bounds the kernel.

The fitted gap, per GPU machine (median over the three operators), is the host's cost of issuing one kernel in a
training step (prenet.estimate); where the predictors learned latencies, it is also taken off every predicted
kernel (device time = latency - gap, never below the kernel's roofline bound). Fitting device time instead
(prenet.datasets.load_neusight(timing="device")) takes each operator's own gap where it was fitted, the machine's
elsewhere.

`python -m prenet.launch_gap` fits it and writes data/gpu_launch_gaps.json (packaged with prenet).
"""
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

    tables = load_neusight(folder)
    catalog = native_catalog()
    per_op = {}
    for kind in STREAMING_KINDS:
        for gpu, rows in tables[kind].groupby("gpu"):
            configs = rows.drop(columns=["gpu", "forward_ms"]).to_dict("records")
            moved = [core().layer_features(kind, c, catalog, gpu)["forward_bytes"] for c in configs]
            gap, bandwidth, used, residual = fit_gap(1e3 * rows["forward_ms"].to_numpy(), moved)
            per_op.setdefault(gpu, {})[kind] = {"gap_us": round(gap, 2), "bandwidth_gbs": round(bandwidth, 1),
                                                "rows": used, "median_relative_residual": round(residual, 4)}
    gaps = {gpu: round(statistics.median(v["gap_us"] for v in ops.values()), 2) for gpu, ops in per_op.items()}
    return {
        "gap_us": gaps,
        "typical_gap_us": round(statistics.median(gaps.values()), 2),
        "per_operator": per_op,
        "method": f"latency = gap + bytes / bandwidth, least squares on rows above {ABOVE_FLOOR}x the 2nd-percentile "
                  f"latency, per GPU and operator ({', '.join(STREAMING_KINDS)}); gap per GPU = median over them; "
                  "typical = median over GPUs (used for GPUs not measured)",
        "source": f"NeuSight operator latencies ({neusight_folder() if folder is None else folder}), "
                  "PyTorch 2.1, CUDA 12.1",
    }


def load(path=None):
    path = Path(path or PACKAGED_GAPS)
    if not path.is_file():
        raise FileNotFoundError(f"launch gap file {path} is missing; fit it with `python -m prenet.launch_gap`")
    return json.loads(path.read_text())


def gap_us(gpu, gaps=None, kind=None):
    """The fitted gap of a GPU (canonical name) where it was measured, else the typical one; with `kind`, that
    operator's own gap on that GPU where it was fitted (issuing F.relu and torch.add costs differently)."""
    gaps = gaps or load()
    own = gaps["per_operator"].get(gpu, {}).get(kind) if kind else None
    return own["gap_us"] if own else gaps["gap_us"].get(gpu, gaps["typical_gap_us"])


def host_spread(gaps=None):
    """(low, high) factors on a predicted host time: the smallest and largest machine gap over the typical one
    (how much issuing costs differ between the hosts measured)."""
    gaps = gaps or load()
    values = list(gaps["gap_us"].values())
    return min(values) / gaps["typical_gap_us"], max(values) / gaps["typical_gap_us"]


if __name__ == "__main__":
    import sys

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("data/gpu_launch_gaps.json")
    content = fit()
    out.write_text(json.dumps(content, indent=1) + "\n")
    print(json.dumps({k: content[k] for k in ("gap_us", "typical_gap_us")}, indent=1))
