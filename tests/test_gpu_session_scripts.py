"""The scripts a session lent a GPU runs (scripts/gpu_session.sh) run here too, on the CPU, as a dry run: a crash
found on the GPU machine costs minutes of a budget of fifteen."""
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_the_step_host_profile_runs_without_a_gpu_and_reports_phases_beside_the_prediction(tmp_path):
    out = tmp_path / "profile.md"
    done = subprocess.run([sys.executable, str(BENCH / "gpu_step_host_profile.py"), "--batch", "2", "--steps", "2",
                           "--profiled-steps", "1", "--top", "5", "--out", str(out), "--device", "cpu"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = out.read_text()
    assert "resnet18 at batch 2 on the CPU (a dry run of the script)" in report
    for phase in ("zero_grad", "forward", "loss", "backward", "optimizer step", "all five"):
        assert f"| {phase} | " in report
    for part in ("forward (and loss) operators", "backward operators", "update and the step's frame"):
        assert f"| {part} | " in report
    assert re.search(r"Predicted operators: \d+ forward, \d+ backward\. Kernel launches profiled: \d+ a step\.", report)
    events = [line for line in report.splitlines() if line.startswith("| aten::")]
    assert events and len(report.split("| event |")[1].splitlines()) == 2 + 5


def test_a_slim_tree_for_a_device_call_leaves_the_cpu_data_behind_and_restores_the_index(tmp_path):
    root = BENCH.parent
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, timeout=300)
    tracked = subprocess.run(["git", "ls-files"], cwd=clone, capture_output=True, text=True).stdout.split()

    def run(verb):
        return subprocess.run(["bash", "scripts/device_tree.sh", verb], cwd=clone, capture_output=True, text=True,
                              timeout=300)

    slim = run("slim")
    assert slim.returncode == 0, slim.stderr
    size = int(re.search(r"travels: (\d+) MiB of 64", slim.stdout).group(1))
    assert size <= 64
    left = subprocess.run(["git", "ls-files", "data/cpu", "bench/results"], cwd=clone, capture_output=True,
                          text=True).stdout
    assert left == "" and (clone / "data" / "cpu").is_dir()  # out of the index, still on disk
    untracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "data"], cwd=clone,
                               capture_output=True, text=True).stdout
    assert "??" not in untracked  # excluded, so they do not travel as untracked files either
    assert run("slim").returncode == 1  # twice would stack the exclusions
    assert run("restore").returncode == 0
    assert subprocess.run(["git", "ls-files"], cwd=clone, capture_output=True, text=True).stdout.split() == tracked
    assert subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout == ""


class _Event:
    """What bench/gpu_step_device_profile.py reads of a torch.profiler event."""

    def __init__(self, name, parent=None, device=False, device_us=0.0, shapes=None):
        self.name, self.cpu_parent, self.device_time_total = name, parent, device_us
        self.device_type = "DeviceType.CUDA" if device else "DeviceType.CPU"
        self.input_shapes = shapes or []


def test_the_device_profile_attributes_kernels_to_top_level_operators_by_phase_and_counts_steps_on_the_host():
    sys.path.insert(0, str(BENCH))
    try:
        import device_profile_report
        import gpu_step_device_profile as profile
    finally:
        sys.path.remove(str(BENCH))
    step = _Event("Optimizer.step#SGD.step")
    forward = _Event(profile.FORWARD_MARK)
    backward = _Event("autograd::engine::evaluate_function: AddmmBackward0")
    linear = _Event("aten::linear", forward, device_us=30.0, shapes=[[4, 8], [2, 8]])
    events = [step, _Event("Optimizer.step#SGD.step", device=True, device_us=99.0),  # the GPU's copy of it
              forward, _Event(profile.FORWARD_MARK, device=True, device_us=500.0), linear,
              _Event("aten::addmm", linear, device_us=30.0),  # under linear: not counted again
              _Event("aten::mm", backward, device_us=50.0), _Event("aten::_foreach_add_", step, device_us=4.0),
              _Event("aten::copy_", device_us=7.0), _Event("gemm_kernel", device=True, device_us=30.0)]
    steps = sum(1 for e in events if e.name.startswith("Optimizer.step") and not profile._is_device_event(e))
    assert steps == 1
    operators, kernels = profile.step_profile(events, steps)
    assert set(kernels) == {"gemm_kernel"}  # annotation ranges on the GPU's timeline are no kernels
    assert operators == {("forward", "linear", "[[4, 8], [2, 8]]"): [1.0, 30.0], ("backward", "mm", "[]"): [1.0, 50.0],
                         ("update", "_foreach_add_", "[]"): [1.0, 4.0], ("other", "copy_", "[]"): [1.0, 7.0]}
    line = {"operators": [{"phase": p, "op": o, "device_us": us} for (p, o, _), (_, us) in operators.items()]}
    by_family = device_profile_report.measured_by_family(line)
    # the loss and prenet.measure's copies share the "other" phase: the copies are left out
    assert by_family == {("forward", "matrix products"): 0.03, ("backward", "matrix products"): 0.05,
                         ("update", "optimizer"): 0.004}
    assert device_profile_report.family("convolution_backward.default") == "convolutions"
    assert device_profile_report.family("gelu.default") == "elementwise and other"
