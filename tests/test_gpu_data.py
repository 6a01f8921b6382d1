"""The GPU measurements committed for validation (data/gpu, data/epochs; data/README.md): every row carries its
configuration and environment, the device resolves to its catalog entry, and the loader reads them as it reads
the CPU set."""
import json

import pytest

from conftest import ROOT
from prenet import find_gpu
from prenet.datasets import at_typical_speed, collection_folders, load_harness_rows
from prenet.collect import COLUMNS, LEGACY_COLUMNS

# one folder per sampling seed (collect --seed)
H100_FOLDERS = collection_folders(ROOT / "data" / "gpu", "NVIDIA_H100_80GB_HBM3")


def test_h100_layer_rows_carry_their_environment_and_load_as_the_cpu_set():
    import pandas as pd

    for folder in H100_FOLDERS:
        for path in sorted(folder.glob("*.csv")):
            raw = pd.read_csv(path, low_memory=False)
            assert list(raw.columns) in (COLUMNS, LEGACY_COLUMNS), path
            ok = raw[raw["status"] == "ok"]
            assert len(ok) > 0.9 * len(raw), path
            assert set(ok["device_name"]) == {"NVIDIA H100 80GB HBM3"}
            assert ok["torch_version"].notna().all() and ok["cudnn"].notna().all() and ok["host_cpu"].notna().all()
            assert ok["sample"].is_unique, path  # one seed per folder: each configuration once
    tables = load_harness_rows(H100_FOLDERS)
    assert {"linear", "conv2d", "lstm", "embedding", "relu", "softmax"} <= set(tables)
    conv = tables["conv2d"]
    assert set(conv["gpu"]) == {find_gpu("H100")["name"]}
    assert (conv["forward_ms"] > 0).all() and (conv["backward_ms"] > 0).all()
    # the host's speed is timed beside CPU rows only: these rows cannot be scaled to a typical speed
    assert conv["reference_matmul_ms"].isna().all()
    with pytest.raises(ValueError, match="rows have no reference_matmul_ms"):
        at_typical_speed(tables)


def test_missing_layer_data_is_named():
    with pytest.raises(FileNotFoundError, match="no layer data"):
        load_harness_rows([ROOT / "data" / "no-such-folder"])


def test_measured_epochs_carry_case_measurement_and_environment():
    rows = [json.loads(line) for line in (ROOT / "data" / "epochs" / "NVIDIA_H100_80GB_HBM3.jsonl").read_text()
            .splitlines() if line.strip()]
    assert len(rows) >= 30
    keys = [(r["model"], r["batch"], r["optimizer"], r["precision"]) for r in rows]
    assert len(set(keys)) == len(keys)
    for row in rows:
        if row.get("status") == "failed":
            assert row["error"]
            continue
        assert row["epoch_min_s"] <= row["epoch_s"] <= row["epoch_max_s"] and len(row["epochs_s"]) >= 3
        assert row["iters"] == -(-row["n"] // row["batch"])
        env = row["env"]
        assert env["device_name"] == "NVIDIA H100 80GB HBM3" and env["torch"] and env["host_cpu"]
        assert env["peak_memory_mib"] > 0


def test_collection_folders_are_the_device_and_its_seeds(tmp_path):
    """A device's collections: its own folder and its seed folders, not a file or another device named alike."""
    for name in ("GPU_X", "GPU_X_seed1", "GPU_X_seed2", "GPU_XL", "GPU_X_other"):
        (tmp_path / name).mkdir()
    (tmp_path / "GPU_X_host.json").write_text("{}")
    assert [p.name for p in collection_folders(tmp_path, "GPU_X")] == ["GPU_X", "GPU_X_seed1", "GPU_X_seed2"]
