"""The launch gap fitted from the GPU operator set, and the launch queue that combines host and device time."""
import json
import math

import numpy as np
import pytest
import torch.nn as nn

import prenet
from prenet import host_cost, launch_gap, launch_queue


def test_queue_follows_the_recurrence_op_by_op():
    # Host issues at 1, 2, 3 ms; kernels of 5, 0, 1 ms: the first starts at 1 and ends at 6, the second (no
    # kernel) ends at 6, the third starts at 6 and ends at 7. The host is done at 3.
    assert launch_queue.run([([1, 1, 1], [5, 0, 1])]) == (3.0, 7.0)
    assert launch_queue.epoch_ms([([1, 1, 1], [5, 0, 1])]) == 7.0
    # A host-bound step: each kernel waits for its issue; the epoch ends with the last kernel after the host.
    assert launch_queue.epoch_ms([([2, 2], [0.5, 0.5])]) == 4.5
    # Steps overlap: the host issues the second step while the device still runs the first.
    one = ([1.0, 1.0], [4.0, 4.0])
    assert launch_queue.epoch_ms([one, one]) == pytest.approx(1.0 + 16.0)
    # Brute force on random steps.
    rng = np.random.default_rng(0)
    steps = [(rng.exponential(1, 20), rng.exponential(1, 20) * (rng.random(20) < 0.7)) for _ in range(5)]
    host = end = 0.0
    for h, d in steps:
        for hi, di in zip(h, d):
            host += hi
            end = max(host, end) + di
    assert launch_queue.epoch_ms(steps) == pytest.approx(max(host, end), rel=1e-12)
    # A step summarised once and repeated runs as its arrays do.
    summary = launch_queue.summarize(*steps[0])
    assert launch_queue.epoch_ms([summary] * 3) == pytest.approx(launch_queue.epoch_ms([steps[0]] * 3), rel=1e-12)
    with pytest.raises(ValueError, match="differ in length"):
        launch_queue.run([([1, 2], [1])])


def test_a_step_that_waits_for_the_device_stops_the_host_running_ahead():
    # Two steps of host 1 + 1 ms and kernels of 4 + 4 ms: without a wait the host issues the second step while
    # the first runs (17 ms in all, above). Waiting after each step's first op (fp16's GradScaler reading its
    # overflow flag), the host issues the second op only when the first kernel is done (at 5 ms): it runs 6-10.
    # The second step's first op is issued at 7 and runs 10-14, the host waiting until then; its last op is
    # issued at 15 and runs 15-19 (the device idle while the host issues it).
    parts = [launch_queue.summarize([1.0], [4.0], waits=True), launch_queue.summarize([1.0], [4.0])]
    assert launch_queue.run(parts) == (6.0, 10.0)
    assert launch_queue.epoch_ms(parts * 2) == pytest.approx(19.0)
    host = end = 0.0
    for h, d, waits in [(1.0, 4.0, True), (1.0, 4.0, False)] * 2:   # brute force
        host += h
        end = max(host, end) + d
        host = max(host, end) if waits else host
    assert launch_queue.epoch_ms(parts * 2) == pytest.approx(max(host, end))


def test_repeated_steps_run_as_they_would_one_by_one_and_an_epoch_of_any_length_is_costed_at_once():
    """launch_queue.run_repeated (max-plus powers) against run over every step, on random steps with and without a
    wait, from random starts; and predict over an epoch of 10^12 samples at batch 1, costed without a list of its
    steps, n times a steady step long."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        waits = rng.random() < 0.5
        parts = [launch_queue.summarize(rng.exponential(1, k), rng.exponential(1, k) * rng.choice([0.1, 1, 10]),
                                        waits=waits and not i) for i, k in enumerate(rng.integers(1, 6, 1 + waits))]
        last = [launch_queue.summarize(rng.exponential(1, 3), rng.exponential(5, 3))]
        count, start = int(rng.integers(1, 40)), tuple(rng.exponential(3, 2))
        assert launch_queue.run_repeated([(parts, count), (last, 1)], *start) == pytest.approx(
            launch_queue.run(parts * count + last, *start), rel=1e-12)
    model = nn.Linear(8, 2)
    per_step = prenet.predict(model, batch=1, gpu="V100", input_shape=(8,), dataset_size=4096)
    # a list of its 10^12 steps before: a MemoryError (10^8 took minutes)
    huge = prenet.predict(model, batch=1, gpu="V100", input_shape=(8,), dataset_size=10 ** 12)
    assert huge.iterations == 10 ** 12
    assert huge.epoch_seconds == pytest.approx(10 ** 12 * per_step.step_seconds, rel=1e-3)


def test_fp16_steps_pay_the_grad_scalers_pass_and_its_wait():
    """The protocol trains fp16 with a GradScaler: its unscaling pass over the gradients, and the host's wait for
    the overflow flag before the update, which stops it running ahead into the next step."""
    from prenet import estimate

    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    bf16 = prenet.predict(model, batch=512, gpu="A100", input_shape=(1024,), precision="bf16")
    fp16 = prenet.predict(model, batch=512, gpu="A100", input_shape=(1024,), precision="fp16")
    parameters = sum(p.numel() for p in model.parameters())
    unscale_s = 2 * 4 * parameters / 1555e9          # each fp32 gradient read and written at the A100's bandwidth
    assert fp16.device_ms - bf16.device_ms >= 1e3 * unscale_s
    assert fp16.device_ms - bf16.device_ms < 1e3 * unscale_s + 0.1
    assert fp16.step_seconds > bf16.step_seconds + 1e-3 * (fp16.device_ms - bf16.device_ms)  # and the wait
    assert fp16.optimizer_ms == pytest.approx(bf16.optimizer_ms)
    assert estimate.GRAD_SCALER_KERNELS == (5, 1)


def test_gap_fit_recovers_a_known_gap_and_bandwidth():
    rng = np.random.default_rng(1)
    moved = np.exp(rng.uniform(np.log(1e3), np.log(1e9), 500))
    latency = np.maximum(30.0, 12.0 + moved / 900e9 * 1e6) * (1 + 0.002 * rng.standard_normal(500))
    gap, bandwidth, rows, residual = launch_gap.fit_gap(latency, moved)
    assert gap == pytest.approx(12.0, abs=0.5)
    assert bandwidth == pytest.approx(900.0, rel=0.01)
    assert rows < 500 and residual < 0.01
    with pytest.raises(ValueError, match="outlast the launch gap"):
        launch_gap.fit_gap(np.full(50, 30.0), np.full(50, 1e3))


def test_packaged_gaps_are_those_the_operator_set_gives():
    packaged = launch_gap.load()
    refit = launch_gap.fit()
    assert refit["gap_us"] == packaged["gap_us"]
    assert refit["kind_gap_us"] == packaged["kind_gap_us"]
    assert refit["typical_kind_gap_us"] == packaged["typical_kind_gap_us"]
    assert refit["floor_checks"] == packaged["floor_checks"]
    # Large GEMMs pay the linear's floor in series with the kernel: the intercept of latency against FLOPs is the
    # floor (within 10%), far above the streaming gap, on every host with enough such rows.
    checks = packaged["floor_checks"]["linear"]
    assert len(checks) >= 3
    for gpu, check in checks.items():
        assert check["intercept_us"] == pytest.approx(check["floor_us"], rel=0.1)
        assert check["intercept_us"] > 2 * packaged["gap_us"][gpu]
    assert set(packaged["gap_us"]) == {"NVIDIA A100-PCIE-40GB", "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4",
                                       "Tesla V100-PCIE-32GB"}
    assert all(10 < gap < 40 for gap in packaged["gap_us"].values())
    # Every operator on every GPU is fitted closely by the additive model.
    assert all(op["median_relative_residual"] < 0.01 for ops in packaged["per_operator"].values()
               for op in ops.values())
    assert launch_gap.gap_us("NVIDIA H100 80GB HBM3", packaged) == packaged["typical_gap_us"]
    with pytest.raises(FileNotFoundError, match="python -m prenet.launch_gap"):
        launch_gap.load("/nonexistent/gaps.json")


def test_a_corrupt_or_outdated_gap_file_is_refused_with_the_refit_command(tmp_path):
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"gap_us": {"Tesla T4": 15')
    with pytest.raises(ValueError, match="is not JSON .*python -m prenet.launch_gap"):
        launch_gap.load(corrupt)
    outdated = tmp_path / "outdated.json"
    outdated.write_text('{"gap_us": {"Tesla T4": 15.1}, "typical_gap_us": 15.1}')
    with pytest.raises(ValueError, match="lacks kind_gap_us, typical_kind_gap_us .*python -m prenet.launch_gap"):
        launch_gap.load(outdated)


def test_predicted_kernels_leave_the_gap_and_the_host_pays_it():
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(20)])
    estimate = prenet.predict(model, batch=64, gpu="A100", input_shape=(1024,), dataset_size=256)
    gap_ms = 1e-3 * launch_gap.gap_us("NVIDIA A100-PCIE-40GB", kind="linear")
    single = prenet.predict_layer("linear", gpu="A100", batch=1, seq_len=64, in_features=1024, out_features=1024)
    forward_addmm = estimate.ops[(estimate.ops["op"] == "addmm.default") & (estimate.ops["phase"] == "forward")]
    assert single > gap_ms  # the latency as measured; the kernel's device time is what the linear's gap leaves
    assert forward_addmm["ms"].tolist() == pytest.approx([single - gap_ms] * 20, rel=1e-6)
    assert forward_addmm["host_ms"].min() > gap_ms  # and the host pays it
    gap_ms = 1e-3 * launch_gap.gap_us("NVIDIA A100-PCIE-40GB")  # the machine's: the least any kernel pays
    # Tiny layers: host-bound, every kernel issue paying the gap (its dispatch share counted per op).
    tiny = prenet.predict(nn.Sequential(*[nn.Linear(8, 8) for _ in range(20)]), batch=4, gpu="A100",
                          input_shape=(8,), dataset_size=64)
    assert tiny.bound == "host"
    kernels = tiny.ops["kind"].notna().sum()
    assert tiny.host_ms > kernels * gap_ms
    assert tiny.step_seconds >= 1e-3 * tiny.host_ms


def test_the_steps_host_issues_kernels_at_the_typical_gap_on_every_gpu_and_the_data_hosts_gaps_come_off_kernels():
    """A measured GPU's own gap is its NeuSight host's: taken off the latencies learned for it, never charged to the
    host of the step predicted, which issues at the typical gap whatever the GPU (so that a host-bound step does not
    rank GPUs by the machines that measured them)."""
    gaps = launch_gap.load()
    assert gaps["kind_gap_us"]["Tesla T4"]["conv2d"] != gaps["typical_kind_gap_us"]["conv2d"]
    assert launch_gap.issue_us("conv2d", gaps) == gaps["typical_kind_gap_us"]["conv2d"]
    assert launch_gap.issue_us(None, gaps) == gaps["typical_gap_us"]
    model = nn.Sequential(*[nn.Conv2d(8, 8, 3, padding=1) for _ in range(12)], nn.Flatten(), nn.Linear(8 * 8 * 8, 4))
    hosts = {gpu: prenet.predict(model, batch=2, gpu=gpu, input_shape=(8, 8, 8), dataset_size=8)
             for gpu in ("T4", "V100", "A100 80GB PCIe", "A100", "H100")}
    assert len({round(estimate.host_ms, 9) for estimate in hosts.values()}) == 1
    # the A100 80GB PCIe's measuring host issued convolutions 9 us faster than typical: no longer its edge
    host_bound = [estimate for gpu, estimate in hosts.items() if gpu.startswith(("A100", "H100"))]
    assert all(estimate.bound == "host" for estimate in host_bound)
    assert max(e.step_seconds for e in host_bound) == pytest.approx(min(e.step_seconds for e in host_bound), rel=0.01)


def test_a_convolutions_backward_issues_its_input_and_weight_gradients_separately():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.Conv2d(8, 8, 3, bias=False))
    estimate = prenet.predict(model, batch=4, gpu="T4", input_shape=(3, 16, 16), dataset_size=4)
    ops = estimate.ops
    backward = ops[ops["op"] == "convolution_backward.default"]
    first, second = backward[backward["count"] == 0.5], backward[backward["count"] == 1.0]
    assert len(first) == 1 and len(second) == 1  # the first layer needs no input gradient
    conv_gap_ms = 1e-3 * launch_gap.issue_us("conv2d")
    # dX and dW each pay the convolution's issue gap; the first layer only dW
    extra = second["host_ms"].iloc[0] - first["host_ms"].iloc[0]
    assert extra == pytest.approx(conv_gap_ms - 1e-3 * host_cost.load(gpu=True)["op_us"], rel=1e-6)
    forward = ops[(ops["op"] == "convolution.default")]
    assert (forward["host_ms"] > conv_gap_ms).all()


def test_device_timing_takes_each_hosts_gap_off_its_latencies():
    from prenet.datasets import load_neusight

    latency, device = load_neusight()["add"], load_neusight(timing="device")["add"]
    gaps = launch_gap.load()
    for gpu in ("NVIDIA A100-PCIE-40GB", "Tesla P100-PCIE-16GB"):
        mine = device[device["gpu"] == gpu]
        assert (mine["latency_ms"].to_numpy() == latency[latency["gpu"] == gpu]["forward_ms"].to_numpy()).all()
        assert np.allclose(mine["latency_ms"] - mine["forward_ms"], 1e-3 * gaps["per_operator"][gpu]["add"]["gap_us"])
    assert (device["forward_ms"] > 0).all()
    linear = load_neusight(timing="device")["linear"]
    v100 = linear[linear["gpu"] == "Tesla V100-PCIE-32GB"]
    v100_gap_us = gaps["kind_gap_us"]["Tesla V100-PCIE-32GB"]["linear"]
    assert np.allclose(v100["latency_ms"] - v100["forward_ms"], 1e-3 * v100_gap_us)
    with pytest.raises(ValueError, match="unknown timing 'wall'; known: latency, device"):
        load_neusight(timing="wall")


def test_leave_one_device_out_in_device_timing_is_judged_on_latency():
    from prenet import unseen_gpu

    settings = unseen_gpu.Settings(kinds=("relu",), sets=("efficiency",), trees=30, rows_per_gpu=150,
                                   timing="device")
    outcome = unseen_gpu.run(settings)
    cells = outcome["cells"]
    assert len(cells) == 5 and np.isfinite(cells["median_rel"]).all()
    assert "candidates learn device time" in outcome["markdown"]
    # Judged on latency: the typical gap is added back, so tiny operators are not judged as near-zero times.
    assert (cells["median_rel"] < 1.0).all()


def test_bundles_say_what_they_learned_and_predict_uses_it():
    from prenet import predictors

    assert predictors.learned_timing(str(predictors.PACKAGED_BUNDLE)) == "latency"
    assert predictors.learned_timing(str(predictors.PACKAGED_UNSEEN_BUNDLE)) == "device"
    assert predictors.learned_timing("/nonexistent") == "latency"
    # On an unseen GPU the bundle's device time is each kernel's time as predicted: no gap to take off.
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)])
    estimate = prenet.predict(model, batch=64, gpu="H100", input_shape=(1024,), dataset_size=64)
    single = prenet.predict_layer("linear", gpu="H100", batch=1, seq_len=64, in_features=1024, out_features=1024)
    forward_addmm = estimate.ops[(estimate.ops["op"] == "addmm.default") & (estimate.ops["phase"] == "forward")]
    assert forward_addmm["ms"].tolist() == pytest.approx([single] * 4, rel=1e-6)


def test_an_operators_own_gap_is_used_where_it_was_fitted():
    gaps = launch_gap.load()
    p100 = gaps["per_operator"]["Tesla P100-PCIE-16GB"]
    assert launch_gap.gap_us("Tesla P100-PCIE-16GB", gaps, "relu") == p100["relu"]["gap_us"]
    # the conv-only A100 host has its own convolution gap; a GPU never measured takes each kind's typical one
    for gpu in ("Tesla P100-PCIE-16GB", "NVIDIA A100 80GB PCIe"):
        assert launch_gap.gap_us(gpu, gaps, "conv2d") == gaps["kind_gap_us"][gpu]["conv2d"]
    assert launch_gap.gap_us("NVIDIA H100 80GB HBM3", gaps, "linear") == gaps["typical_kind_gap_us"]["linear"]
    # a kind no host timed (batch norm) and traffic (kind None) take the machine's gap
    assert launch_gap.gap_us("Tesla T4", gaps, "batchnorm2d") == gaps["gap_us"]["Tesla T4"]
    assert launch_gap.gap_us("Tesla T4", gaps, None) == gaps["gap_us"]["Tesla T4"]
    # library-backed kinds cost more to issue than a streaming kernel on every host that timed both
    for gpu, kinds in gaps["kind_gap_us"].items():
        if "add" in kinds:
            assert kinds["linear"] > kinds["add"] and kinds["layer_norm"] > kinds["add"]


def test_kind_gaps_are_floors_less_the_hosts_least_streaming_kernel():
    import pandas as pd

    def table(gpu_latencies_us):
        return pd.DataFrame([{"gpu": gpu, "forward_ms": 1e-3 * us} for gpu, values in gpu_latencies_us.items()
                             for us in values])

    # Host A: streaming floors 30, 32, 34 (median 32) with a fitted gap of 20, so its least streaming kernel takes
    # 12 us; its linear floor 60 gives a linear gap of 48. Host B timed linear only: the typical least kernel
    # (12, the only host with streaming kinds) is taken off its floor.
    tables = {"add": table({"A": [30, 90]}), "relu": table({"A": [32, 80]}), "gelu": table({"A": [34, 70]}),
              "linear": table({"A": [60, 400], "B": [70, 500]})}
    per_op = {"A": {k: {"gap_us": 20.0} for k in ("add", "relu", "gelu")}}
    kinds = launch_gap.kind_gaps(tables, per_op, {"A": 20.0})
    assert kinds["A"]["linear"] == pytest.approx(48.0)
    assert kinds["A"]["add"] == 20.0  # the streaming fit, not the floor
    assert kinds["B"] == {"linear": pytest.approx(58.0)}


def test_the_interval_of_a_host_bound_step_spans_the_hosts_spread():
    low, high = launch_gap.host_spread()
    gaps = launch_gap.load()["gap_us"]
    assert low == pytest.approx(min(gaps.values()) / launch_gap.load()["typical_gap_us"]) and low < 1 < high
    tiny = prenet.predict(nn.Sequential(*[nn.Linear(8, 8) for _ in range(20)]), batch=4, gpu="H100",
                          input_shape=(8,), dataset_size=64)
    assert tiny.bound == "host"
    lower, upper = tiny.interval_seconds
    assert lower < tiny.epoch_seconds < upper
    assert upper / tiny.epoch_seconds == pytest.approx(high, rel=0.05)


def _tripled(costs):
    """Host costs (their KEYS only) three times as high: per operator, module, node and optimizer tensor."""
    return {key: ({k: 3 * v for k, v in value.items()} if isinstance(value, dict) else 3 * value)
            for key, value in costs.items() if key in host_cost.KEYS}


def test_host_costs_measured_on_another_machine_are_used_and_a_bad_file_is_named(tmp_path, monkeypatch):
    """PRENET_HOST_COSTS: the host costs of the machine that will train (host_cost's file, or the "cpu" part of
    bench/gpu_host_cost.py's); a file without them is refused, naming what it needs."""
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    def host_ms():
        return prenet.predict(model, batch=4, gpu="H100", input_shape=(8,), dataset_size=8).host_ms

    packaged = host_ms()
    slower = _tripled(host_cost.load(gpu=True))
    (tmp_path / "slow.json").write_text(json.dumps({"cpu": slower, "cuda": {}}))
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "slow.json"))
    assert host_cost.load()["autograd_node_us"] == slower["autograd_node_us"]
    assert host_ms() > packaged
    (tmp_path / "partial.json").write_text(json.dumps({"op_us": 1.0}))
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "partial.json"))
    with pytest.raises(ValueError, match="lacks module_call_us, autograd_node_us, optimizer_tensor_us"):
        host_ms()
    (tmp_path / "broken.json").write_text("{not json")
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "broken.json"))
    with pytest.raises(ValueError, match="is not JSON"):
        host_cost.load()


def test_gpu_steps_take_the_gpu_hosts_costs_and_cpu_steps_the_measured_hosts(tmp_path, monkeypatch):
    """Two packaged files: host_costs.json is the measured CPU host's (its steps' dispatch), gpu_host_costs.json
    what a GPU step's host is given; each prediction reads its own, so slowing one leaves the other's alone."""
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    run = dict(batch=4, input_shape=(8,), dataset_size=8)
    monkeypatch.setattr(host_cost, "cpu_model", lambda: prenet.catalog.host_catalog().rows()[0]["aliases"][-1])
    assert host_cost.load() != host_cost.load(gpu=True)
    before = {gpu: prenet.predict(model, gpu=gpu, **run).host_ms for gpu in ("cpu", "H100")}
    slower = _tripled(host_cost.load(gpu=True))
    (tmp_path / "gpu_host_costs.json").write_text(json.dumps(slower))
    monkeypatch.setattr(host_cost, "PACKAGED_GPU_HOST_COSTS", tmp_path / "gpu_host_costs.json")
    assert prenet.predict(model, gpu="H100", **run).host_ms > before["H100"]
    assert prenet.predict(model, gpu="cpu", **run).host_ms == pytest.approx(before["cpu"], rel=1e-12)


def test_a_cpu_steps_update_is_timed_per_element_on_its_host(tmp_path, monkeypatch):
    """On the CPU the update takes the host's measured time per element and optimizer (host_cost's
    optimizer_element_ns: Adam's square roots and divisions keep it from the memory's pace); host costs without
    that measurement cost it as before, by its passes over memory as add kernels."""
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    elements = sum(p.numel() for p in model.parameters())
    run = dict(batch=4, gpu="cpu", input_shape=(256,), dataset_size=8)
    measured = host_cost.load()["optimizer_element_ns"]
    for optimizer in ("sgd", "adam"):
        estimate = prenet.predict(model, optimizer=optimizer, **run)
        assert estimate.optimizer_ms == pytest.approx(1e-6 * measured[optimizer] * elements, rel=1e-9)
    older = {key: value for key, value in host_cost.load().items() if key != "optimizer_element_ns"}
    (tmp_path / "older.json").write_text(json.dumps(older))
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "older.json"))
    by_passes = prenet.predict(model, optimizer="adam", **run).optimizer_ms
    assert by_passes > 0 and by_passes != pytest.approx(1e-6 * measured["adam"] * elements, rel=1e-3)
    # measured at several sizes (as `python -m prenet.host_cost` writes them since 2026-11-26 22:00 UTC): the model's
    # own, interpolated in log elements, the ends held beyond the sizes measured
    sized = {**host_cost.load(), "optimizer_element_ns": {"sgd": {"1000": 1.0, "1000000": 4.0}}}
    (tmp_path / "sized.json").write_text(json.dumps(sized))
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "sized.json"))
    between = 1.0 + 3.0 * math.log(elements / 1000) / math.log(1000)
    assert prenet.predict(model, optimizer="sgd", **run).optimizer_ms == pytest.approx(1e-6 * between * elements)
    assert host_cost.update_element_ns(sized, "sgd", 10) == 1.0
    assert host_cost.update_element_ns(sized, "sgd", 10 ** 8) == 4.0
    assert host_cost.update_element_ns(sized, "adam", 10 ** 4) is None  # not measured: by its passes over memory


def test_the_update_per_element_is_measured_for_every_optimizer_and_size(monkeypatch):
    monkeypatch.setattr(host_cost, "UPDATE_SIZES", (2 ** 14, 2 ** 16))  # quicker
    measured = host_cost.measure()
    element_ns = measured["optimizer_element_ns"]
    assert set(element_ns) == set(prenet.estimate.OPTIMIZERS)
    for size in ("16384", "65536"):
        # Adam's update does more per element than SGD's
        assert element_ns["adam"][size] > element_ns["sgd_plain"][size] > 0
    # a bernoulli_ draw, element by element from the generator, takes longer than a plain SGD update's element
    assert measured["bernoulli_element_ns"] > element_ns["sgd_plain"]["65536"] > 0


@pytest.mark.filterwarnings("ignore:this machine.s CPU")
def test_a_cpu_steps_dropout_noise_is_timed_per_element_by_its_generator(tmp_path, monkeypatch):
    """On the CPU dropout's bernoulli_ takes the host's measured time per element (host_cost's bernoulli_element_ns);
    host costs without it cost it by its traffic, as before; a GPU runs dropout fused (prenet.fused_dropout)."""
    model = nn.Sequential(nn.Linear(64, 512), nn.Dropout(0.2), nn.Linear(512, 10))
    run = dict(batch=32, input_shape=(64,), dataset_size=64)
    by_traffic = prenet.predict(model, gpu="cpu", **run).ops
    costs = {**host_cost.load(), "bernoulli_element_ns": 7.5}
    (tmp_path / "costs.json").write_text(json.dumps(costs))
    monkeypatch.setenv("PRENET_HOST_COSTS", str(tmp_path / "costs.json"))
    drawn = prenet.predict(model, gpu="cpu", **run).ops
    noise = drawn[drawn.op == "bernoulli_.float"].iloc[0]
    assert noise.how == "generator" and noise.ms == pytest.approx(1e-6 * 7.5 * 32 * 512)
    assert noise.ms > 5 * by_traffic[by_traffic.op == "bernoulli_.float"].iloc[0].ms
    others = drawn.op != "bernoulli_.float"
    assert list(drawn[others].ms) == pytest.approx(list(by_traffic[others].ms))
    on_gpu = prenet.predict(model, gpu="V100", **run).ops
    assert not on_gpu.op.str.startswith("bernoulli").any()


@pytest.mark.filterwarnings("ignore:this machine's CPU")
def test_a_gpu_adds_a_cudnn_convolutions_bias_in_an_operator_of_its_own_and_pytorchs_depthwise_kernel_does_not():
    """cuDNN's backend runs output.add_(bias) after the convolution (aten/src/ATen/native/Convolution.cpp): on a GPU
    that is an add's dispatch and issue on the host and a read and a write of the output on the device, for a plain,
    grouped or transposed convolution; PyTorch's depthwise kernel adds it within itself, and so does oneDNN on the
    CPU."""
    def conv_forward(make, bias, gpu="V100"):
        """(host ms, device ms) of the forward convolution of the layer make(bias), 16 channels over 60 positions."""
        model = nn.Sequential(make(bias), nn.Flatten())
        ops = prenet.predict(model, batch=8, gpu=gpu, input_shape=(16, 60), dataset_size=8).ops
        row = ops[(ops["phase"] == "forward") & ops["op"].str.startswith("convolution")]
        assert len(row) == 1
        return float(row["host_ms"].iloc[0]), float(row["ms"].iloc[0])

    costs = host_cost.load(gpu=True)
    add_issue_ms = 1e-3 * max(costs["op_us"], launch_gap.issue_us("add"))
    plain = lambda bias: nn.Conv1d(16, 32, 5, bias=bias)  # noqa: E731
    for make in (plain, lambda bias: nn.Conv1d(16, 32, 5, groups=4, bias=bias),
                 lambda bias: nn.ConvTranspose1d(16, 32, 5, bias=bias)):
        (host, device), (host_unbiased, device_unbiased) = conv_forward(make, True), conv_forward(make, False)
        assert host - host_unbiased == pytest.approx(add_issue_ms, rel=1e-9)
        assert device > device_unbiased
    bias_kernel_ms = conv_forward(plain, True)[1] - conv_forward(plain, False)[1]
    depthwise = lambda bias: nn.Conv1d(16, 32, 5, groups=16, bias=bias)  # noqa: E731
    (host, device), (host_unbiased, device_unbiased) = conv_forward(depthwise, True), conv_forward(depthwise, False)
    assert host == pytest.approx(host_unbiased, rel=1e-12)
    assert device - device_unbiased < 0.1 * bias_kernel_ms
    assert conv_forward(plain, True, "cpu")[0] == pytest.approx(conv_forward(plain, False, "cpu")[0], rel=1e-12)
