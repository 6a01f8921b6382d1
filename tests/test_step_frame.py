"""The CPU step's frame (prenet.step_frame): what the protocol's step does around its operators, and each module
call's Python, measured on this machine and added to a CPU step's host time."""
import numpy as np
import pytest
from torch import nn

from prenet import host_cost, step_frame
from prenet.estimate import OPTIMIZERS, estimate_traced, trace_steps

MODEL = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
MODULES, TENSORS = 6, 6  # the Sequential and its five layers; three weights and three biases


def _cpu_estimate(costs, optimizer="sgd"):
    traced = trace_steps(MODEL, 4, 8, (16,))
    return estimate_traced(traced, 4, "cpu", 8, optimizer, host_costs=costs, calibrated=False)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_cpu_steps_host_time_is_the_frame_each_module_call_and_each_tensors_update(optimizer):
    """With a frame in the host costs: its fixed cost per step, its cost per module call and the optimizer loop's per
    parameter tensor, and nothing else on the host's side (the operators' dispatch is in the CPU predictors' times);
    without one (host costs measured before it was), module calls and the multi-tensor cost per tensor."""
    costs = host_cost.load()
    frame = {"fixed_us": {name: 50.0 + i for i, name in enumerate(OPTIMIZERS)}, "module_us": 7.0,
             "tensor_us": {name: 3.0 + 2 * i for i, name in enumerate(OPTIMIZERS)}}
    framed = _cpu_estimate(dict(costs, step_frame=frame), optimizer)
    frameless = _cpu_estimate({k: v for k, v in costs.items() if k != "step_frame"}, optimizer)
    expected_us = frame["fixed_us"][optimizer] + MODULES * 7.0 + TENSORS * frame["tensor_us"][optimizer]
    assert framed.host_ms == pytest.approx(1e-3 * expected_us, rel=1e-12)
    per_tensor = costs["optimizer_tensor_us"]["adam" if optimizer == "adam" else "sgd_momentum"]
    assert frameless.host_ms == pytest.approx(1e-3 * (MODULES * costs["module_call_us"] + TENSORS * per_tensor),
                                              rel=1e-12)
    # on the CPU host and operators add up: the step moves by exactly the host's difference, the operators' and the
    # update's own time are untouched
    assert framed.device_ms == frameless.device_ms and framed.optimizer_ms == frameless.optimizer_ms
    assert 1e3 * (framed.step_seconds - frameless.step_seconds) == pytest.approx(
        framed.host_ms - frameless.host_ms, rel=1e-9)


def test_the_frame_is_measured_for_every_optimizer_from_the_chains_remainder():
    """Measured here: the chains' measured steps less their predictions without the frame are fitted by a fixed cost
    and a cost per module call (least squares: the remainders left average to zero); every optimizer gets a fixed
    cost and a cost per tensor, Adam's per tensor above plain SGD's (it does more per tensor)."""
    costs = {k: v for k, v in host_cost.load().items() if k != "step_frame"}
    frame = step_frame.measure(tuple(OPTIMIZERS), costs)
    assert set(frame["fixed_us"]) == set(frame["tensor_us"]) == set(OPTIMIZERS)
    assert all(value >= 0 for value in frame["fixed_us"].values()) and frame["module_us"] >= 0
    assert frame["tensor_us"]["adam"] > frame["tensor_us"]["sgd_plain"] > 0
    chains = [c for c in frame["chains"] if c["optimizer"] == "sgd"]
    assert [c["pairs"] for c in chains] == list(step_frame.CHAIN_PAIRS)
    assert [c["modules"] for c in chains] == [2 + 2 * pairs for pairs in step_frame.CHAIN_PAIRS]
    assert all(c["measured_us"] > 0 and c["predicted_us"] > 0 for c in frame["chains"])
    left = [c["measured_us"] - c["predicted_us"] - frame["fixed_us"]["sgd"] - c["modules"] * frame["module_us"]
            for c in chains]
    if frame["module_us"] > 0 and frame["fixed_us"]["sgd"] > 0:  # neither held at 0
        assert np.mean(left) == pytest.approx(0.0, abs=1e-6)


def test_a_host_cost_file_with_a_broken_frame_is_refused_naming_what_it_lacks(tmp_path):
    """A frame is all or nothing: one without an optimizer's figures, or with a module cost that is not a number,
    raises ValueError naming the file, what it lacks and what it needs, not a KeyError deep in a prediction."""
    import json

    costs = host_cost.load()
    frame = {"fixed_us": dict.fromkeys(OPTIMIZERS, 60.0), "module_us": 7.0, "tensor_us": dict.fromkeys(OPTIMIZERS, 3.0)}
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(dict(costs, step_frame=frame)))
    assert host_cost.load(whole)["step_frame"] == frame
    broken = dict(frame, module_us="7", tensor_us={k: v for k, v in frame["tensor_us"].items() if k != "adam"})
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(dict(costs, step_frame=broken)))
    with pytest.raises(ValueError, match=rf"host cost file {path} has a step frame without a number for module_us; "
                                         r"tensor_us of adam: it needs module_us and, for each of sgd, .*fixed_us and "
                                         r"tensor_us"):
        host_cost.load(path)
    with pytest.raises(ValueError, match="the calibration here has a step frame without a number for fixed_us of"):
        host_cost.checked(dict(costs, step_frame=dict(frame, fixed_us={})), "the calibration here")


class _Reused(nn.Module):
    """A Linear called twice and a ReLU three times; with `recurrent`, an LSTM first (traced for real, not on meta
    tensors: prenet.op_trace)."""

    def __init__(self, recurrent=False):
        super().__init__()
        self.rnn = nn.LSTM(8, 8, batch_first=True) if recurrent else None
        self.linear, self.act = nn.Linear(8, 8), nn.ReLU()

    def forward(self, x):
        if self.rnn is not None:
            x = self.rnn(x)[0][:, -1]
        return self.act(self.linear(self.act(self.linear(self.act(x)))))


@pytest.mark.parametrize("recurrent", [False, True])
def test_a_module_called_several_times_pays_its_python_each_time(recurrent):
    """The step counts module calls, not modules: each call runs the module's Python (the frame's cost per module
    call on the CPU, a module call's dispatch on a GPU), traced on meta tensors or for real alike."""
    model = _Reused(recurrent)
    traced = trace_steps(model, 4, 8, (5, 8) if recurrent else (8,))
    assert traced.how == ("cpu" if recurrent else "meta")
    calls = 1 + (1 if recurrent else 0) + 2 + 3  # the model, its LSTM, the Linear twice, the ReLU three times
    assert traced.modules == calls and len(list(model.modules())) == calls - 3  # a second Linear call, two ReLU
    frame = {"fixed_us": dict.fromkeys(OPTIMIZERS, 0.0), "module_us": 10.0, "tensor_us": dict.fromkeys(OPTIMIZERS, 0.0)}
    estimate = estimate_traced(traced, 4, "cpu", 8, "sgd", host_costs=dict(host_cost.load(), step_frame=frame),
                               calibrated=False)
    assert estimate.host_ms == pytest.approx(1e-3 * 10.0 * calls, rel=1e-12)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_gpu_steps_host_gets_the_frames_fixed_cost_and_nothing_else_of_it(optimizer):
    """On a GPU each operator, module call and tensor is costed on the host one by one, so of the frame only its fixed
    cost is added (once, with the update); the packaged GPU host costs hold a frame measured on a CPU host."""
    costs = host_cost.load(gpu=True)
    frame = costs["step_frame"]
    assert frame["fixed_us"][optimizer] > 0 and frame["environment"]["host_cpu"]
    traced = trace_steps(MODEL, 4, 8, (16,))
    framed = estimate_traced(traced, 4, "V100", 8, optimizer, host_costs=costs)
    frameless = estimate_traced(traced, 4, "V100", 8, optimizer,
                                host_costs={k: v for k, v in costs.items() if k != "step_frame"})
    assert framed.host_ms - frameless.host_ms == pytest.approx(1e-3 * frame["fixed_us"][optimizer], rel=1e-9)
    assert framed.device_ms == frameless.device_ms


def test_the_frame_is_written_into_a_host_cost_file_with_this_machines_environment(tmp_path):
    """`python -m prenet.step_frame FILE` (write_into): the file keeps its other costs and gains a whole frame, with
    the machine it was measured on; a file without the host costs, not JSON or missing is refused, naming it, and
    left as it was."""
    import json

    costs = {k: v for k, v in host_cost.load().items() if k != "step_frame"}
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(costs))
    frame = step_frame.write_into(path)
    written = host_cost.load(path)
    assert written["step_frame"] == frame and {k: written[k] for k in costs} == costs
    assert frame["environment"]["host_cpu"] == host_cost.cpu_model()
    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps({"op_us": 1.0}))
    with pytest.raises(ValueError, match=rf"host cost file {lacking} lacks module_call_us"):
        step_frame.write_into(lacking)
    assert json.loads(lacking.read_text()) == {"op_us": 1.0}
    broken = tmp_path / "broken.json"
    broken.write_text('{"op_us": 1.0,')
    with pytest.raises(ValueError, match=rf"host cost file {broken} is not JSON .*python -m prenet.host_cost"):
        step_frame.write_into(broken)
    with pytest.raises(FileNotFoundError, match=r"host cost file .*missing.json is missing"):
        step_frame.write_into(tmp_path / "missing.json")
