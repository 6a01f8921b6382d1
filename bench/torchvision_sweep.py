"""Every torchvision classification model through prenet.predict: does each trace, and are the figures plausible?
A sweep for breadth, not accuracy (no measurement here): one row per model with its parameters, the operators of
its step, the traced path (meta or cpu), and images a second in training predicted on the A100 in fp32 and bf16 and
on the H100 in bf16, at batch BATCH; a model that fails is listed with its error. It found the attention products of
nn.MultiheadAttention traced in fp32 under bf16 (ViT-B/16 at batch 128: 285 images/s on the A100 before, 850
after; docs/how_a_prediction_is_made.md, step 3).
Usage: python bench/torchvision_sweep.py [--batch 128] [--models resnet50 vit_b_16 ...] [--out FILE]"""
import argparse
import time
import warnings

import torch
import torchvision

import prenet
from report import RESULTS, write_report

BATCH = 128
# (gpu, precision) columns
RUNS = (("A100", "fp32"), ("A100", "bf16"), ("H100", "bf16"))
# models whose default build needs arguments here (auxiliary heads off, as in training without them)
BUILD_ARGUMENTS = {"inception_v3": {"aux_logits": False, "init_weights": False},
                   "googlenet": {"aux_logits": False, "init_weights": False}}
INPUT_SIDE = {"inception_v3": 299}


def classification_models():
    """The names of torchvision's classification builders (its model registry where it has one)."""
    if hasattr(torchvision.models, "list_models"):
        return sorted(torchvision.models.list_models(module=torchvision.models))
    return sorted(name for name in dir(torchvision.models) if name[0].islower() and not name.startswith("_") and
                  callable(getattr(torchvision.models, name)) and name not in ("get_weight", "get_model"))


def sweep_row(name, batch):
    """A markdown row for model `name`: its size, its step's operators and images a second on each of RUNS."""
    model = getattr(torchvision.models, name)(**BUILD_ARGUMENTS.get(name, {}))
    side = INPUT_SIDE.get(name, 224)
    parameters = sum(p.numel() for p in model.parameters())
    cells, traced, operators = [], "", 0
    for gpu, precision in RUNS:
        estimate = prenet.predict(model, batch=batch, gpu=gpu, input_shape=(3, side, side), dataset_size=batch,
                                  precision=precision)
        if not cells:  # the first run's (fp32: no casts)
            traced, operators = estimate.traced, len(estimate.ops)
        cells.append(f"{batch / estimate.step_seconds:,.0f}")
    return f"| {name} | {parameters / 1e6:.1f} | {side} | {traced} | {operators} | " + " | ".join(cells) + " |"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--models", nargs="*", help="default: every classification model of torchvision")
    parser.add_argument("--out", default=RESULTS / "torchvision_sweep.md")
    args = parser.parse_args()
    names = args.models or classification_models()
    started, rows, failures = time.monotonic(), [], []
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                line = sweep_row(name, args.batch)
            rows.append(line)
        except Exception as error:  # listed, not fatal: the sweep is for finding such failures
            line = f"- {name}: {type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:200]}"
            failures.append(line)
        print(line, flush=True)
    columns = " | ".join(f"{gpu} {precision} images/s" for gpu, precision in RUNS)
    text = "\n".join([
        "# Every torchvision classification model through prenet.predict", "",
        f"`python bench/torchvision_sweep.py --batch {args.batch}` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s; torch {torch.__version__}, torchvision {torchvision.__version__}). "
        f"Training images a second predicted at batch {args.batch} (SGD with momentum, one step's steady state, "
        "default packaged predictors); `operators`: the fp32 step's traced operators (forward, backward, update). "
        "No measurement: a check that every model traces and that its figures are plausible.", "",
        f"{len(rows)} of {len(names)} models predicted; {len(failures)} failed.", "",
        f"| model | parameters (M) | input side | traced | operators | {columns} |",
        "| --- | --- | --- | --- | --- |" + " --- |" * len(RUNS),
        *rows, "", *(["Failed:", "", *failures, ""] if failures else [])])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
