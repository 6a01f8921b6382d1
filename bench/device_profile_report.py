"""The comparison half of bench/gpu_step_device_profile.py: each profiled case's device time by family of operators
(matrix products, convolutions, normalisation, ...) measured on the GPU beside prenet.predict's for the same step,
forward and backward, and the optimizer's update beside the predicted update.

Measured: the top-level aten operators of the forward and backward passes and the loss (the profile's "other" phase
without its casts and copies, which are prenet.measure's own: the weights kept and put back); predicted: the op
table's device milliseconds (Estimate.ops) by the same families, and optimizer_ms. An operator's family is found by
its aten name, composite (linear, conv2d: what the profiler sees first) or dispatched (addmm, convolution: what
prenet's trace records), from one table.
"""
import json
import time
from collections import defaultdict
from pathlib import Path

import prenet
from report import RESULTS, write_report
from validate_h100 import build

REPORT = RESULTS / "device_profile_h100.md"
# aten operator names (no overload) by family; any other is "elementwise and other"
FAMILIES = {
    "matrix products": ("linear", "addmm", "mm", "bmm", "baddbmm", "matmul", "addbmm"),
    "convolutions": ("conv1d", "conv2d", "convolution", "_convolution", "cudnn_convolution", "convolution_backward"),
    "attention (fused)": ("scaled_dot_product_attention", "_scaled_dot_product_efficient_attention",
                          "_efficient_attention_backward", "_scaled_dot_product_flash_attention",
                          "_flash_attention_backward", "_scaled_dot_product_cudnn_attention",
                          "_cudnn_attention_backward", "_scaled_dot_product_efficient_attention_backward",
                          "_scaled_dot_product_cudnn_attention_backward"),
    "normalisation": ("batch_norm", "native_batch_norm", "cudnn_batch_norm", "_batch_norm_impl_index",
                      "native_batch_norm_backward", "cudnn_batch_norm_backward", "layer_norm", "native_layer_norm",
                      "native_layer_norm_backward"),
    "softmax and loss": ("cross_entropy_loss", "log_softmax", "_log_softmax", "_log_softmax_backward_data",
                         "softmax", "_softmax", "_softmax_backward_data", "nll_loss", "nll_loss_nd",
                         "nll_loss_forward", "nll_loss_backward"),
    "casts and copies": ("to", "_to_copy", "copy_", "clone", "contiguous"),
    "pooling": ("max_pool2d", "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "adaptive_avg_pool2d",
                "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "avg_pool2d", "avg_pool2d_backward"),
    "embedding": ("embedding", "embedding_backward", "embedding_dense_backward"),
    "dropout": ("dropout", "native_dropout", "native_dropout_backward"),
}
FAMILY_OF = {name: family for family, names in FAMILIES.items() for name in names}
OTHER = "elementwise and other"
MEASURE_OWN = FAMILIES["casts and copies"]  # prenet.measure's own copies, in the profile's "other" phase


def family(op_name):
    return FAMILY_OF.get(op_name.split(".")[0], OTHER)


def measured_by_family(line):
    """{(phase, family): ms per step} of a profiled case; the loss (phase "other") counts as forward."""
    times = defaultdict(float)
    for op in line["operators"]:
        phase = op["phase"]
        if phase == "other" and op["op"] not in MEASURE_OWN:
            phase = "forward"
        if phase in ("forward", "backward"):
            times[(phase, family(op["op"]))] += op["device_us"] / 1e3
        elif phase == "update":
            times[("update", "optimizer")] += op["device_us"] / 1e3
    return times


def predicted_by_family(case, gpu):
    """({(phase, family): ms per step}, the estimate) of prenet.predict for a profiled case."""
    model, inputs, source = build(case["model"])
    estimate = prenet.predict(model, batch=case["batch"], gpu=gpu, dataset_size=1024, optimizer=case["optimizer"],
                              precision=case["precision"], **inputs)
    times = defaultdict(float)
    for row in estimate.ops.itertuples():
        times[(row.phase, family(row.op))] += row.ms
    times[("update", "optimizer")] += estimate.optimizer_ms
    return times, estimate, source


def case_section(line, gpu):
    case = line["case"]
    measured = measured_by_family(line)
    predicted, estimate, source = predicted_by_family(case, gpu)
    keys = sorted(set(measured) | set(predicted), key=lambda key: (("forward", "backward", "update").index(key[0]),
                                                                  -max(measured[key], predicted[key])))
    kernel_ms = sum(k["device_us"] for k in line["kernels"] if not k["name"].startswith("Mem")) / 1e3
    rows = [f"| {phase} | {name} | {measured[(phase, name)]:.2f} | {predicted[(phase, name)]:.2f} | "
            f"{predicted[(phase, name)] - measured[(phase, name)]:+.2f} |"
            for phase, name in keys if max(measured[(phase, name)], predicted[(phase, name)]) >= 0.05]
    total_measured, total_predicted = sum(measured.values()), sum(predicted.values())
    built = "" if source == case["source"] else f" (predicted for {source} here, measured as {case['source']})"
    return [f"## {case['model']}, batch {case['batch']}, {case['optimizer']}, {case['precision']}{built}", "",
            f"Step measured {line['step_ms']:.2f} ms (unprofiled), its kernels {kernel_ms:.2f} ms (no copies); "
            f"predicted step {1e3 * estimate.step_seconds:.2f} ms (device {estimate.device_ms:.2f} ms, host "
            f"{estimate.host_ms:.2f} ms). By family, forward (with the loss), backward and update: "
            f"{total_measured:.2f} ms measured, {total_predicted:.2f} ms predicted.", "",
            "| phase | family | measured ms | predicted ms | predicted - measured |",
            "| --- | --- | ---: | ---: | ---: |",
            *rows, ""]


def write_comparison(path, out=None):
    lines = [json.loads(text) for text in Path(path).read_text().splitlines() if text.strip()]
    measured = [line for line in lines if "error" not in line]
    if not measured:
        raise ValueError(f"{path}: no measured case (every line is an error or the file is empty)")
    environment = measured[0]["env"]
    gpu = environment["device_name"]
    started = time.monotonic()
    sections = [row for line in measured for row in case_section(line, gpu)]
    failed = [f"- {line['case']}: {line['error']}" for line in lines if "error" in line]
    text = "\n".join([
        f"# Device time by operator family: measured on the {gpu}, predicted by prenet", "",
        f"`.venv/bin/python bench/gpu_step_device_profile.py --compare {path}` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). Measured by `bench/gpu_step_device_profile.py --measure` "
        f"({environment['measured']}; torch {environment['torch']}, CUDA {environment['cuda']}, host "
        f"{environment['host_cpu']}): torch.profiler's device time of each top-level aten operator, per step. "
        "Predicted: prenet.predict with the packaged GPU predictors (no H100 data fitted), the op table's device "
        "time by family. The validation's H100 data is never fitted on; this says where its misses lie.", "",
        *sections, *(["Cases that failed:", "", *failed, ""] if failed else [])])
    write_report(out or REPORT, text)
