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
