"""Layer timing data sets as tables the predictors learn from: one row per measured configuration with the
native kind's configuration keys, the device, the optimizer and the measured milliseconds.

- the GPU operator set of NeuSight (forward only, five GPUs), read from ../shared/data/neusight, never copied;
- our CPU set (data/cpu, forward and training step), measured by prenet collect.
"""
import os
from pathlib import Path

# NeuSight operator file -> (native kind, {native key: NeuSight column}, fixed keys). Shapes: linear takes
# (B, M, N) to K outputs (its kernel grids tile M x K), bmm multiplies (B, M, K) by (B, K, N), conv inputs are
# square, the row-wise operators take (B, H).
NEUSIGHT_OPERATORS = {
    "linear": ("linear", {"batch": "B", "seq_len": "M", "in_features": "N", "out_features": "K"}, {}),
    "bmm": ("bmm", {"batch": "B", "m": "M", "k": "K", "n": "N"}, {}),
    "conv": ("conv2d", {"batch": "B", "in_channels": "Input_Channel", "out_channels": "Output_Channel",
                        "kernel_size": "Kernel_Szie", "height": "Input_Size", "width": "Input_Size",
                        "stride": "Stride", "padding": "Padding"}, {}),
    "ln": ("layer_norm", {"batch": "B", "normalized_shape": "H"}, {}),
    "softmax": ("softmax", {"batch": "B", "features": "H"}, {}),
    "relu": ("relu", {"batch": "B", "features": "H"}, {}),
    "gelu": ("gelu", {"batch": "B", "features": "H"}, {}),
    "add": ("add", {"batch": "B", "features": "H"}, {}),
}


def neusight_folder():
    """../shared/data/neusight beside the repository (PRENET_NEUSIGHT overrides)."""
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "neusight"
    if not default.exists():
        default = Path.cwd() / ".." / "shared" / "data" / "neusight"
    return Path(os.environ.get("PRENET_NEUSIGHT", default)).resolve()


def load_neusight(folder=None):
    """{native kind: DataFrame} of the NeuSight set: configuration keys, `gpu` (catalog name), `forward_ms`."""
    import pandas as pd

    from .catalog import find_gpu

    folder = Path(folder) if folder else neusight_folder()
    files = sorted(folder.glob("*__*.csv.gz"))
    if not files:
        raise FileNotFoundError(f"no NeuSight files (<op>__<GPU>.csv.gz) in {folder}; set PRENET_NEUSIGHT")
    tables = {}
    for path in files:
        operator = path.name.split("__")[0]
        if operator not in NEUSIGHT_OPERATORS:
            continue
        kind, columns, fixed = NEUSIGHT_OPERATORS[operator]
        raw = pd.read_csv(path, usecols=list(dict.fromkeys(["Latency", "Device", *columns.values()])))
        frame = pd.DataFrame({key: raw[column].astype("int64") for key, column in columns.items()})
        for key, value in fixed.items():
            frame[key] = value
        frame["gpu"] = raw["Device"].map({name: find_gpu(name)["name"] for name in raw["Device"].unique()})
        frame["forward_ms"] = raw["Latency"].astype(float)
        tables.setdefault(kind, []).append(frame)
    return {kind: pd.concat(frames, ignore_index=True) for kind, frames in tables.items()}
