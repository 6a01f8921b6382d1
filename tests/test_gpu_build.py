"""The GPU collection path, as far as a machine without a GPU can take it: the harness configures and builds the
way scripts/collect_gpu.sh builds it on a GPU machine (torch's CMake prefix, no GoogleTest, CMake-4 policy
floor, no predictor inference), and the binary refuses CUDA with a reason."""
import subprocess
import sys

import torch

from conftest import ROOT


def test_harness_builds_like_the_gpu_script_and_refuses_cuda(tmp_path):
    build = tmp_path / "build"
    configure = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", "-DPRENET_BUILD_TESTS=OFF",
         "-DPRENET_BUILD_PREDICTOR=OFF", "-DCMAKE_POLICY_VERSION_MINIMUM=3.5", f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True, timeout=600)
    assert configure.returncode == 0, configure.stderr
    compiled = subprocess.run(["cmake", "--build", str(build), "--target", "prenet-harness", "_core"],
                              capture_output=True, text=True, timeout=1800)
    assert compiled.returncode == 0, compiled.stdout[-3000:]
    refused = subprocess.run([str(build / "prenet-harness"), "--device", "cuda"], capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 3
    assert "CUDA was requested but is not available" in refused.stderr
    kinds = subprocess.run([str(build / "prenet-harness"), "--list-kinds"], capture_output=True, text=True)
    assert kinds.stdout.split()[:2] == ["linear", "conv2d"]
