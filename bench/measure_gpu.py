"""Measures whole-model training epochs on a CUDA GPU with prenet.measure (docs/measurement_protocol.md), for the cases
that the H100 validation set does not hold: the CPU report's models, recurrent layers as cuDNN and aten's fused
cells run them, fp16 with a GradScaler, TF32 switched on and off, a vision transformer, and BERT-base and GPT-2
both as Hugging Face builds them (where `transformers` is importable) and as prenet.reference_models' stand-ins.
A few cases repeat rows of the H100 validation set, to check that prenet.measure reproduces its measurements.

Run on a GPU machine:  python bench/measure_gpu.py --out FILE.jsonl [--max-minutes M] [--only NAME ...]
One JSON object per case and line (the case, the measurement, the environment: device, host CPU, library
versions); resumable: cases already in FILE are skipped, and each line is written as soon as it is measured.
A case that fails is recorded with its error. Compare with predictions: bench/validate_gpu_measured.py.
"""
import argparse
import json
import platform
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import prenet
from prenet import reference_models
from prenet.reference_models import CellDecoder
from validate_cpu import LstmLanguageModel, Mlp, SmallCnn, TinyTransformer, resnet18_small


class PackedTagger(nn.Module):
    """A two-layer bidirectional GRU over padded sequences packed by their lengths."""

    def __init__(self, vocab=2000, dim=128, hidden=256, tags=20):
        super().__init__()
        self.embed, self.rnn = nn.Embedding(vocab, dim), nn.GRU(dim, hidden, 2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, ids, lengths):
        packed = pack_padded_sequence(self.embed(ids), lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True)
        return self.head(output)


def torchvision_model(name, **options):
    import torchvision

    return lambda: getattr(torchvision.models, name)(weights=None, **options)


def hugging_face(name):
    import transformers

    if name == "bert_base":
        return transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=2))
    return transformers.GPT2LMHeadModel(transformers.GPT2Config())


def bert_input():
    return {"example_input": {"input_ids": torch.randint(30522, (1, 128)), "labels": torch.zeros(1, dtype=torch.long)}}


def gpt2_input():
    ids = torch.randint(50257, (1, 256))
    return {"example_input": {"input_ids": ids, "labels": ids}}


IMAGE = {"input_shape": (3, 224, 224)}
# name: (model factory, predict/measure keyword arguments for the input)
MODELS = {
    "resnet50": (torchvision_model("resnet50"), lambda: IMAGE),
    "resnet18": (torchvision_model("resnet18"), lambda: IMAGE),
    "vgg16": (torchvision_model("vgg16"), lambda: IMAGE),
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), lambda: IMAGE),
    "vit_b_16": (torchvision_model("vit_b_16"), lambda: IMAGE),
    "mlp": (Mlp, lambda: {"input_shape": (1, 28, 28)}),
    "small_cnn": (SmallCnn, lambda: {"input_shape": (3, 32, 32)}),
    "resnet18_64px": (resnet18_small, lambda: {"input_shape": (3, 64, 64)}),
    "lstm_lm": (LstmLanguageModel, lambda: {"example_input": torch.randint(2000, (1, 35))}),
    "transformer": (TinyTransformer, lambda: {"example_input": torch.randint(2000, (1, 64))}),
    "lstm_cell_decoder": (CellDecoder, lambda: {"example_input": torch.randint(2000, (1, 20))}),
    "gru_cell_decoder": (lambda: CellDecoder(nn.GRUCell), lambda: {"example_input": torch.randint(2000, (1, 20))}),
    "packed_gru_tagger": (PackedTagger, lambda: {"example_input": (torch.randint(2000, (1, 48)), torch.tensor([48]))}),
    # the stand-ins with the library's eager attention, as data/epochs measured them (2026-11-24)
    "bert_base_standin": (lambda: reference_models.bert_base(attention="eager"), bert_input),
    "gpt2_standin": (lambda: reference_models.gpt2_small(attention="eager"), gpt2_input),
    "bert_base": (lambda: hugging_face("bert_base"), bert_input),
    "gpt2": (lambda: hugging_face("gpt2"), gpt2_input),
}

# (model, batch, optimizer, precision), most informative first: a time budget keeps the head of the list.
CASES = [
    ("resnet50", 64, "sgd", "fp32"),  # repeats a validation-set row
    ("resnet50", 64, "sgd", "fp16"),
    ("resnet50", 64, "sgd", "bf16"),  # repeats a validation-set row
    ("resnet50", 64, "sgd", "fp32_strict"),
    ("resnet50", 64, "sgd", "tf32"),
    ("resnet18", 16, "sgd", "fp32"),  # repeats a validation-set row (host-bound)
    ("bert_base_standin", 32, "adam", "fp32"),
    ("bert_base", 32, "adam", "fp32"),  # repeats a validation-set row
    ("lstm_lm", 16, "sgd", "fp32"), ("lstm_lm", 64, "sgd", "fp32"),
    ("lstm_cell_decoder", 32, "sgd", "fp32"), ("lstm_cell_decoder", 128, "sgd", "fp32"),
    ("gru_cell_decoder", 32, "sgd", "fp32"),
    ("packed_gru_tagger", 32, "sgd", "fp32"),
    ("transformer", 16, "sgd", "fp32"), ("transformer", 64, "sgd", "fp32"),
    ("mlp", 16, "sgd", "fp32"), ("mlp", 64, "sgd", "fp32"), ("mlp", 256, "sgd", "fp32"),
    ("small_cnn", 16, "sgd", "fp32"), ("small_cnn", 64, "sgd", "fp32"),
    ("resnet18_64px", 8, "sgd", "fp32"), ("resnet18_64px", 32, "sgd", "fp32"),
    ("vit_b_16", 32, "sgd", "fp32"), ("vit_b_16", 32, "sgd", "bf16"),
    ("bert_base_standin", 32, "adam", "bf16"),
    ("resnet50", 32, "adamw", "fp32"),
    ("gpt2_standin", 16, "adam", "fp32"),
    ("gpt2", 16, "adam", "fp32"),  # repeats a validation-set row
    ("resnet18", 64, "sgd", "fp16"), ("mobilenet_v2", 64, "sgd", "bf16"), ("vgg16", 32, "sgd", "bf16"),
    ("bert_base_standin", 32, "adam", "fp16"), ("resnet18", 64, "sgd", "fp32_strict"),
]


def case_key(row):
    return row["model"], row["batch"], row["optimizer"], row["precision"]


def done_cases(path):
    if not path.is_file():
        return set()
    return {case_key(json.loads(line)) for line in path.read_text().splitlines() if line.strip()}


def measure_case(name, batch, optimizer, precision, dataset_size, device):
    factory, inputs = MODELS[name]
    torch.manual_seed(0)
    model = factory()
    started = time.monotonic()
    result = prenet.measure(model, batch=batch, dataset_size=dataset_size, optimizer=optimizer,
                            precision=precision, device=device, **inputs())
    return {"epoch_s": result.epoch_seconds, "epoch_min_s": result.epoch_min_seconds,
            "epoch_max_s": result.epoch_max_seconds, "step_s": result.step_seconds, "iters": result.iterations,
            "epochs_s": result.epochs, "measure_wall_s": time.monotonic() - started, "env": result.environment}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dataset-size", type=int, default=1024)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-minutes", type=float, default=None)
    parser.add_argument("--only", nargs="*", default=None, help="model names to measure (default: every case)")
    args = parser.parse_args()
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
    done = done_cases(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name, batch, optimizer, precision in CASES:
        row = {"model": name, "batch": batch, "optimizer": optimizer, "precision": precision,
               "n": args.dataset_size}
        if case_key(row) in done or (args.only is not None and name not in args.only):
            continue
        if deadline is not None and time.monotonic() > deadline:
            print("time budget spent; run again to continue", flush=True)
            break
        try:
            row.update(measure_case(name, batch, optimizer, precision, args.dataset_size, args.device))
        except ImportError as error:  # transformers missing: skipped, not recorded, so a later run can add it
            print(f"{name}: skipped ({error})", flush=True)
            continue
        except Exception as error:  # recorded, so that the report names what failed
            row.update(status="failed", error=f"{type(error).__name__}: {error}"[:500])
        row.update(python=platform.python_version(), timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"))
        with args.out.open("a") as out:
            out.write(json.dumps(row) + "\n")
        print(f"{name} b{batch} {optimizer} {precision}: "
              + (f"{row['epoch_s']:.4f} s" if "epoch_s" in row else row["error"]), flush=True)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
