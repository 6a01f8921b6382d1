"""Keeping freed host memory for reuse (prenet.host_memory) and what measure records of it. Keeping memory changes
the C library for the rest of a process, so it is tried in child processes only."""
import importlib
import json
import subprocess
import sys

import pytest
import torch.nn as nn

import prenet
from prenet import host_memory

# Frees a 64 MiB tensor and prints how much of it the process gave back to the kernel (resident bytes).
FREED_AND_RETURNED = """
import mmap, sys, torch
from prenet import host_memory
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * mmap.PAGESIZE
if sys.argv[1] == "keep":
    host_memory.keep_freed_memory()
tensor = torch.ones(64 * 2 ** 20 // 4)
held = resident()
del tensor
print(held - resident())
"""


def returned_bytes(setting):
    done = subprocess.run([sys.executable, "-c", FREED_AND_RETURNED, setting], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc are Linux's")
def test_kept_memory_is_not_given_back_to_the_kernel_when_a_tensor_is_freed():
    """By default glibc unmaps a freed 64 MiB block (the next step faults in fresh pages); kept, it stays for reuse."""
    assert returned_bytes("default") > 48 * 2 ** 20
    assert returned_bytes("keep") < 16 * 2 ** 20


def test_keeping_memory_without_glibc_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(host_memory.ctypes, "CDLL", lambda name: object())  # a C library without mallopt
    with pytest.raises(RuntimeError, match="needs glibc's malloc"):
        host_memory.keep_freed_memory()
    assert host_memory.allocator() == host_memory.DEFAULT


def test_first_touch_cost_is_measured_per_page(monkeypatch):
    cost = host_memory.first_touch_us_per_page(megabytes=4, repeats=2)
    assert 0 < cost < 1000
    monkeypatch.delattr(host_memory.mmap, "MAP_ANONYMOUS")  # as on Windows: not measured, and nothing said of it
    assert host_memory.first_touch_us_per_page() is None and host_memory.costly_pages_note(None) == ""


def test_measure_warns_where_fresh_pages_are_costly(monkeypatch):
    """With the default allocator, a measurement on a machine whose fresh pages cost ten times bare metal's says that
    it includes their faults; on a cheap one it says nothing."""
    import warnings

    measure = importlib.import_module("prenet.measure")
    monkeypatch.setattr(measure, "minor_faults", lambda: None)  # faults not counted: said whatever their number
    monkeypatch.setattr(host_memory, "first_touch_us_per_page", lambda: 11.4)
    with pytest.warns(UserWarning, match="fresh page costs 11.4 us on this machine.*keep_memory=True"):
        prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), dataset_size=8, device="cpu")
    monkeypatch.setattr(host_memory, "first_touch_us_per_page", lambda: 0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), dataset_size=8, device="cpu")


def test_measure_counts_the_pages_a_step_faults_in_and_says_what_they_cost(monkeypatch):
    """page_faults_per_step: the pages faulted in over each timed epoch (the median epoch), per step; the warning
    puts their cost beside the step's time."""
    import warnings

    measure = importlib.import_module("prenet.measure")
    counter = iter(range(0, 10 ** 9, 120000))  # 120,000 more pages at each reading: one epoch's worth
    monkeypatch.setattr(measure, "minor_faults", lambda: next(counter))
    monkeypatch.setattr(host_memory, "first_touch_us_per_page", lambda: 10.0)
    with pytest.warns(UserWarning, match=r"here 30,000 a step: about 0\.300 s of its"):
        result = prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), dataset_size=16, device="cpu")
    assert result.environment["page_faults_per_step"] == 120000 / 4  # four steps an epoch
    monkeypatch.setattr(measure, "minor_faults", lambda: 7)  # none faulted while it was timed: nothing said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), dataset_size=16, device="cpu")
    assert result.environment["page_faults_per_step"] == 0
    monkeypatch.setattr(measure, "minor_faults", lambda: None)  # a system that does not count them: said, no count
    with pytest.warns(UserWarning, match="land on fresh pages: this measurement"):
        result = prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), dataset_size=16, device="cpu")
    assert result.environment["page_faults_per_step"] is None
    monkeypatch.undo()
    real = measure.minor_faults()
    assert isinstance(real, int) and real > 0 and measure.minor_faults() >= real


def test_measure_records_the_allocator_and_keeps_memory_only_on_the_cpu(run_prenet, tmp_path):
    result = prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), dataset_size=8, device="cpu")
    assert result.environment["allocator"] == host_memory.DEFAULT
    assert result.environment["first_touch_us_per_page"] > 0
    with pytest.raises(ValueError, match="keep_memory is for device='cpu'"):
        prenet.measure(nn.Linear(8, 2), batch=4, input_shape=(8,), device="cuda", keep_memory=True)
    (tmp_path / "tiny.py").write_text("import torch.nn as nn\n\ndef build():\n    return nn.Linear(8, 2)\n")
    done = run_prenet("measure", f"{tmp_path / 'tiny.py'}:build", "--device", "cpu", "--batch", "4",
                      "--input-shape", "8", "--dataset-size", "8", "--keep-memory", "--json", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["environment"]["allocator"] == host_memory.KEPT
    kept = run_prenet("measure", f"{tmp_path / 'tiny.py'}:build", "--device", "cpu", "--batch", "4", "--input-shape",
                      "8", "--dataset-size", "8", "--keep-memory", "--no-progress")
    assert kept.returncode == 0 and kept.stdout.strip().endswith("; freed memory kept>"), kept.stderr
    assert "freed memory kept" not in repr(result)
