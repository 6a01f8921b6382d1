"""GPU predictors calibrated to a reachable GPU by a few timed layers per kind (prenet.gpu_calibration)."""
import json
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import prenet
from prenet import gpu_calibration, launch_gap

T4 = "Tesla T4"
GPU_KINDS = {"add", "bmm", "conv2d", "gelu", "layer_norm", "linear", "relu", "softmax"}


@pytest.mark.parametrize("gpu", [T4, "NVIDIA H100 80GB HBM3"])
def test_reference_layers_cover_every_kind_within_the_timed_range(gpu):
    layers = gpu_calibration.reference_layers(gpu)
    by_kind = {}
    for harness_kind, config, kind, native_config in layers:
        by_kind.setdefault(kind, []).append(native_config)
        assert config["batch"] == native_config["batch"]
    assert set(by_kind) == GPU_KINDS and all(len(c) == gpu_calibration.PER_KIND for c in by_kind.values())
    for kind, configs in by_kind.items():
        times = gpu_calibration._predicted_ms(kind, configs, gpu)
        assert all(gpu_calibration.MIN_DEVICE_MS <= t <= gpu_calibration.MAX_DEVICE_MS for t in times)


def _write_calibration(path, gpu, factors):
    """A calibration file whose layers measured `factors[kind]` times their predicted device time, plus the
    launch gap a latency holds; a failed row, which counts for nothing."""
    gaps = launch_gap.load()
    rows = []
    for harness_kind, config, kind, native_config in gpu_calibration.reference_layers(gpu):
        if kind not in factors:
            continue
        device = gpu_calibration._predicted_ms(kind, [native_config], gpu)[0] * factors[kind]
        rows.append({"harness_kind": harness_kind, "config": config, "kind": kind, "native_config": native_config,
                     "status": "ok", "error": "", "forward_ms": device + 1e-3 * launch_gap.gap_us(gpu, gaps, kind)})
    rows.append({**rows[0], "status": "failed", "error": "out of memory", "forward_ms": None})
    path.write_text(json.dumps({"format": gpu_calibration.FORMAT, "version": gpu_calibration.VERSION, "gpu": gpu,
                                "layers": rows, "date": "2026-11-25"}))
    return len(rows) - 1


def test_a_calibration_scales_its_kinds_and_leaves_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("PRENET_CACHE", str(tmp_path))
    linear = dict(batch=32, seq_len=128, in_features=1024, out_features=1024)
    relu = dict(batch=32, seq_len=128, features=4096)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))  # device-bound at batch 1024
    before = {kind: prenet.predict_layer(kind, gpu=T4, **config) for kind, config in (("linear", linear),
                                                                                      ("relu", relu))}
    estimate_before = prenet.predict(model, batch=1024, gpu=T4, input_shape=(1024,), dataset_size=4096)
    h100_before = prenet.predict_layer("linear", gpu="H100", **linear)
    timed = _write_calibration(gpu_calibration.calibration_path(T4), T4, {"linear": 1.5, "conv2d": 0.8})
    calibration = gpu_calibration.load(T4)
    assert calibration.factors == pytest.approx({"linear": 1.5, "conv2d": 0.8}, rel=1e-9)
    assert prenet.predict_layer("linear", gpu=T4, **linear) == pytest.approx(1.5 * before["linear"], rel=1e-9)
    assert prenet.predict_layer("relu", gpu=T4, **relu) == pytest.approx(before["relu"], rel=1e-12)
    assert prenet.predict_layer("linear", gpu="H100", **linear) == h100_before  # another GPU: as packaged
    after = prenet.predict(model, batch=1024, gpu=T4, input_shape=(1024,), dataset_size=4096)

    def products_ms(estimate):
        return estimate.ops.loc[estimate.ops["kind"] == "linear", "ms"].sum()

    assert products_ms(after) == pytest.approx(1.5 * products_ms(estimate_before), rel=1e-9)
    assert f"calibrated to this {T4} by {timed} timed layers (2026-11-25): conv2d x0.80, linear x1.50" in repr(after)
    assert estimate_before.calibrated is None
    # its interval: the timed kinds' factors after calibration (narrower for a product), the rest as before
    after_factors = gpu_calibration._interval_factors_after_calibration()["linear"]
    before_factors = prenet.uncertainty.interval_factors(prenet.predictors.PACKAGED_UNSEEN_BUNDLE)["linear"]
    assert after_factors[1] / after_factors[0] < before_factors[1] / before_factors[0]
    assert (after.interval_seconds[1] / after.epoch_seconds < estimate_before.interval_seconds[1] /
            estimate_before.epoch_seconds)
    assert prenet.predictors.served_as(T4) == "measured, calibrated"
    assert prenet.predictors.served_as("NVIDIA H100 80GB HBM3") == "unseen, distance 0.69"


def test_a_calibration_brings_the_machines_own_dispatch_costs(tmp_path, monkeypatch):
    """The host side of a calibrated GPU's steps is costed with the dispatch costs measured on that machine."""
    monkeypatch.setenv("PRENET_CACHE", str(tmp_path))
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))  # host-bound: tiny kernels
    run = dict(batch=8, gpu=T4, input_shape=(64,), dataset_size=64)
    packaged = prenet.predict(model, **run)
    path = gpu_calibration.calibration_path(T4)
    _write_calibration(path, T4, {"linear": 1.0})
    record = json.loads(path.read_text())
    costs = {**prenet.host_cost.load(gpu=True), "op_us": prenet.host_cost.load(gpu=True)["op_us"] + 10.0}
    path.write_text(json.dumps({**record, "host_costs": costs}))
    calibrated = prenet.predict(model, **run)
    path.unlink()
    (tmp_path / "costs.json").write_text(json.dumps(costs))
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "costs.json"))  # the same costs, given by file
    given = prenet.predict(model, **run)
    assert calibrated.host_ms > packaged.host_ms and calibrated.host_ms == pytest.approx(given.host_ms, rel=1e-12)
    assert calibrated.step_seconds == pytest.approx(given.step_seconds, rel=1e-12)
    assert calibrated.device_ms == pytest.approx(packaged.device_ms, rel=1e-9)


def test_a_calibrated_sibling_still_says_through_what(tmp_path, monkeypatch):
    monkeypatch.setenv("PRENET_CACHE", str(tmp_path))
    sxm2 = "Tesla V100-SXM2-32GB"
    path = gpu_calibration.calibration_path(sxm2)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_calibration(path, sxm2, {"linear": 1.2})
    estimate = prenet.predict(nn.Linear(64, 64), batch=8, gpu=sxm2, input_shape=(64,), dataset_size=64)
    assert estimate.extrapolation["timed_through"] == "Tesla V100-PCIE-32GB"
    assert estimate.calibrated.startswith(f"calibrated to this {sxm2}")


def test_a_corrupt_calibration_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PRENET_CACHE", str(tmp_path))
    path = gpu_calibration.calibration_path(T4)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match=f"{path} is not a prenet GPU calibration .*prenet calibrate --gpu"):
        prenet.predict_layer("linear", gpu=T4, batch=1, seq_len=1, in_features=8, out_features=8)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_calibrating_without_a_gpu_says_what_is_needed(tmp_path):
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        gpu_calibration.calibrate(T4, tmp_path / "calibration.json")
    done = subprocess.run([sys.executable, "-m", "prenet", "calibrate", "--gpu"], capture_output=True, text=True)
    assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr


def test_reference_layers_are_spread_over_the_predicted_time_on_a_log_scale():
    # most candidates small, as the sampler's layers are on a fast GPU after the batch scaling: evenly by rank would
    # take nine of ten under 0.3 ms
    times = [0.05, 60.0] + [0.1 + 0.002 * i for i in range(100)] + [0.5, 1.0, 3.0, 10.0, 30.0]
    picks = gpu_calibration.spread_in_time(times, 5)
    assert len(picks) == 5 == len(set(picks))
    chosen = sorted(times[i] for i in picks)
    assert chosen[0] == 0.1 and chosen[-1] == 30.0  # the span inside [MIN_DEVICE_MS, MAX_DEVICE_MS]
    # the nearest to 0.1 x 300^(j/4) = 0.42, 1.7, 7.2 ms, in log time
    assert chosen[1] == 0.5 and chosen[2] in (1.0, 3.0) and chosen[3] == 10.0
    assert gpu_calibration.spread_in_time([0.05, 0.2, 70.0, 1.0], 5) == [1, 3]  # fewer inside: all of them
