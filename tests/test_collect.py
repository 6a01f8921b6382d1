"""The timing harness and its resumable collection front end, on the CPU."""
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from prenet.collect import COLUMNS, LEGACY_COLUMNS, SPEED_COLUMNS, Harness, collect
from prenet.sampling import MODEL_CHANNELS, MODEL_MAPS, SAMPLERS, sample_config


def test_sampler_is_deterministic_and_within_budget():
    for kind in SAMPLERS:
        first = [sample_config(kind, i, seed=3) for i in range(20)]
        assert first == [sample_config(kind, i, seed=3) for i in range(20)]
        assert first != [sample_config(kind, i, seed=4) for i in range(20)]
    sizes = [sample_config("conv2d", i)["height"] for i in range(300)]
    assert min(sizes) < 16 and max(sizes) > 128, "log-uniform sizes span small and large inputs"
    with pytest.raises(ValueError, match="the wide profile has no harness kind 'conv3d'; it has: linear, conv2d"):
        sample_config("conv3d", 0)


def test_the_models_profile_draws_convolutions_as_cnns_build_them_and_the_wide_profile_is_unchanged(tmp_path,
                                                                                                       monkeypatch,
                                                                                                       run_prenet):
    from prenet.datasets import cpu_folder

    drawn = [sample_config("conv2d", i, profile="models") for i in range(300)]
    assert drawn == [sample_config("conv2d", i, profile="models") for i in range(300)]
    assert drawn != [sample_config("conv2d", i) for i in range(300)]
    for config in drawn:
        assert config["in_channels"] in (3, *MODEL_CHANNELS) and config["out_channels"] in MODEL_CHANNELS
        assert config["padding"] == config["kernel_size"] // 2 and config["height"] in MODEL_MAPS
        assert config["groups"] in (1, config["in_channels"])
    assert 0 < sum(config["groups"] > 1 for config in drawn) < 100  # depthwise convolutions, as MobileNets run
    # the packaged set's rows, drawn by the wide profile before profiles existed, are drawn the same still
    rows = pd.read_csv(cpu_folder() / "conv2d.csv").head(5)
    for _, row in rows.iterrows():
        config = sample_config("conv2d", int(row["sample"]))
        assert all(int(row[key]) == value for key, value in config.items() if key != "optimizer"), config
        assert row["optimizer"] == config["optimizer"]
    with pytest.raises(ValueError, match="the models profile has no harness kind 'add'; it has: conv2d"):
        sample_config("add", 0, profile="models")
    with pytest.raises(ValueError, match="unknown sampling profile 'narrow'; known: wide, models"):
        sample_config("conv2d", 0, profile="narrow")
    use_stub_harness(tmp_path, monkeypatch)
    out = tmp_path / "conv2d.csv"
    result = run_prenet("collect", "--kind", "conv2d", "--samples", "4", "--out", str(out), "--profile", "models",
                        "--no-progress")
    assert result.returncode == 0, result.stderr
    written = pd.read_csv(out)
    assert written["in_channels"].tolist() == [sample_config("conv2d", i, profile="models")["in_channels"]
                                               for i in range(4)]
    result = run_prenet("collect", "--kind", "all", "--samples", "4", "--out", str(tmp_path), "--profile", "models")
    assert result.returncode != 0 and "--profile name one kind's samples" in result.stderr


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
def test_harness_times_every_kind_on_the_cpu(kind):
    harness = Harness("cpu", threads=1, extra_args=("--max-ms", "20", "--warmup-ms", "1"))
    try:
        config = sample_config(kind, 0)
        # Keep the test quick: shrink the sampled sizes.
        for key in ("batch", "seq_len", "height", "width", "features", "m", "k", "n"):
            if key in config:
                config[key] = min(config[key], 8)
        if kind in ("maxpool2d", "avgpool2d"):
            config.update(height=8, width=8, kernel_size=2, padding=0)
        result = harness.time(1, kind, config, timeout=120)
    finally:
        harness.stop()
    assert result["status"] == "ok", result
    for key in ("forward_ms", "train_forward_ms", "train_backward_ms", "train_step_ms"):
        assert result[key] > 0, key
    assert result["forward_min_ms"] <= result["forward_ms"] <= result["forward_max_ms"]
    has_parameters = kind not in ("maxpool2d", "avgpool2d", "activation", "add", "softmax", "bmm")
    assert ("train_optimizer_ms" in result) == has_parameters
    # the host's speed right after the row: a 512^3 product takes well over 0.1 ms on any CPU, a 16 MiB copy
    # well over 0.1 ms at any memory bandwidth below 160 GB/s
    assert 0.1 < result["reference_matmul_ms"] < 1000 and 0.1 < result["reference_copy_ms"] < 1000


def test_environment_is_recorded():
    harness = Harness("cpu", threads=1)
    harness.stop()
    env = harness.environment
    assert env["device"] == "cpu" and env["threads"] == 1 and env["torch_version"]
    assert env["host_cpu"] and env["device_units"] >= 1 and env["blas"]
    # freed memory kept, so that repetitions do not fault in fresh pages (cpp/harness/freed_memory.hpp), and
    # tensors' blocks reused by size (cpp/harness/cpu_tensor_blocks.hpp)
    assert env["freed_memory"].startswith("kept") or "not glibc" in env["freed_memory"]
    assert "tensor blocks kept by size" in env["freed_memory"]


def test_invalid_configurations_are_results_not_crashes():
    harness = Harness("cpu", threads=1)
    try:
        bad = harness.time(1, "conv2d", dict(batch=1, in_channels=1, out_channels=1, kernel_size=9, height=4,
                                             width=4), timeout=60)
        unknown = harness.time(2, "linear", dict(batch=1, in_features=2, out_features=2, optimizer="lbfgs2"),
                               timeout=60)
        good = harness.time(3, "add", dict(batch=2, features=3), timeout=60)
    finally:
        harness.stop()
    assert bad["status"] == "failed" and "Kernel size can't be greater" in bad["error"]
    assert unknown["status"] == "failed" and "unknown optimizer 'lbfgs2'" in unknown["error"]
    assert good["status"] == "ok", "the harness keeps serving after failures"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU machine collects on CUDA")
def test_cuda_is_refused_with_a_reason(run_prenet, tmp_path):
    result = run_prenet("collect", "--kind", "add", "--samples", "1", "--device", "cuda", "--out",
                        str(tmp_path / "x.csv"))
    assert result.returncode == 2
    assert "CUDA was requested but is not available" in result.stderr


STUB_HARNESS = """#!{python}
import json, os, sys, time
print(json.dumps({{"type": "environment", "device": "cpu", "threads": 1}}), flush=True)
for line in sys.stdin:
    fields = dict(token.split("=", 1) for token in line.split())
    if fields["id"] == "{crash}":
        os.kill(os.getpid(), 9)
    if fields["id"] == "{hang}":
        time.sleep(60)
    print(json.dumps({{"type": "result", "id": fields["id"], "status": "ok", "forward_ms": 1.0,
                      "reference_matmul_ms": 2.5, "reference_copy_ms": 0.75}}), flush=True)
"""


def use_stub_harness(tmp_path, monkeypatch, crash=-1, hang=-1):
    """A stand-in harness process that crashes or hangs on chosen requests, to test the front end's handling."""
    stub = tmp_path / "harness"
    stub.write_text(STUB_HARNESS.format(python=sys.executable, crash=crash, hang=hang))
    stub.chmod(0o755)
    monkeypatch.setenv("PRENET_HARNESS", str(stub))


def test_crashes_and_hangs_are_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    use_stub_harness(tmp_path, monkeypatch, crash=2, hang=4)
    out = tmp_path / "add.csv"
    assert collect("add", 6, out, timeout=2, progress=False) == 6
    rows = pd.read_csv(out).set_index("sample")
    assert rows.loc[2, "status"] == "failed" and "signal 9" in rows.loc[2, "error"]
    assert rows.loc[4, "status"] == "failed" and "timed out" in rows.loc[4, "error"]
    assert (rows.drop(index=[2, 4])["status"] == "ok").all()


def test_rows_carry_the_hosts_speed_and_a_file_from_before_it_is_resumed_in_its_own_columns(tmp_path, monkeypatch):
    use_stub_harness(tmp_path, monkeypatch)
    out = tmp_path / "add.csv"
    assert collect("add", 2, out, progress=False) == 2
    rows = pd.read_csv(out)
    assert list(rows.columns) == COLUMNS
    assert (rows["reference_matmul_ms"] == 2.5).all() and (rows["reference_copy_ms"] == 0.75).all()
    rows[LEGACY_COLUMNS].to_csv(out, index=False)  # as data/cpu was written, before the speed reference
    assert collect("add", 4, out, progress=False) == 2
    resumed = pd.read_csv(out)
    assert list(resumed.columns) == LEGACY_COLUMNS and sorted(resumed["sample"]) == [0, 1, 2, 3]
    assert (resumed["status"] == "ok").all() and not set(SPEED_COLUMNS) & set(resumed.columns)
    pd.read_csv(out)[LEGACY_COLUMNS[:-1]].to_csv(out, index=False)  # any other columns: refused, file untouched
    before = out.read_bytes()
    with pytest.raises(ValueError, match="other columns than this version of prenet writes"):
        collect("add", 6, out, progress=False)
    assert out.read_bytes() == before


def test_times_are_scaled_to_the_hosts_typical_speed_row_by_row():
    from prenet.datasets import at_typical_speed

    # the third add row ran in a stretch twice as slow, its reference product too
    add = pd.DataFrame({"batch": [1, 2, 3], "forward_ms": [1.0, 2.0, 6.0], "train_ms": [2.0, 4.0, 12.0],
                        "reference_matmul_ms": [2.5, 2.5, 5.0], "reference_copy_ms": [0.8, 0.8, 0.8]})
    relu = pd.DataFrame({"batch": [4, 5], "forward_ms": [0.5, 0.5], "reference_matmul_ms": [2.5, 2.5],
                         "reference_copy_ms": [0.6, 1.0]})
    scaled, typical = at_typical_speed({"add": add, "relu": relu})
    assert typical == 2.5  # the median over both tables' rows
    assert scaled["add"]["forward_ms"].tolist() == [1.0, 2.0, 3.0] and scaled["add"]["train_ms"].tolist()[2] == 6.0
    assert scaled["relu"]["forward_ms"].tolist() == [0.5, 0.5] and add["forward_ms"].tolist()[2] == 6.0  # a copy
    by_copy, typical = at_typical_speed({"add": add, "relu": relu}, "reference_copy_ms")
    assert typical == 0.8 and by_copy["relu"]["forward_ms"].tolist() == [0.5 * 0.8 / 0.6, 0.5 * 0.8 / 1.0]
    with pytest.raises(ValueError, match="unknown speed reference 'clock'; known: reference_matmul_ms"):
        at_typical_speed({"add": add}, "clock")


def test_chosen_samples_are_timed_again_and_the_rest_kept(tmp_path, monkeypatch, run_prenet):
    """collect(again=...) drops the rows of those samples and times them anew; the other rows stay byte for byte."""
    use_stub_harness(tmp_path, monkeypatch, crash=3)  # sample 3 fails the first time
    out = tmp_path / "add.csv"
    assert collect("add", 8, out, progress=False) == 8
    before = out.read_bytes().splitlines(keepends=True)
    use_stub_harness(tmp_path, monkeypatch)
    assert collect("add", 8, out, progress=False, again=[(2, 4), (7, 7)]) == 4
    after = out.read_bytes().splitlines(keepends=True)
    kept = [line for line in before[1:] if int(line.split(b",")[0]) in (0, 1, 5, 6)]
    assert after[:5] == before[:1] + kept  # header and untouched rows, in their order
    rows = pd.read_csv(out)
    assert sorted(rows["sample"]) == list(range(8)) and (rows["status"] == "ok").all()
    assert list(rows["sample"][4:]) == [2, 3, 4, 7]
    with pytest.raises(ValueError, match="a range within 0-7"):
        collect("add", 8, out, progress=False, again=[(6, 9)])
    result = run_prenet("collect", "--kind", "add", "--samples", "8", "--out", str(out), "--again", "5",
                        "--no-progress")
    assert result.returncode == 0 and "1 configurations of add written" in result.stdout
    assert sorted(pd.read_csv(out)["sample"]) == list(range(8))
    result = run_prenet("collect", "--kind", "all", "--samples", "8", "--out", str(tmp_path), "--again", "2-4")
    assert result.returncode != 0 and "--again and --profile name one kind's samples" in result.stderr
    result = run_prenet("collect", "--kind", "add", "--samples", "8", "--out", str(out), "--again", "two")
    assert result.returncode != 0 and "'two' is not a range of sample indices" in result.stderr


def test_killed_collection_resumes_without_loss_or_duplicates(tmp_path):
    out = tmp_path / "softmax.csv"
    command = [sys.executable, "-m", "prenet", "collect", "--kind", "softmax", "--samples", "40", "--threads", "1",
               "--out", str(out), "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") < 6):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    rows_before = out.read_text().count("\n") - 1
    assert 5 <= rows_before < 40, "killed mid-run"
    with open(out, "a") as f:
        f.write("999,softmax,ok,,half a line")  # what a kill during a write would leave
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    table = pd.read_csv(out)
    assert list(table.columns) == COLUMNS
    assert sorted(table["sample"]) == list(range(40))
    assert (table["status"] == "ok").all()
    for _, row in table.iterrows():
        config = sample_config("softmax", int(row["sample"]))
        assert (row["batch"], row["features"], row["optimizer"]) == (config["batch"], config["features"],
                                                                      config["optimizer"])
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert "0 configurations" in again.stdout
    assert len(pd.read_csv(out)) == 40


def test_two_processes_share_a_collection(tmp_path, monkeypatch):
    """A kind locked by one process is skipped by another collecting all kinds."""
    import fcntl

    from prenet.collect import CollectionBusy, collect_all

    use_stub_harness(tmp_path, monkeypatch)
    with open(tmp_path / "add.csv.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CollectionBusy):
            collect("add", 3, tmp_path / "add.csv", progress=False)
        written = collect_all(["add", "softmax"], 3, tmp_path, round_size=2, progress=False)
    assert written == {"add": 0, "softmax": 3}
