"""Layer timing data sets as tables the predictors learn from: one row per measured configuration with the
native kind's configuration keys, the device (`gpu`: a catalog name), the optimizer and the measured
milliseconds of each mode (`forward_ms`; on our CPU set also `train_forward_ms`, `backward_ms`, `optimizer_ms`,
`train_ms`).

- the GPU operator set of NeuSight (forward only, five GPUs), read from ../shared/data/neusight, never copied;
- our CPU set (data/cpu, forward and training step), measured by prenet collect.
"""
import os
from pathlib import Path

from .collect import SPEED_COLUMNS

# NeuSight operator file -> (native kind, {native key: NeuSight column}, fixed keys). Shapes: linear takes
# (B, M, N) to K outputs (its kernel grids tile M x K), bmm multiplies (B, M, K) by (B, K, N), conv inputs are
# square, the row-wise operators take (B, H). Fixed keys follow NeuSight's collection code: its nn.Conv2d has no
# bias (its nn.Linear has one, the native default).
NEUSIGHT_OPERATORS = {
    "linear": ("linear", {"batch": "B", "seq_len": "M", "in_features": "N", "out_features": "K"}, {}),
    "bmm": ("bmm", {"batch": "B", "m": "M", "k": "K", "n": "N"}, {}),
    "conv": ("conv2d", {"batch": "B", "in_channels": "Input_Channel", "out_channels": "Output_Channel",
                        "kernel_size": "Kernel_Szie", "height": "Input_Size", "width": "Input_Size",
                        "stride": "Stride", "padding": "Padding"}, {"bias": 0}),
    "ln": ("layer_norm", {"batch": "B", "normalized_shape": "H"}, {}),
    "softmax": ("softmax", {"batch": "B", "features": "H"}, {}),
    "relu": ("relu", {"batch": "B", "features": "H"}, {}),
    "gelu": ("gelu", {"batch": "B", "features": "H"}, {}),
    "add": ("add", {"batch": "B", "features": "H"}, {}),
}


# The name of the GPU kernel NeuSight recorded for each row, as the profiler gave it.
KERNEL_COLUMN = "Kernel Name"


def neusight_folder():
    """../shared/data/neusight beside the repository (PRENET_NEUSIGHT overrides): beside the source tree this module
    is in, else beside the working directory or the nearest folder above it that has one (a script run from the
    repository's bench/ with the package installed elsewhere)."""
    if "PRENET_NEUSIGHT" in os.environ:
        return Path(os.environ["PRENET_NEUSIGHT"]).resolve()
    beside = [Path(__file__).resolve().parents[2], Path.cwd(), *Path.cwd().parents]
    candidates = [folder / ".." / "shared" / "data" / "neusight" for folder in beside]
    return next((c for c in candidates if c.exists()), candidates[1]).resolve()


TIMINGS = ("latency", "device")


def load_neusight(folder=None, timing="latency"):
    """{native kind: DataFrame} of the NeuSight set: configuration keys, `gpu` (catalog name), `forward_ms`,
    `kernel` (the name of the kernel the row ran).
    `timing` "device": `forward_ms` is each latency less its measuring host's launch gap for that operator
    (prenet.launch_gap: the host's time to issue it, which every latency holds), the latency kept in
    `latency_ms`."""
    import pandas as pd

    from .catalog import find_gpu

    folder = Path(folder) if folder else neusight_folder()
    files = sorted(folder.glob("*__*.csv.gz"))
    if not files:
        raise FileNotFoundError(f"no NeuSight files (<op>__<GPU>.csv.gz) in {folder}; set PRENET_NEUSIGHT to the "
                                "folder of NeuSight's operator latencies (needed to fit or reproduce the GPU "
                                "predictors only: prenet.predict uses the packaged ones)")
    tables = {}
    for path in files:
        operator = path.name.split("__")[0]
        if operator not in NEUSIGHT_OPERATORS:
            continue
        kind, columns, fixed = NEUSIGHT_OPERATORS[operator]
        wanted = ["Latency", "Device", KERNEL_COLUMN, *columns.values()]
        raw = pd.read_csv(path, usecols=list(dict.fromkeys(wanted)))
        frame = pd.DataFrame({key: raw[column].astype("int64") for key, column in columns.items()})
        for key, value in fixed.items():
            frame[key] = value
        frame["gpu"] = raw["Device"].map({name: find_gpu(name)["name"] for name in raw["Device"].unique()})
        frame["forward_ms"] = raw["Latency"].astype(float)
        frame["kernel"] = raw[KERNEL_COLUMN].astype(str)
        tables.setdefault(kind, []).append(frame)
    tables = {kind: pd.concat(frames, ignore_index=True) for kind, frames in tables.items()}
    if timing not in TIMINGS:
        raise ValueError(f"unknown timing {timing!r}; known: {', '.join(TIMINGS)}")
    if timing == "device":
        from . import launch_gap

        gaps = launch_gap.load()
        for kind, frame in tables.items():
            frame["latency_ms"] = frame["forward_ms"]
            gap_ms = frame["gpu"].map(lambda gpu: 1e-3 * launch_gap.gap_us(gpu, gaps, kind))
            # every latency exceeds its host's gap (the smallest ones by 5-30 us); the floor guards the log target
            frame["forward_ms"] = (frame["latency_ms"] - gap_ms).clip(lower=DEVICE_FLOOR_MS)
    return tables


# Least device time kept for a row (1 us): a guard for the log of time the predictors learn.
DEVICE_FLOOR_MS = 1e-3


# Timing columns of our CPU set (data/cpu, see data/README.md) -> the mode each one measures.
CPU_MODES = {"forward_ms": "forward_ms", "train_forward_ms": "train_forward_ms", "train_backward_ms": "backward_ms",
             "train_optimizer_ms": "optimizer_ms", "train_step_ms": "train_ms"}


def at_typical_speed(tables, reference="reference_matmul_ms"):
    """(`tables` with every mode's time scaled to the host's typical speed, that speed): each row's times multiplied
    by the median of `reference` (one of SPEED_COLUMNS) over every row of every table, over the row's own. A
    virtual machine that ran a stretch of rows k times slower timed the reference k times slower too, so the
    scaled times are those of one machine at one speed. ValueError where a row has no reference."""
    import pandas as pd

    if reference not in SPEED_COLUMNS:
        raise ValueError(f"unknown speed reference {reference!r}; known: {', '.join(SPEED_COLUMNS)}")
    speeds = pd.concat([frame[reference] for frame in tables.values()])
    if speeds.isna().any() or not (speeds > 0).all():
        raise ValueError(f"{int(speeds.isna().sum())} rows have no {reference} (collected before the harness timed "
                         "the host's speed): their times cannot be scaled")
    typical = float(speeds.median())
    modes = set(CPU_MODES.values())
    scaled = {}
    for kind, frame in tables.items():
        frame = frame.copy()
        factor = typical / frame[reference]
        for mode in modes & set(frame.columns):
            frame[mode] = frame[mode] * factor
        scaled[kind] = frame
    return scaled, typical


def fastest_of_repeats(tables):
    """`tables` (load_harness_rows) with one row per configuration, each mode's time the fastest of the
    configuration's timings where it was timed more than once (collections of the same samples, taken apart in
    time). This project's virtual machine runs stretches of minutes up to 1.7 times slower (data/README.md); no
    disturbance makes a layer run faster, so of timings taken apart the fastest is the nearest to the layer's own
    time (bench/cpu_speed_fit.py). The host's speed columns are left out: no single timing's speed applies."""
    modes = list(CPU_MODES.values())
    fastest = {}
    for kind, frame in tables.items():
        keys = [c for c in frame.columns if c not in modes and c not in SPEED_COLUMNS]
        fastest[kind] = (frame.groupby(keys, dropna=False, sort=False)[[m for m in modes if m in frame]].min()
                         .reset_index())
    return fastest


def cpu_folder():
    """data/cpu of the repository (PRENET_CPU_DATA overrides; an installed package looks in ./data/cpu)."""
    default = Path(__file__).resolve().parents[2] / "data" / "cpu"
    if not default.exists():
        default = Path.cwd() / "data" / "cpu"
    return Path(os.environ.get("PRENET_CPU_DATA", default))


# Folders beside a CPU set `<name>` that belong to it: `<name>_models`, rows of the sampler's "models" profile
# (prenet.sampling; convolutions as CNNs build them); `<name>_second`, the same configurations timed a second time,
# apart, with its own `_models` rows.
COMPANIONS = ("models", "second", "second_models")


def cpu_folders(folder=None, companions=COMPANIONS):
    """The folders of our CPU set: `folder` (default cpu_folder()) and those of its `companions` (of COMPANIONS)
    that exist."""
    folder = Path(folder) if folder else cpu_folder()
    return [folder] + [f for f in (folder.with_name(f"{folder.name}_{c}") for c in companions) if f.is_dir()]


def load_cpu(folder=None):
    """{native kind: DataFrame} of our CPU set (the rows of cpu_folders(folder) together), one row per
    configuration, each mode the fastest of its timings (fastest_of_repeats): configuration keys, `gpu` (the host's
    catalog name), `optimizer` and one column per mode. The harness's `activation` rows become the native activation
    kinds (relu, gelu, tanh, sigmoid, silu); `linear` keeps its rows without a fused activation (those with one are a
    linear plus an activation kernel, which the native table times separately)."""
    folders = cpu_folders(folder)
    if not sorted(folders[0].glob("*.csv")):
        raise FileNotFoundError(f"no CPU layer data (<kind>.csv) in {folders[0]}; collect it with `prenet collect` "
                                "or set PRENET_CPU_DATA")
    tables = fastest_of_repeats(load_harness_rows(folders))
    labels = folders[0].with_name(f"{folders[0].name}_kernels") / "conv2d.csv"
    if "conv2d" in tables and labels.is_file():
        tables["conv2d"] = with_kernel_labels(tables["conv2d"], labels)
    return tables


def with_kernel_labels(frame, path):
    """`frame` (conv2d rows) with a `kernel` column: each configuration's implementation as the label file at `path`
    gives it (prenet.onednn_kernels: what PyTorch and oneDNN run on the measuring host's instruction set); `frame`
    as it is, with a warning, where the file lacks some of its configurations (run `python -m prenet.onednn_kernels`
    to label them)."""
    import warnings

    from .onednn_kernels import CONV_KEYS, load_labels

    labels = load_labels(path)
    keys = frame[list(CONV_KEYS)].astype("int64").itertuples(index=False, name=None)
    kernels = [labels.get(key) for key in keys]
    missing = sum(kernel is None for kernel in kernels)
    if missing:
        warnings.warn(f"{path} labels {len(kernels) - missing} of the {len(kernels)} convolutions; fitting without "
                      "their kernels (`python -m prenet.onednn_kernels` labels the rest)", stacklevel=3)
        return frame
    return frame.assign(kernel=kernels)


def collection_folders(data, device_folder):
    """The folders `prenet collect` filled for one device under `data` (data/gpu): `device_folder` (the device's
    name as a folder, "NVIDIA_H100_80GB_HBM3") and one per further sampling seed (`<device_folder>_seed<n>`)."""
    return sorted(p for p in Path(data).glob(f"{device_folder}*") if p.is_dir() and
                  (p.name == device_folder or p.name.startswith(f"{device_folder}_seed")))


def load_harness_rows(folders):
    """{native kind: DataFrame} of the rows `prenet collect` wrote into `folders` (<kind>.csv each, on the CPU or
    a GPU), as load_cpu describes them; `gpu` is the device's catalog name (the host's for CPU rows)."""
    import pandas as pd

    from ._native import core
    from .catalog import find_gpu, host_catalog

    def catalog_name(device, device_name):
        return (find_gpu(device_name) if str(device).startswith("cuda") else host_catalog().find(device_name))["name"]

    files = [path for folder in folders for path in sorted(Path(folder).glob("*.csv"))]
    if not files:
        raise FileNotFoundError(f"no layer data (<kind>.csv) in {', '.join(map(str, folders))}")
    specs = {k["name"]: [p["name"] for p in k["parameters"]] for k in core().layer_kinds()}
    tables = {}
    for path in files:
        raw = pd.read_csv(path, low_memory=False)
        raw = raw[raw["status"] == "ok"]
        if path.stem == "activation":
            groups = {op: rows for op, rows in raw.groupby("op")}
        elif path.stem == "linear":
            groups = {"linear": raw[raw["activation"].fillna("none") == "none"]}
        else:
            groups = {path.stem: raw}
        for kind, rows in groups.items():
            if kind not in specs:
                raise ValueError(f"{path}: '{kind}' is not a native layer kind ({', '.join(specs)})")
            keys = [key for key in specs[kind] if key in rows and rows[key].notna().all()]
            frame = rows[keys].astype("int64").reset_index(drop=True)
            frame["gpu"] = [catalog_name(*pair) for pair in zip(rows["device"], rows["device_name"])]
            frame["optimizer"] = rows["optimizer"].to_numpy()
            for column, mode in CPU_MODES.items():
                frame[mode] = rows[column].to_numpy(float)
            for column in SPEED_COLUMNS:  # the host's speed as the row ran, where the harness timed it (empty before)
                frame[column] = rows[column].to_numpy(float) if column in rows else float("nan")
            tables[kind] = pd.concat([tables[kind], frame], ignore_index=True) if kind in tables else frame
    return tables
