import pytest

import prenet
from conftest import ROOT


def test_catalog_has_required_columns_and_accelerators():
    frame = prenet.gpus()
    assert len(frame) >= 25
    for column in ["name", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "memory_bandwidth_gbs",
                   "memory_gb", "sm_count", "boost_clock_mhz", "l2_cache_mb", "bus", "architecture", "year", "source"]:
        assert column in frame.columns
    assert frame["source"].str.len().min() > 0, "every row names its source"
    assert frame["fp32_tflops"].gt(0).all()
    assert frame["name"].is_unique


def test_papers_seven_gpus_match_its_table():
    import pandas as pd

    paper = pd.read_csv(ROOT.parent / "shared" / "data" / "prenet_gpus.csv")
    for _, row in paper.iterrows():
        gpu = prenet.find_gpu(row["GPU"])
        assert gpu["fp32_tflops"] == pytest.approx(row["FP32"] / 1000, rel=1e-3), row["GPU"]
        assert gpu["boost_clock_mhz"] == row["Boost Clock (MHz)"], row["GPU"]
        assert gpu["cuda_cores"] == row["Cores"], row["GPU"]
        assert gpu["memory_gb"] == row["Memory (GB)"], row["GPU"]


@pytest.mark.parametrize("name, expected", [
    ("V100", "Tesla V100-PCIE-16GB"),
    ("tesla v100-pcie-32gb", "Tesla V100-PCIE-32GB"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
    ("h100 pcie", "NVIDIA H100 PCIe"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
    ("a100", "NVIDIA A100-PCIE-40GB"),
    ("Tesla T4", "Tesla T4"),
    ("b200", "NVIDIA B200"),
    ("a40", "NVIDIA A40"),
    ("P40", "Tesla P40"),
])
def test_lookup_by_alias_and_torch_name(name, expected):
    assert prenet.find_gpu(name)["name"] == expected


def test_unknown_gpu_names_the_closest():
    with pytest.raises(ValueError, match=r"unknown GPU 'A1OO'.*NVIDIA A100"):
        prenet.find_gpu("A1OO")
    with pytest.raises(TypeError, match="gpu must be a string"):
        prenet.find_gpu(100)


def test_corrupt_catalog_file_is_reported(tmp_path, monkeypatch):
    from prenet import catalog

    bad = tmp_path / "gpus.csv"
    bad.write_text((ROOT / "data" / "gpus.csv").read_text().replace("14.13", "fast", 1))
    monkeypatch.setenv("PRENET_GPU_CATALOG", str(bad))
    with pytest.raises(RuntimeError, match=r"column 'fp32_tflops' = 'fast' is not a non-negative number"):
        catalog.find_gpu("V100")
    monkeypatch.setenv("PRENET_GPU_CATALOG", str(tmp_path / "missing.csv"))
    with pytest.raises(FileNotFoundError, match="PRENET_GPU_CATALOG"):
        catalog.find_gpu("V100")


def test_host_catalog_of_a_second_cpu_set(monkeypatch, tmp_path):
    """PRENET_HOST_CATALOG points the host catalog at another file, as fitting on data/cpu_intel_xeon needs; the
    packaged one does not know that host, and a missing file is named with the variable."""
    from prenet import catalog

    intel = "Intel(R) Xeon(R) Processor"  # the name the harness recorded for that host
    assert catalog.host_catalog().find("cpu")["name"] == "AMD EPYC Zen 5 (1 thread)"
    with pytest.raises(ValueError, match=r"unknown GPU 'Intel\(R\) Xeon\(R\) Processor'"):
        catalog.host_catalog().find(intel)
    monkeypatch.setenv("PRENET_HOST_CATALOG", str(ROOT / "data" / "hosts_intel_xeon.csv"))
    host = catalog.host_catalog().find(intel)
    assert host["name"] == "Intel Xeon 5th gen (1 thread)" and host["fp32_tflops"] > 0
    assert catalog.host_catalog().find("cpu")["name"] == host["name"]
    monkeypatch.setenv("PRENET_HOST_CATALOG", str(tmp_path / "missing.csv"))
    with pytest.raises(FileNotFoundError, match="PRENET_HOST_CATALOG"):
        catalog.host_catalog()


def test_a_host_is_known_by_its_cpuid_model_not_only_its_name(monkeypatch, tmp_path):
    """Virtual machines give generic model names: two Intel CPUs of this project's machines, CPUID models 207 and
    167, both report "Intel(R) Xeon(R) Processor". The one the predictors were measured on is its host; the
    other, of the same name, is not, and is told so (and calibrates to its own file)."""
    from prenet import catalog, host_calibration, host_cost

    def cpuinfo(*lines):
        path = tmp_path / f"cpuinfo{len(list(tmp_path.iterdir()))}"
        path.write_text("\n".join(lines) + "\n\nprocessor\t: 1\nmodel name\t: the second core\n")
        monkeypatch.setattr(host_cost, "CPUINFO", path)

    monkeypatch.setenv("PRENET_HOST_CATALOG", str(ROOT / "data" / "hosts_intel_xeon.csv"))
    monkeypatch.setenv("PRENET_CACHE", str(tmp_path))
    cpuinfo("processor\t: 0", "cpu family\t: 6", "model\t\t: 207", "model name\t: Intel(R) Xeon(R) Processor")
    assert host_cost.cpu_model() == "Intel(R) Xeon(R) Processor (family 6 model 207)"
    assert catalog.unmeasured_host_warning("cpu") is None
    measured_file = host_calibration.calibration_path()
    cpuinfo("processor\t: 0", "cpu family\t: 6", "model\t\t: 167", "model name\t: Intel(R) Xeon(R) Processor")
    warning = catalog.unmeasured_host_warning("cpu")
    assert "this machine's CPU (Intel(R) Xeon(R) Processor (family 6 model 167)) is not the host" in warning
    assert host_calibration.calibration_path() != measured_file
    cpuinfo("processor\t: 0", "model name\t: Some Board CPU")  # no CPUID family: the name alone
    assert host_cost.cpu_model() == "Some Board CPU"


def test_a_gpu_outclasses_another_of_its_vendor_only_when_as_good_in_every_figure_and_better_in_one():
    from prenet.catalog import outclasses

    gpu = {row["name"]: row for _, row in prenet.gpus().iterrows()}
    h100, a100, v100, t4 = (gpu[prenet.find_gpu(name)["name"]] for name in ("H100", "A100", "V100", "T4"))
    assert outclasses(h100, a100) and outclasses(h100, a100, "bf16") and not outclasses(a100, h100)
    assert outclasses(v100, t4)  # no TF32 on either: their FP32 rates stand in for it
    assert outclasses(a100, v100, "bf16") and not outclasses(v100, a100, "bf16")  # the V100 has no bf16 rate
    assert not outclasses(h100, h100)  # better in none
    l40, a40 = gpu["NVIDIA L40"], gpu["NVIDIA A40"]
    assert l40["tf32_tflops"] == l40["fp32_tflops"] and outclasses(l40, a40)  # a TF32 rate no faster than FP32
    mi300x = gpu["AMD Instinct MI300X"]
    assert not outclasses(mi300x, t4)  # another vendor


def test_cuda_names_this_machines_gpu_as_torch_reports_it(monkeypatch):
    """gpu="cuda" (or "cuda:N") predicts for the GPU this machine has, as prenet.measure(device="cuda") measures
    it; without one, or beyond its GPUs, a ValueError says so."""
    import torch
    import torch.nn as nn

    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"gpu='cuda' names this machine's CUDA GPU, and it has none"):
            prenet.predict(nn.Linear(4, 2), batch=4, gpu="cuda", input_shape=(4,))

    def device_name(device=None):
        if device is not None and device.index not in (None, 0):
            raise AssertionError("Invalid device id")
        return "NVIDIA H100 80GB HBM3"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", device_name)
    assert prenet.find_gpu("cuda")["name"] == prenet.find_gpu("CUDA:0")["name"] == "NVIDIA H100 80GB HBM3"
    assert prenet.predict(nn.Linear(4, 2), batch=4, gpu="cuda", input_shape=(4,)).gpu == "NVIDIA H100 80GB HBM3"
    with pytest.raises(ValueError, match=r"gpu='cuda:3': Invalid device id"):
        prenet.find_gpu("cuda:3")
