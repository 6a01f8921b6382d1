"""A GPU of a fitted GPU's chip with other clocks or bandwidth (prenet.sibling_gpu) is timed through that sibling."""
import pytest
import torch

import prenet
from prenet import predictors
from prenet._native import core
from prenet.catalog import native_catalog
from prenet.sibling_gpu import SiblingBundle, fitted_sibling

V100_PCIE, V100_SXM2 = "Tesla V100-PCIE-32GB", "Tesla V100-SXM2-32GB"


def test_siblings_share_the_chip_and_the_closest_is_taken():
    fitted = predictors.fitted_devices(predictors.PACKAGED_BUNDLE)
    assert fitted_sibling(V100_SXM2, fitted) == V100_PCIE
    # two fitted A100s share the chip; the 80 GB PCIe board is the closer (its HBM2e bandwidth)
    assert fitted_sibling("NVIDIA A100-SXM4-80GB", fitted) == "NVIDIA A100 80GB PCIe"
    assert fitted_sibling("NVIDIA H100 80GB HBM3", fitted) is None
    assert fitted_sibling("NVIDIA GeForce RTX 2080 Ti", fitted) is None  # Turing as the T4, another chip
    assert predictors.served_as(V100_SXM2) == f"through {V100_PCIE}"


def test_a_sibling_is_the_seen_bundles_sibling_scaled_by_the_unseen_bundles_ratio():
    seen, unseen = (core().PredictorBundle(str(folder))
                    for folder in (predictors.PACKAGED_BUNDLE, predictors.PACKAGED_UNSEEN_BUNDLE))
    config = dict(batch=16, seq_len=128, in_features=1024, out_features=4096)
    catalog = native_catalog()

    def forward(bundle, gpu):
        return bundle.estimate("linear", [config], catalog, gpu)[0]["forward_ms"]

    expected = forward(seen, V100_PCIE) * forward(unseen, V100_SXM2) / forward(unseen, V100_PCIE)
    assert prenet.predict_layer("linear", gpu=V100_SXM2, **config) == pytest.approx(expected, rel=1e-12)
    native, _, timed = predictors.resolve(V100_SXM2)
    assert isinstance(native, SiblingBundle) and native.sibling == V100_PCIE and timed == V100_SXM2
    # the sibling's clock is 11% higher, its bandwidth the same: faster, by no more than that
    ratio = expected / forward(seen, V100_PCIE)
    assert 1 / 1.109 - 0.02 < ratio < 1


def test_a_faster_sibling_is_estimated_faster_and_says_through_what():
    """Before siblings, the unseen bundle alone timed the SXM2 V100 21% slower than the PCIe one on VGG-16 at batch
    64 (its own estimate of the PCIe card was 33% above the seen bundle's)."""
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU())
                                  for _ in range(3)], torch.nn.Flatten(), torch.nn.Linear(64 * 28 * 28, 10))
    run = dict(batch=32, input_shape=(64, 28, 28), dataset_size=256)
    pcie, sxm2 = (prenet.predict(model, gpu=gpu, **run) for gpu in (V100_PCIE, V100_SXM2))
    assert 0.85 * pcie.device_ms < sxm2.device_ms < pcie.device_ms
    assert sxm2.extrapolation["timed_through"] == V100_PCIE and "timed_through" not in pcie.extrapolation
    assert f"timed through {V100_PCIE}" in repr(sxm2)
    # every operator is costed as the sibling's ops are: the same bases
    assert list(sxm2.ops["how"]) == list(pcie.ops["how"])
    assert sxm2.interval_seconds[0] < sxm2.epoch_seconds < sxm2.interval_seconds[1]
