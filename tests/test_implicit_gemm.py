"""A convolution's implicit GEMM on tensor cores, scaled by what cuDNN's implicit-GEMM kernels take over the same
product on the GPU (prenet.implicit_gemm, PredictorBundle::implicit_gemm_overhead)."""
import json
from pathlib import Path

import pytest

import prenet
from prenet import implicit_gemm, training
from prenet.predictors import PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE

A100 = "NVIDIA A100 80GB PCIe"
CONV = dict(batch=32, in_channels=128, out_channels=128, kernel_size=3, height=28, width=28, bias=0)


def bundle_with(tmp_path, name, per_gpu):
    """A copy of the packaged unseen-GPU bundle (its model files linked) whose manifest records `per_gpu` as its
    implicit_gemm_overhead (None: no such entry)."""
    folder = tmp_path / name
    folder.mkdir()
    manifest = json.loads((PACKAGED_UNSEEN_BUNDLE / "manifest.json").read_text())
    for entry in manifest["predictors"]:
        for file in training.model_files(entry):
            (folder / file).symlink_to(PACKAGED_UNSEEN_BUNDLE / file)
    manifest.pop("implicit_gemm_overhead", None)
    if per_gpu is not None:
        manifest["implicit_gemm_overhead"] = {"per_gpu": per_gpu}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return str(folder)


@pytest.mark.parametrize("folder", [PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE], ids=lambda f: Path(f).name)
def test_packaged_bundles_record_the_overhead_of_their_own_predictor(folder):
    recorded = json.loads((Path(folder) / "manifest.json").read_text())["implicit_gemm_overhead"]
    rows = implicit_gemm.implicit_rows(implicit_gemm.conv_rows(), *implicit_gemm.timed_by(folder))
    # rel 1e-4: the rows' position model is fitted again here (prenet.measurement_order)
    assert recorded["per_gpu"] == pytest.approx(implicit_gemm.overhead_per_gpu(rows), rel=1e-4)
    assert recorded["rows"] == rows["gpu"].value_counts().to_dict()
    assert (rows["kernel"].str.contains("scudnn") & (rows["forward_ms"] > implicit_gemm.MIN_MS)).all()


def test_tensor_core_convolution_takes_the_nearest_fitted_gpus_overhead(tmp_path):
    def conv_ms(bundle, gpu="H100", precision="fp32"):
        return prenet.predict_layer("conv2d", gpu=gpu, bundle=bundle, precision=precision, **CONV)

    # The H100's nearest GPU among these is the A100 (the T4's figure is never its): the implicit GEMM's time
    # grows in proportion to the A100's figure, while the tensor-core path stays the faster of the two.
    times = [conv_ms(bundle_with(tmp_path, f"b{i}", {A100: x, "Tesla T4": 9.0 - i})) for i, x in
             enumerate((0.5, 1.0, 1.5))]
    assert times[0] < times[1] < times[2]
    assert times[2] - times[1] == pytest.approx(times[1] - times[0], rel=1e-6)
    assert times[1] == pytest.approx(conv_ms(bundle_with(tmp_path, "none", None)), rel=1e-9)  # 1 by default
    # A GPU with its own figure takes it: the T4's (fp16 on its tensor cores) moves with its own, not the A100's.
    t4 = [conv_ms(bundle_with(tmp_path, f"t4_{x}", {A100: 1.0, "Tesla T4": x}), "T4", "fp16") for x in (0.5, 1.0)]
    assert t4[0] < t4[1]
    # CUDA-core convolutions (fp32_strict) are not implicit GEMMs on tensor cores.
    strict = {conv_ms(bundle_with(tmp_path, f"s{x}", {A100: x}), precision="fp32_strict") for x in (0.5, 2.0)}
    assert len(strict) == 1


def test_a_malformed_overhead_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="implicit_gemm_overhead of .* is -1.*not a positive ratio"):
        prenet.predict_layer("conv2d", gpu="H100", bundle=bundle_with(tmp_path, "negative", {A100: -1}), **CONV)
    with pytest.raises(ValueError, match="names a GPU the catalog lacks: unknown GPU 'GPU of the future'"):
        prenet.predict_layer("conv2d", gpu="H100", bundle=bundle_with(tmp_path, "unknown", {"GPU of the future": 1}),
                             **CONV)


def test_leave_one_out_compares_the_nearest_gpu_with_the_others_median():
    per_gpu = {"Tesla V100-PCIE-32GB": 1.0, "Tesla P100-PCIE-16GB": 2.0, "Tesla T4": 4.0}
    left_out = implicit_gemm.leave_one_out(per_gpu)
    assert left_out["Tesla P100-PCIE-16GB"] == (2.0, "Tesla V100-PCIE-32GB", 1.0, 2.5)
    assert set(left_out) == set(per_gpu)
    assert all(own == per_gpu[gpu] for gpu, (own, _, _, _) in left_out.items())


def test_a_gpu_fit_writes_the_overhead_with_its_manifest(tmp_path, monkeypatch):
    """prenet.fit finds the overhead by the bundle it is finishing and writes it in the one manifest it writes, so an
    interrupted fit never leaves a bundle without it; a CPU fit records none."""
    from prenet import fit

    written, real = [], training.write_manifest

    def recorded(folder, entries, provenance, extra=None):
        written.append((Path(folder), dict(extra or {})))
        return real(folder, entries, provenance, extra)

    monkeypatch.setattr(training, "write_manifest", recorded)
    bundle, cpu = tmp_path / "bundle", tmp_path / "cpu"
    for data, folder in (("neusight", bundle), ("cpu", cpu)):
        fit.main(["--data", data, "--kinds", "linear", "conv2d", "--families", "xgboost", "--sets", "ours",
                  "--trees", "20", "--max-rows", "300", "--out", str(folder), "--results", str(tmp_path / "t.md")])
    assert "implicit_gemm_overhead" not in json.loads((cpu / "manifest.json").read_text())
    into_bundle = [extra for folder, extra in written if folder == bundle]
    assert len(into_bundle) == 1 and set(into_bundle[0]) == {"implicit_gemm_overhead"}
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["implicit_gemm_overhead"]["per_gpu"] == pytest.approx(
        implicit_gemm.manifest_entry(*implicit_gemm.timed_by(bundle))["per_gpu"], rel=1e-4)
    assert len(manifest["implicit_gemm_overhead"]["per_gpu"]) == 5
    assert all(ratio > 0 for ratio in manifest["implicit_gemm_overhead"]["per_gpu"].values())
    # the bundle serves a tensor-core convolution with it
    assert prenet.predict_layer("conv2d", gpu="H100", bundle=str(bundle), **CONV) > 0
