"""The paper's predictor experiments (Tables 4 and 5, model selection) reproduced on both data sets at reduced
size; writes results/reproduction_cpu.md and results/reproduction_gpu.md (and .json beside them)."""
import numpy as np
import pytest

from conftest import ROOT
from prenet import fit, reproduction, training
from prenet.paper_tables import PAPER_RMSE

RUNS = {"cpu": reproduction.Settings(data="cpu", modes=("train",)),
        "gpu": reproduction.Settings(data="neusight", kinds=("linear", "bmm", "conv2d", "layer_norm", "softmax",
                                                             "relu", "gelu", "add"), modes=("forward",))}


@pytest.fixture(scope="module", params=sorted(RUNS))
def outcome(request):
    result = reproduction.run(RUNS[request.param])
    reproduction.write(result, ROOT / "results" / f"reproduction_{request.param}.md")
    return request.param, result


def test_every_cell_is_finite_and_held_out(outcome):
    name, result = outcome
    settings, cells = RUNS[name], result["cells"]
    data, _ = fit.load_data(settings.data)
    assert set(cells["kind"]) == set(settings.kinds)
    expected = len(settings.families) * len(settings.sets)
    trees = [family for family in settings.families if family in training.TREE_FAMILIES]
    for (kind, mode), group in cells.groupby(["kind", "mode"]):
        # a kind composed of others' kernels adds the tree families over that composition (fit.fit_composed)
        composed = group[group["feature_set"] == "composed"]
        assert len(composed) == (len(trees) if training.composite(kind) else 0), (kind, mode)
        assert (composed["target"] == training.OVER_KERNELS).all()
        assert len(group) - len(composed) == expected, (kind, mode)
        frame = fit.subsample(data[kind], settings.max_rows)
        frame = frame[frame[f"{mode}_ms"] > 0].reset_index(drop=True)
        keys = training.config_keys(kind, frame)
        part = training.split_by_configuration(frame, keys + (["optimizer"] if mode == "train" else []))
        assert (group["test_n"] == (part == "test").sum()).all(), (kind, mode)
        assert (group["validation_n"] == (part == "validation").sum()).all(), (kind, mode)
        for column in ("test_rmse_ms", "test_median_rel", "test_p90_rel", "validation_median_rel",
                       "validation_p90_rel"):
            assert np.isfinite(group[column]).all() and (group[column] >= 0).all(), (kind, mode, column)


def test_chosen_predictor_is_the_best_on_validation(outcome):
    _, result = outcome
    cells = result["cells"]
    for chosen in result["chosen"]:
        group = cells[(cells["kind"] == chosen["kind"]) & (cells["mode"] == chosen["mode"])]
        # nearest issue 4's target (median 5%, 90th percentile 15%) on validation, both errors at once, among the
        # predictors of time over a bound where there are any
        over_bound = group[group["target"] != "log_ms"]
        group = over_bound if len(over_bound) else group
        ratio = np.maximum(group["validation_median_rel"] / 0.05, group["validation_p90_rel"] / 0.15)
        best = group.loc[ratio.idxmin()]
        assert (chosen["family"], chosen["feature_set"]) == (best["family"], best["feature_set"])
        assert chosen["test"]["median_rel"] == best["test_median_rel"]


def test_paper_figures_sit_beside_ours_with_the_improvement_column(outcome):
    name, result = outcome
    table = reproduction.paper_comparison(result["cells"])
    assert len(table) == len(RUNS[name].families) * len(set(result["cells"]["kind"])) * len(RUNS[name].modes)
    cocmct, base = table["cocmct_ms"].to_numpy(), table["baseline_ms"].to_numpy()
    np.testing.assert_allclose(table["improvement_pct"], 100 * (base - cocmct) / base)
    with_paper = table[table["kind"].isin(list(PAPER_RMSE))]
    assert with_paper["paper_baseline_ms"].notna().all()
    text = (ROOT / "results" / f"reproduction_{name}.md").read_text()
    assert "| family | Baseline | CO | COCM | COCMCT | ours | improvement |" in text
    assert "## Model selection" in text


def test_composite_kinds_are_composed_by_the_packaged_bundle_without_their_own_predictors():
    data, _ = fit.load_data("cpu")
    frame = fit.subsample(data["multihead_attention"], 40)
    composed = reproduction.packaged_compositions("cpu", "multihead_attention", frame)
    for mode, values in composed.items():
        assert len(values) == len(frame) and np.isfinite(values).all() and (values > 0).all(), mode
    # composed of its kernels: more than their forward alone in a training step
    assert (composed["train"] > composed["forward"]).all()
    assert reproduction.packaged_compositions("cpu", "conv2d", frame) is None  # a kind of its own kernels
    assert reproduction.packaged_compositions("neusight_device", "multihead_attention", frame) is None
