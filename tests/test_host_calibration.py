"""Calibration of the CPU predictors to a CPU other than the measured host (prenet.host_calibration)."""
import json
import math
import random
import statistics

import pytest
import torch.nn as nn

import prenet
from prenet import host_calibration, host_cost, predictors
from prenet.collect import Harness
from prenet.sampling import sample_config

OTHER_CPU = "Some Other CPU 9000"


def test_a_curve_follows_the_medians_of_runs_of_points_and_ignores_an_outlier():
    """A Curve joins the medians of runs of PER_RUN points in order of predicted time and is constant beyond the
    first and last runs' medians; one wild point in a run moves its run's median by one point at most."""
    points = [(math.log(ms), 0.5 - 0.25 * math.log(ms)) for ms in [10 ** (i / 8 - 2) for i in range(33)]]
    curve = host_calibration.Curve(points)  # 33 points: 4 runs (of 8, 8, 9 and 8)
    assert len(curve.xs) == 4
    for x, y in zip(curve.xs, curve.ys):
        assert y == pytest.approx(0.5 - 0.25 * x)  # on a line, each run's medians lie on it
    middle = (curve.xs[1] + curve.xs[2]) / 2
    assert curve.factor(math.exp(middle)) == pytest.approx(math.exp(0.5 - 0.25 * middle))
    assert curve.factor(1e-9) == pytest.approx(math.exp(curve.ys[0]))  # held constant beyond the ends
    assert curve.factor(1e9) == pytest.approx(math.exp(curve.ys[-1]))
    points[3] = (points[3][0], 40.0)  # a mean of its run would move by 5; its median moves by one point's step
    step = 0.25 * math.log(10) / 8
    assert max(abs(a - b) for a, b in zip(host_calibration.Curve(points).ys, curve.ys)) <= step + 1e-12
    assert host_calibration.Curve(points[:3]).factor(1.0) == pytest.approx(math.exp(statistics.median(
        y for _, y in points[:3])))  # fewer than a run: its median ratio


def test_a_curve_does_not_carry_the_tiny_layers_slope_to_the_few_largest():
    """Most reference layers of an elementwise kind are tiny: a line through all of them (Theil-Sen, as
    calibrations were once fitted) carried the slope the tiny ones set to the few large ones at the end of the
    range, and made a large ReLU many times its ratio. The curve follows the large ones' own run."""
    tiny = [5e-4 * 20 ** (i / 35) for i in range(36)]  # 0.5-10 us, the time here rising as ms ** 0.3 over them
    points = [(math.log(ms), 0.3 * math.log(ms / 5e-4)) for ms in tiny]
    large = [(math.log(ms), math.log(2.5)) for ms in (0.5, 1.0, 2.0, 4.0)]  # four large ones, 2.5 times
    curve = host_calibration.Curve(points + large)
    line_at_4_ms = (4.0 / 5e-4) ** 0.3
    assert line_at_4_ms > 10
    assert 2.0 < curve.factor(4.0) < 3.0 and curve.factor(100.0) == curve.factor(4.0)


def test_each_kind_takes_the_fit_that_predicts_its_left_out_reference_layers_best():
    """A ratio that follows the predicted time takes the curve; a steady one a factor (a curve fits it as well: the
    simpler); one scattered by the configuration (a convolution's algorithm) around the measured host's time keeps
    the predictions; a noisy one whichever fit's leave-one-out errors are least."""
    def row(kind, predicted, ratio):
        return {"harness_kind": kind, "config": {"t": predicted}, "kind": kind, "native_config": {},
                "predicted_forward_ms": predicted, "predicted_train_ms": predicted, "status": "ok", "error": "",
                "forward_ms": ratio * predicted, "train_ms": ratio * predicted}

    times = [10 ** (i / 8 - 2) for i in range(32)]  # 0.01-7.5 ms
    scatter = [1.0, 0.5, 1.0, 2.0]  # each run of 8 has the median 1
    noise = random.Random(0)
    layers = ([row("relu", ms, (ms / 0.01) ** 0.3) for ms in times] +
              [row("linear", ms, 0.5) for ms in times] +
              [row("bmm", ms, scatter[i % 4]) for i, ms in enumerate(times)] +
              [row("softmax", ms, 0.5 * math.exp(noise.gauss(0.0, 0.3))) for ms in times])
    calibration = host_calibration.Calibration({"host_cpu": OTHER_CPU, "layers": layers,
                                                "host_costs": host_cost.load()}, "test")
    softmax = calibration.points["forward"]["softmax"]
    errors = {fit: host_calibration.leave_one_out_error(fit, softmax) for fit in host_calibration.FITS}
    for part in ("forward", "train"):
        assert calibration.chosen[part] == {"relu": "curve", "linear": "one factor", "bmm": "none",
                                            "softmax": min(errors, key=errors.get)}
    assert errors["none"] > 0.5  # a factor of 2 off
    assert calibration.factor("forward", "relu", 0.3) == pytest.approx(30 ** 0.3, rel=0.1)  # on the trend
    assert calibration.factor("forward", "linear", 0.3) == pytest.approx(0.5)
    assert calibration.factor("forward", "bmm", 0.3) == 1.0
    # every fit stays at hand (bench/calibration_heldout.py compares them); a single point takes its own ratio
    assert calibration.factor("forward", "relu", 0.3, fit="none") == 1.0
    assert calibration.factor("forward", "bmm", 0.3, fit="one factor") == pytest.approx(1.0)
    assert host_calibration.chosen_fit([(0.0, math.log(3.0))]) == "one factor"


def _record(ratios, host_costs=None):
    """A finished calibration record whose layers ran `ratios[kind]` times their predicted times, made with the
    packaged CPU bundle (its stamp)."""
    layers = []
    for kind, ratio in ratios.items():
        for predicted in (0.01, 0.1, 1.0, 10.0):
            layers.append({"harness_kind": kind, "config": {"size": predicted}, "kind": kind, "native_config": {},
                           "predicted_forward_ms": predicted, "predicted_train_ms": 3 * predicted, "status": "ok",
                           "error": "", "forward_ms": ratio * predicted, "train_ms": ratio * 3 * predicted})
    return {"format": host_calibration.FORMAT, "version": host_calibration.VERSION, "host_cpu": OTHER_CPU,
            "layers": layers, "host_costs": host_costs or host_cost.load(), "date": "2026-11-23",
            "bundle": host_calibration.bundle_stamp()}


@pytest.fixture
def other_cpu(monkeypatch, tmp_path):
    """This machine posing as an unmeasured CPU, with an empty calibration cache."""
    monkeypatch.setattr(host_cost, "cpu_model", lambda: OTHER_CPU)
    monkeypatch.setenv("PRENET_CACHE", str(tmp_path))
    return host_calibration.calibration_path()


def test_a_calibration_scales_each_kind_by_its_own_ratio_and_unknown_kinds_by_the_median(other_cpu):
    raw = predictors.load_bundle(str(predictors.PACKAGED_HOST_BUNDLE))
    assert predictors.resolve("cpu")[0] is raw  # no calibration yet: the measured host's predictions
    other_cpu.write_text(json.dumps(_record({"linear": 0.5, "relu": 2.0, "add": 4.0})))
    native, catalog, host = predictors.resolve("cpu")
    assert isinstance(native, host_calibration.CalibratedBundle)
    linear = {"batch": 16, "in_features": 256, "out_features": 512}
    calibrated = native.estimate("linear", [linear], catalog, host, "sgd_momentum", "fp32", {})[0]
    plain = raw.estimate("linear", [linear], catalog, host, "sgd_momentum", "fp32", {})[0]
    for part in ("forward_ms", "backward_ms", "optimizer_ms"):
        assert calibrated[part] == pytest.approx(0.5 * plain[part])
    conv = {"batch": 2, "in_channels": 8, "out_channels": 8, "kernel_size": 3, "height": 16, "width": 16}
    assert (native.estimate("conv2d", [conv], catalog, host, "sgd", "fp32", {})[0]["forward_ms"] ==
            pytest.approx(2.0 * raw.estimate("conv2d", [conv], catalog, host, "sgd", "fp32", {})[0]["forward_ms"]))
    assert native.update_ms([1e6], catalog, host, "sgd", {}) == pytest.approx(
        [4.0 * ms for ms in raw.update_ms([1e6], catalog, host, "sgd", {})])
    assert prenet.predict_layer("linear", gpu="cpu", **linear) == pytest.approx(0.5 * plain["forward_ms"])


def test_pointwise_and_larger_convolutions_are_calibrated_apart(other_cpu):
    record = _record({"linear": 1.0})
    for kernel, ratio, predicted_times in ((1, 0.5, (0.01, 0.1, 1.0, 10.0)), (3, 2.0, (0.01, 0.1, 1.0, 10.0)),
                                           (5, 8.0, (1.0,))):
        for predicted in predicted_times:
            record["layers"].append({
                "harness_kind": "conv2d", "config": {"k": kernel, "t": predicted}, "kind": "conv2d",
                "native_config": {"kernel_size": kernel}, "predicted_forward_ms": predicted,
                "predicted_train_ms": predicted, "status": "ok", "error": "", "forward_ms": ratio * predicted,
                "train_ms": ratio * predicted})
    other_cpu.write_text(json.dumps(record))
    native, catalog, host = predictors.resolve("cpu")
    raw = predictors.load_bundle(str(predictors.PACKAGED_HOST_BUNDLE))
    conv = {"batch": 2, "in_channels": 8, "out_channels": 8, "height": 16, "width": 16}
    for kernel, ratio in ((1, 0.5), (3, 2.0), (7, 2.0)):  # 7x7 is one of the larger kernels
        config = {**conv, "kernel_size": kernel, "padding": kernel // 2}
        calibrated = native.estimate("conv2d", [config], catalog, host, "sgd", "fp32", {})[0]
        plain = raw.estimate("conv2d", [config], catalog, host, "sgd", "fp32", {})[0]
        assert calibrated["forward_ms"] == pytest.approx(ratio * plain["forward_ms"], rel=1e-6), kernel
        assert native.predict("conv2d", "forward", [config], catalog, host, "sgd")[0] == pytest.approx(
            ratio * raw.predict("conv2d", "forward", [config], catalog, host, "sgd")[0], rel=1e-6)
    calibration = host_calibration.load()
    assert calibration.factor("forward", "conv2d", 1.0, {"kernel_size": 1}) == pytest.approx(0.5)
    # without a configuration: the kind's line over all its layers
    assert 0.5 < calibration.factor("forward", "conv2d", 1.0) < 8.0
    assert host_calibration.calibration_group("linear", {"kernel_size": 1}) == "linear"


def test_the_plot_shows_each_kinds_ratios_and_line(other_cpu):
    import matplotlib

    matplotlib.use("Agg")
    other_cpu.write_text(json.dumps(_record({"linear": 0.5, "relu": 2.0, "add": 4.0})))
    figure = host_calibration.load().plot("train")
    panels = [ax for ax in figure.axes if ax.get_visible()]
    # each panel names its kind's chosen fit: a constant ratio is one factor (a curve fits it as well; the simpler)
    assert sorted(ax.get_title() for ax in panels) == ["add: one factor", "linear: one factor", "relu: one factor"]
    linear = next(ax for ax in panels if ax.get_title().startswith("linear"))
    assert len(linear.collections[0].get_offsets()) == 4  # the four reference layers
    assert all(ratio == pytest.approx(0.5) for ratio in linear.lines[0].get_ydata())  # the fitted line


def test_the_command_line_names_each_kinds_chosen_fit_and_draws_them(other_cpu, monkeypatch, capsys, tmp_path):
    """`prenet calibrate` (its timing stood in for by a finished record) prints, per part, each kind's factor at
    1 ms with the fit chosen for it, and the step's frame measured with it; --plot saves the panels."""
    from prenet import cli

    frame = {"fixed_us": {name: 60.0 + i for i, name in enumerate(prenet.estimate.OPTIMIZERS)}, "module_us": 7.25,
             "tensor_us": {name: 3.75 + i for i, name in enumerate(prenet.estimate.OPTIMIZERS)}}

    def calibrate(path=None, progress=True):
        costs = {**host_cost.load(), "step_frame": frame}
        other_cpu.write_text(json.dumps(_record({"linear": 0.5, "relu": 2.0}, costs)))
        return other_cpu

    monkeypatch.setattr(host_calibration, "calibrate", calibrate)
    assert cli.main(["calibrate", "--no-progress", "--plot", str(tmp_path / "ratios.png")]) == 0
    out = capsys.readouterr().out
    assert f"calibrated to this CPU ({OTHER_CPU}, 8 reference layers" in out
    for part in ("forward", "train"):
        line = next(line for line in out.splitlines() if line.startswith(f"{part}:"))
        assert line.endswith("linear 0.50 (one factor), relu 2.00 (one factor)")
    # and the host's work around the operators, measured with the calibration (prenet.step_frame)
    assert ("host work around the operators (prenet.step_frame): a step's frame 60 us with SGD (63 with Adam), 7.2 us "
            "a module call, the optimizer's loop 3.8 us a parameter tensor with SGD (6.8 with Adam)") in out
    assert (tmp_path / "ratios.png").stat().st_size > 0


def test_predict_uses_this_cpus_calibration_and_says_so(other_cpu):
    model = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 4))
    with pytest.warns(UserWarning, match="prenet calibrate"):
        plain = prenet.predict(model, batch=8, gpu="cpu", input_shape=(3, 4, 4), dataset_size=16)
    assert plain.calibrated is None
    costs = {**host_cost.load(), "module_call_us": 0.0, "optimizer_tensor_us": {"sgd_momentum": 0.0, "adam": 0.0},
             "optimizer_element_ns": {name: 0.0 for name in prenet.estimate.OPTIMIZERS}}
    other_cpu.write_text(json.dumps(_record({"linear": 0.25, "relu": 0.25, "add": 0.25}, costs)))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # calibrated: no warning
        calibrated = prenet.predict(model, batch=8, gpu="cpu", input_shape=(3, 4, 4), dataset_size=16)
    assert calibrated.calibrated.startswith(f"calibrated to this CPU ({OTHER_CPU}, 12 reference layers")
    assert "calibrated to this CPU" in repr(calibrated)
    # every layer a quarter of its time; the host's per-module and per-tensor costs and the update's per element
    # are this machine's (here 0)
    assert calibrated.optimizer_ms == 0.0
    assert calibrated.step_seconds == pytest.approx(0.25 * (plain.device_ms - plain.optimizer_ms) * 1e-3, rel=0.05)


def test_on_the_measured_host_a_calibration_is_said_to_go_unused(other_cpu, monkeypatch):
    """`prenet calibrate` on the measured host says that predictions there use its own predictors, not this."""
    assert host_calibration.measured_host_notice() is None  # another CPU: its calibration is used
    measured = prenet.catalog.host_catalog().rows()[0]
    monkeypatch.setattr(host_cost, "cpu_model", lambda: measured["aliases"][-1])
    notice = host_calibration.measured_host_notice()
    assert notice.startswith(f"this CPU is the measured host ({measured['name']})") and "no calibration" in notice
    other_cpu.write_text(json.dumps(_record({"linear": 0.25})))  # ignored there
    assert predictors.resolve("cpu")[0] is predictors.load_bundle(str(predictors.PACKAGED_HOST_BUNDLE))


def test_a_corrupt_or_unfinished_calibration_is_refused_with_the_fix(other_cpu):
    other_cpu.write_text("{not json")
    with pytest.raises(ValueError, match=r"host-some-other-cpu-9000\.json is not a prenet host calibration.*"
                                         r"prenet calibrate"):
        predictors.resolve("cpu")
    record = _record({"linear": 1.0})
    del record["host_costs"]
    other_cpu.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="unfinished calibration; run `prenet calibrate`"):
        prenet.predict_layer("linear", gpu="cpu", batch=1, in_features=4, out_features=4)


def test_reference_layers_span_the_predicted_time_and_the_arithmetic_intensity(monkeypatch):
    monkeypatch.setattr(host_calibration, "CANDIDATES", 30)
    monkeypatch.setattr(host_calibration, "PER_KIND", 4)
    linear = [layer for layer in host_calibration.reference_layers() if layer[2] == "linear"]
    assert 3 <= len(linear) <= 4
    candidates = []
    for index in range(host_calibration.FIRST_INDEX, host_calibration.FIRST_INDEX + 30):
        config = {**sample_config("linear", index), "activation": "none"}
        candidates.append(host_calibration.native_layer("linear", config)[1])
    intensities = [host_calibration.intensity("linear", c) for c in candidates]
    chosen = [host_calibration.intensity("linear", layer[3]) for layer in linear]
    assert max(chosen) == max(intensities) and min(chosen) == min(intensities)
    # ordered by predicted time, the first and the last of the time spread are there too
    trains = [layer[4]["train"] for layer in linear]
    assert trains == sorted(trains)


def test_calibrate_times_reference_layers_and_resumes_after_an_interruption(other_cpu, monkeypatch):
    monkeypatch.setattr(host_calibration, "PER_KIND", 1)
    monkeypatch.setattr(host_calibration, "CANDIDATES", 3)
    monkeypatch.setattr(host_calibration, "MAX_TRAIN_MS", 5.0)
    references = host_calibration.reference_layers()
    assert {native for _, _, native, _, _ in references} >= {"linear", "conv2d", "relu", "lstm", "softmax"}
    assert all(predicted["train"] <= 5.0 for *_, predicted in references)
    timed = []
    original = Harness.time

    def interrupted(self, request_id, kind, config, timeout):
        if len(timed) == 3:
            raise KeyboardInterrupt
        timed.append((kind, config))
        return original(self, request_id, kind, config, timeout)

    monkeypatch.setattr(Harness, "time", interrupted)
    with pytest.raises(KeyboardInterrupt):
        host_calibration.calibrate(progress=False)
    partial = json.loads(other_cpu.read_text())
    assert len(partial["layers"]) == 3 and "host_costs" not in partial  # each timed layer kept
    with pytest.raises(ValueError, match="unfinished"):
        host_calibration.load()
    monkeypatch.setattr(Harness, "time", original)
    host_calibration.calibrate(progress=False)
    record = json.loads(other_cpu.read_text())
    assert len(record["layers"]) == len(references)  # the three already timed were not timed again
    assert record["bundle"] == host_calibration.bundle_stamp()  # the bundle its predictions came from
    assert [row["config"] for row in record["layers"][:3]] == [config for _, config in timed]
    assert all(row["status"] == "ok" and row["forward_ms"] > 0 and row["train_ms"] > 0 for row in record["layers"])
    assert record["host_costs"]["op_us"] > 0 and record["host_costs"]["first_touch_us_per_page"] > 0
    calibration = host_calibration.load()
    assert calibration.layers == len(references)
    assert 0.05 < calibration.factor("forward", "linear", 1.0) < 20
    # a row of a layer no longer among the reference layers (an earlier version's) is dropped by the next run
    record["layers"].append({**record["layers"][0], "config": {**record["layers"][0]["config"], "batch": 10 ** 6}})
    other_cpu.write_text(json.dumps(record))
    host_calibration.calibrate(progress=False)
    assert json.loads(other_cpu.read_text())["layers"] == record["layers"][:-1]


def test_a_calibration_made_with_another_bundle_is_read_with_the_packaged_bundles_predictions(other_cpu,
                                                                                          monkeypatch):
    from prenet.catalog import host_catalog

    raw = predictors.load_bundle(str(predictors.PACKAGED_HOST_BUNDLE))
    catalog = host_catalog()
    host = catalog.rows()[0]["name"]
    layers = []
    for batch in (4, 16, 64, 256):
        config = {"batch": batch, "in_features": 256, "out_features": 512}
        t = raw.estimate("linear", [config], catalog, host, "sgd", "fp32", {})[0]
        train = t["step_forward_ms"] + t["backward_ms"] + t["optimizer_ms"]
        layers.append({"harness_kind": "linear", "config": {**config, "optimizer": "sgd"}, "kind": "linear",
                       "native_config": config, "predicted_forward_ms": 1.0, "predicted_train_ms": 3.0,
                       "status": "ok", "error": "", "forward_ms": 2 * t["forward_ms"], "train_ms": 2 * train})
    record = {**_record({}), "layers": layers, "bundle": "2026-01-01T00:00:00+0000"}  # another bundle's predictions
    other_cpu.write_text(json.dumps(record))
    again = host_calibration.load()
    for ms in (0.01, 1.0, 100.0):  # measured at twice what the packaged bundle predicts, at any size
        assert again.factor("forward", "linear", ms) == pytest.approx(2.0)
        assert again.factor("train", "linear", ms) == pytest.approx(2.0)
    record["bundle"] = host_calibration.bundle_stamp()  # made with the packaged bundle: its stored predictions
    other_cpu.write_text(json.dumps(record))
    stored = host_calibration.load()
    assert stored.factor("forward", "linear", 1.0) != pytest.approx(2.0)
    assert host_calibration.with_current_predictions(record) is record
    # a calibration from before the stamps was made with UNSTAMPED_BUNDLE
    unstamped = {key: value for key, value in record.items() if key != "bundle"}
    monkeypatch.setattr(host_calibration, "bundle_stamp", lambda: host_calibration.UNSTAMPED_BUNDLE)
    assert host_calibration.with_current_predictions(unstamped) is unstamped
    monkeypatch.setattr(host_calibration, "bundle_stamp", lambda: "a bundle fitted later")
    assert host_calibration.with_current_predictions(unstamped)["layers"][0]["predicted_forward_ms"] != 1.0


def test_a_calibration_says_where_fresh_pages_are_costly(other_cpu):
    """The first-touch cost measured with the host costs: above ten times bare metal's, the estimate says that a step
    allocating afresh measures slower, and how to keep memory; cheap or unknown (an older calibration), nothing."""
    costs = {key: value for key, value in host_cost.load().items() if key != "first_touch_us_per_page"}
    for first_touch, noted in ((11.4, True), (0.2, False), (None, False)):
        given = costs if first_touch is None else {**costs, "first_touch_us_per_page": first_touch}
        other_cpu.write_text(json.dumps(_record({"linear": 1.0}, host_costs=given)))
        described = host_calibration.load().describe()
        assert described.startswith("calibrated to this CPU (")
        assert ("fresh page costs 11.4 us here" in described and "keep_memory=True" in described) == noted
