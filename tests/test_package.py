"""Packaging: import cost and order, the command line."""
import subprocess
import sys

import pytest


def _python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_import_is_fast_and_does_not_load_torch():
    result = _python("import time, sys; t = time.perf_counter(); import prenet; "
                     "print(time.perf_counter() - t, 'torch' in sys.modules, 'pandas' in sys.modules)")
    seconds, torch_loaded, pandas_loaded = result.stdout.split()
    assert float(seconds) < 0.5
    assert torch_loaded == "False" and pandas_loaded == "False"


@pytest.mark.parametrize("module", ["host_cost", "launch_gap", "step_frame", "gpu_calibration"])
def test_a_modules_command_line_runs_it_once_and_takes_help_for_help(module, tmp_path):
    """`python -m prenet.<module> --help` prints its usage and writes nothing (it had been taken for a file name),
    without runpy's warning that the module, loaded by the package's import, runs again as __main__."""
    result = subprocess.run([sys.executable, "-m", f"prenet.{module}", "--help"], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ") and "RuntimeWarning" not in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("order", ["import torch, prenet", "import prenet, torch"])
def test_import_order_with_torch(order):
    result = _python(order + "; print(prenet.layer_features('linear', batch=1, in_features=2, "
                     "out_features=2)['params'], torch.ones(2).sum().item())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["6.0", "2.0"]


def test_cli_features_writes_every_column(run_prenet, tmp_path):
    out = tmp_path / "features.csv"
    result = run_prenet("features", "torchvision:resnet18", "--batch", "8", "--gpu", "T4",
                        "--input-shape", "3,64,64", "--csv", str(out))
    assert result.returncode == 0, result.stderr
    assert "torchvision:resnet18 at batch 8 on T4" in result.stdout
    assert "60 module calls, 60 in a layer kind" in result.stdout
    import pandas as pd

    table = pd.read_csv(out)
    assert (table["kind"] == "conv2d").sum() == 20
    assert "train_roofline_ms" in table.columns


@pytest.mark.parametrize("args, message", [
    (["features", "torchvision:resnet18", "--gpu", "H1000"], "unknown GPU 'H1000'"),
    (["features", "torchvision:resnet1000"], "torchvision has no model 'resnet1000'; closest: resnet101"),
    (["predict", "torchvision:get_model"], "torchvision has no model 'get_model'"),  # a helper, not a model
    (["features", "resnt18"], "names no model of torchvision or prenet; a spec is a model's name there"),
    (["features", "resnt18"], "closest: torchvision:resnet18"),
])
def test_cli_errors_exit_2_with_a_message(run_prenet, args, message):
    result = run_prenet(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_cli_bad_shape_is_rejected(run_prenet):
    result = run_prenet("features", "torchvision:resnet18", "--input-shape", "3,x,2")
    assert result.returncode == 2
    assert "not a comma-separated list of integers" in result.stderr


def test_cli_lists_gpus_and_kinds(run_prenet):
    gpus = run_prenet("gpus")
    assert gpus.returncode == 0 and "NVIDIA H200" in gpus.stdout
    def row(name):
        return next(line.strip() for line in gpus.stdout.splitlines() if line.strip().startswith(name + " "))

    assert row("Tesla T4").endswith("measured")  # how the predictors serve each GPU, the last column
    assert row("Tesla V100-PCIE-16GB").endswith("as Tesla V100-PCIE-32GB")
    assert row("NVIDIA H100 80GB HBM3").endswith("unseen, distance 0.69")
    kinds = run_prenet("kinds")
    assert kinds.returncode == 0 and "multihead_attention" in kinds.stdout


def test_the_native_core_leaves_the_cpp_locale_alone():
    """The extension module uses no iostreams (their locale crashed every stream of the module built on the GPU
    image, whose compiler links libstdc++ into it; prenet/file_bytes.hpp): a stream header in the core's sources
    brings that back. The harness, a separate program that ran there, may use them."""
    from conftest import ROOT

    stream_headers = ("<sstream>", "<fstream>", "<iostream>", "<istream>", "<ostream>", "<locale>", "<iomanip>")
    sources = [p for folder in ("cpp/src", "cpp/include") for p in (ROOT / folder).rglob("*") if p.is_file()]
    assert len(sources) > 20
    offending = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in sources
                 for line in path.read_text().splitlines()
                 if line.startswith("#include") and any(header in line for header in stream_headers)]
    assert not offending, offending
