"""The paper's unseen-GPU experiment (leave one device out) at reduced size; writes results/unseen_gpu.md (and
.json beside it)."""
import numpy as np
import pytest

from conftest import ROOT
from prenet import unseen_gpu
from prenet.datasets import load_neusight

SETTINGS = unseen_gpu.Settings(trees=100, rows_per_gpu=300)


@pytest.fixture(scope="module")
def outcome():
    result = unseen_gpu.run(SETTINGS)
    unseen_gpu.write(result, ROOT / "results" / "unseen_gpu.md")
    return result


def test_every_device_is_judged_only_after_fitting_without_it(outcome):
    data = load_neusight()
    cells = outcome["cells"]
    assert set(cells["kind"]) == set(data)
    for kind, frame in data.items():
        gpus = sorted(frame["gpu"].unique())
        mine = cells[cells["kind"] == kind]
        assert len(mine) == len(gpus) * len(SETTINGS.sets), kind
        for _, cell in mine.iterrows():
            assert cell["held_out"] not in cell["fitted_on"] and len(cell["fitted_on"]) == len(gpus) - 1
            measured = int(((frame["gpu"] == cell["held_out"]) & (frame["forward_ms"] > 0)).sum())
            rows = min(SETTINGS.rows_per_gpu, measured)
            assert cell["n"] == rows
            assert np.isfinite([cell["rmse_ms"], cell["median_rel"], cell["p90_rel"]]).all()


def test_interval_coverage_is_counted_on_the_device_left_out(outcome):
    coverage = outcome["coverage"]
    assert ((coverage["covered"] >= 0) & (coverage["covered"] <= 1)).all()
    assert coverage["level"].isin(unseen_gpu.LEVELS).all()
    assert (coverage["low"] < coverage["high"]).all()
    text = (ROOT / "results" / "unseen_gpu.md").read_text()
    assert "## Which candidate transfers" in text and "80% intervals" in text


def test_interval_from_other_devices_quantiles():
    residuals = {("a", "ours"): np.linspace(-1, 1, 101), ("b", "ours"): np.linspace(-1, 1, 101),
                 ("c", "ours"): np.array([0.0, 5.0])}
    out = unseen_gpu.interval_coverage(residuals, "ours")
    low, high, covered = out["c"]
    assert low == pytest.approx(np.exp(-0.8)) and high == pytest.approx(np.exp(0.8))
    assert covered == 0.5                                   # 0 inside, 5 outside
    assert 0.75 <= out["a"][2] <= 0.85                      # b and c's 10th-90th percentiles hold ~80% of a


def test_candidates_differ_in_the_gpu_columns_only_as_described():
    gpus = ["Tesla P4", "Tesla T4"]
    baseline, target = unseen_gpu.candidate_inputs("linear", gpus, "baseline")
    assert "gpu=Tesla P4" in baseline and target == "log_ms"
    ours, ours_target = unseen_gpu.candidate_inputs("linear", gpus, "ours")
    efficiency, efficiency_target = unseen_gpu.candidate_inputs("linear", gpus, "efficiency")
    assert ours_target == efficiency_target == "log_ms_over:forward_kernel_bound_ms"
    assert [n for n in ours if not n.startswith("gpu_")] == efficiency and len(ours) > len(efficiency)
    blend, blend_target = unseen_gpu.candidate_inputs("linear", gpus, "blend")  # both forests' inputs
    assert blend == ours and blend_target == ours_target


def test_the_unseen_gpu_bundle_and_its_intervals_are_the_served_candidates():
    """The packaged unseen-GPU bundle, its intervals and a calibrated GPU's intervals all come from the candidate
    prenet.unseen_gpu says is served (a refit with another one would leave the intervals of the old)."""
    import json

    from prenet.predictors import PACKAGED_UNSEEN_BUNDLE

    manifest = json.loads((PACKAGED_UNSEEN_BUNDLE / "manifest.json").read_text())
    assert {entry["feature_set"] for entry in manifest["predictors"]} == {unseen_gpu.SERVED_SET}
    for name in ("intervals.json", "calibrated_intervals.json"):
        assert json.loads((PACKAGED_UNSEEN_BUNDLE / name).read_text())["feature_set"] == unseen_gpu.SERVED_SET


def test_interval_is_widened_until_left_out_devices_are_covered():
    rng = np.random.default_rng(0)
    # each device has its own bias: quantiles of the others at 80% miss much of a device's cases
    residuals = {(gpu, "ours"): rng.normal(bias, 0.1, 400) for gpu, bias in zip("abcde", (-0.15, -0.05, 0, 0.05, 0.15))}
    level, held_out = unseen_gpu.calibrated_level(residuals, "ours")
    assert level > 0.8 and level in unseen_gpu.LEVELS
    assert np.mean([covered for _, _, covered in held_out.values()]) >= 0.8
    narrower = unseen_gpu.LEVELS[unseen_gpu.LEVELS.index(level) - 1]
    assert np.mean([c for _, _, c in unseen_gpu.interval_coverage(residuals, "ours", narrower).values()]) < 0.8
