"""prenet.measure and prenet.predict on a machine with a CUDA GPU, for the models whose support was written where no
GPU was at hand (lazy modules, SyncBatchNorm, TorchScript, the resident data set's check, gpu="cuda", dropout and
attention as a GPU runs them). Skipped without CUDA; scripts/gpu_session.sh runs them on a lent GPU."""
import pytest
import torch
from torch import nn

import prenet
from prenet.dispatched_ops import costed_operators, step_operators
from prenet.measure import _check_resident, input_maker

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SHAPE = (3, 16, 16)


def small_cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 10))


def measured(model, **kwargs):
    result = prenet.measure(model, batch=8, input_shape=SHAPE, dataset_size=64, device="cuda", **kwargs)
    assert result.iterations == 8 and result.epoch_seconds > 0
    assert result.environment["device_name"] == torch.cuda.get_device_name()
    return result


def test_a_lazy_model_is_measured_and_left_lazy():
    model = nn.Sequential(nn.LazyConv2d(8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
    measured(model)
    assert isinstance(model[0].weight, nn.parameter.UninitializedParameter)


def test_sync_batchnorm_without_a_process_group_is_measured_and_predicted_as_batchnorm():
    plain, synced = small_cnn(), nn.SyncBatchNorm.convert_sync_batchnorm(small_cnn())
    measured(synced)
    assert next(synced.parameters()).device.type == "cpu"  # left where it was
    kwargs = dict(batch=8, input_shape=SHAPE, gpu="cuda", dataset_size=64)
    assert prenet.predict(synced, **kwargs).step_seconds == pytest.approx(prenet.predict(plain, **kwargs).step_seconds)


def test_a_torchscript_model_is_measured_and_predicted():
    model = torch.jit.script(small_cnn())
    measured(model)
    assert prenet.predict(model, batch=8, input_shape=SHAPE, gpu="cuda").step_seconds > 0


def test_bf16_and_fp16_are_measured():
    for precision in ("bf16", "fp16"):
        assert measured(small_cnn(), precision=precision).precision == precision


def test_a_data_set_larger_than_the_gpu_but_not_the_host_is_refused_naming_the_gpu():
    from prenet.measure import available_memory

    free_gpu = torch.cuda.mem_get_info()[0]
    host = available_memory()
    sample = 4 * 3 * 224 * 224
    samples = int(1.1 * free_gpu / sample)
    if host is None or samples * sample >= host:
        pytest.skip("this machine has less memory than its GPU")
    with pytest.raises(ValueError, match=r"cuda's memory"):
        _check_resident(input_maker(small_cnn(), (3, 224, 224), None), samples, torch.device("cuda"))


def test_gpu_cuda_predicts_for_the_gpu_measure_times():
    name = torch.cuda.get_device_name()
    try:
        by_name = prenet.predict(small_cnn(), batch=8, input_shape=SHAPE, gpu=name)
    except ValueError:
        pytest.skip(f"{name} is not in the catalog")
    by_device = prenet.predict(small_cnn(), batch=8, input_shape=SHAPE, gpu="cuda")
    assert by_device.step_seconds == by_name.step_seconds
    with pytest.raises(ValueError, match="cuda:99"):
        prenet.predict(small_cnn(), batch=8, input_shape=SHAPE, gpu="cuda:99")


def costed_and_dispatched(model, shape, batch=8):
    """(operators prenet.predict(gpu="cuda") costs, operators the GPU dispatches) in a training step of `model`, each
    a Counter of (phase, name) (prenet.dispatched_ops)."""
    costed = costed_operators(model, batch, "cuda", input_shape=shape)
    dispatched = step_operators(model.cuda().train(), (torch.randn((batch,) + shape, device="cuda"),), device="cuda")
    return costed, dispatched


def test_dropout_runs_as_one_fused_kernel_each_way_on_the_gpu_as_costed():
    model = nn.Sequential(nn.Linear(64, 128), nn.Dropout(0.5), nn.Linear(128, 10))
    for counts in costed_and_dispatched(model, (64,)):
        assert counts["forward", "native_dropout.default"] == counts["backward", "native_dropout_backward.default"] == 1
        assert not any(name.startswith("bernoulli") for _, name in counts)


def test_in_place_dropout_runs_its_composite_on_the_gpu_as_costed():
    model = nn.Sequential(nn.Linear(64, 128), nn.Dropout(0.5, inplace=True), nn.ReLU(), nn.Linear(128, 10))
    for counts in costed_and_dispatched(model, (64,)):
        assert not any(name.startswith("native_dropout") for _, name in counts)
        assert sum(n for (_, name), n in counts.items() if name.startswith("bernoulli_")) == 1


def test_attention_runs_as_one_fused_kernel_each_way_on_the_gpu_as_costed():
    model = nn.Sequential(nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True), nn.Linear(64, 10))
    for counts in costed_and_dispatched(model, (16, 64)):
        fused = {(phase, name.split(".")[0].endswith("_backward")): n for (phase, name), n in counts.items()
                 if name.startswith("_scaled_dot_product")}
        assert fused == {("forward", False): 1, ("backward", True): 1}
