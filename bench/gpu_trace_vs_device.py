"""The operators prenet costs for a GPU's training step against the ones a CUDA GPU dispatches in the same step.

For each model: the op table of prenet.predict(gpu="cuda") (the trace's ops a GPU runs: Op.runs_on "" or "cuda"; the
optimizer's update left out) beside the aten operators a dispatch mode records in a real training step on this
machine's GPU (prenet.dispatched_ops: forward, training_loss, backward; labels resident as the protocol keeps them,
the update left out), counted by name and phase; `detach` left out on both sides (no kernel; the trace keeps only
the ones a step asks for, not autograd's own). The report lists, model by model, the names whose counts differ: a
device-specific path the trace does not take (cuDNN's batch norm, fused attention, fused dropout, a recurrent
layer's cuDNN call), or one it takes wrongly. transformers and torchvision are used where importable. `--device cpu`
does the same for this CPU (prenet.predict(gpu="cpu"): the ops the CPU runs), where no GPU is.

Run on a GPU machine:  python bench/gpu_trace_vs_device.py --out FILE.md
"""
import argparse
import copy
import platform
import time

import torch
from torch import nn

from prenet.dispatched_ops import costed_operators, step_operators


class _TokenModel(nn.Module):
    """Token ids -> logits over the vocabulary through an embedding and `body` (a recurrent layer)."""

    def __init__(self, body, vocabulary=100, width=32):
        super().__init__()
        self.embed, self.body, self.head = nn.Embedding(vocabulary, width), body, nn.Linear(body.hidden_size,
                                                                                             vocabulary)

    def forward(self, tokens):
        return self.head(self.body(self.embed(tokens))[0])


class _Encoder(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.1, batch_first=True)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


def cases(device):
    """(name, model, batch, precision, predict's shape argument, the inputs maker on `device`)."""
    def shaped(*shape):
        return dict(input_shape=shape), lambda b: (torch.randn((b,) + shape, device=device),)

    tokens = torch.randint(100, (1, 12))
    token_input = dict(example_input=tokens), lambda b: (tokens.repeat(b, 1).to(device),)
    found = [
        ("conv with bias, batch norm, dropout", nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.5), nn.Flatten(),
            nn.Linear(8 * 16 * 16, 10)), 8, "fp32") + shaped(3, 16, 16),
        ("MLP with in-place dropout", nn.Sequential(
            nn.Linear(64, 128), nn.Dropout(0.3, inplace=True), nn.ReLU(), nn.Linear(128, 10)), 8, "fp32")
        + shaped(64),
        ("LSTM language model", _TokenModel(nn.LSTM(32, 64, batch_first=True)), 8, "fp32") + token_input,
        ("GRU language model", _TokenModel(nn.GRU(32, 64, num_layers=2, batch_first=True)), 8, "fp32")
        + token_input,
        ("Transformer encoder layer", _Encoder(), 8, "fp32") + shaped(16, 64),
        ("Transformer encoder layer, bf16", _Encoder(), 8, "bf16") + shaped(16, 64),
    ]
    try:
        import torchvision

        found.append(("ResNet-18", torchvision.models.resnet18(num_classes=10), 8, "fp32") + shaped(3, 64, 64))
        found.append(("MobileNetV2", torchvision.models.mobilenet_v2(num_classes=10), 8, "fp32") + shaped(3, 64, 64))
    except ImportError:
        pass
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=64)
        found.append(("Hugging Face GPT-2, 2 small layers", GPT2LMHeadModel(config), 8, "fp32") + token_input)
    except ImportError:
        pass
    return [case for case in found if device == "cuda" or case[3] == "fp32"]  # bf16 is predicted for GPUs only


def compare(device, name, model, batch, precision, shape, make_inputs):
    started = time.perf_counter()
    predicted = costed_operators(copy.deepcopy(model), batch, device, precision, **shape)
    on_device = step_operators(model.to(device).train(), make_inputs(batch), precision, device)
    model.cpu()
    differing = sorted(key for key in set(predicted) | set(on_device) if predicted[key] != on_device[key])
    return {"name": name, "precision": precision, "device_ops": sum(on_device.values()),
            "predicted_ops": sum(predicted.values()), "differing": [(k, on_device[k], predicted[k]) for k in differing],
            "seconds": time.perf_counter() - started}


def report(results, device):
    name = torch.cuda.get_device_name() if device == "cuda" else f"this CPU ({platform.processor() or 'cpu'})"
    lines = [f"# Operators prenet costs for a training step against those {name} dispatches", "",
             f"`python bench/gpu_trace_vs_device.py --device {device}` (torch {torch.__version__}, Python "
             f"{platform.python_version()}). Counts by phase and aten operator in one training step (forward, the "
             "loss, backward; no update).", ""]
    for result in results:
        lines.append(f"## {result['name']} ({result['precision']})")
        lines.append("")
        if "error" in result:
            lines += [f"failed: {result['error']}", ""]
            continue
        lines.append(f"{result['device_ops']} operators dispatched on the device, {result['predicted_ops']} in "
                     f"prenet's table; {len(result['differing'])} (phase, operator) counts differ "
                     f"({result['seconds']:.1f} s)")
        if result["differing"]:
            lines += ["", "| phase | operator | on the device | prenet |", "| --- | --- | ---: | ---: |"]
            lines += [f"| {phase} | {op} | {device} | {ours} |" for (phase, op), device, ours in result["differing"]]
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here (--device cpu compares this CPU's step)")
    results = []
    for case in cases(args.device):
        try:
            results.append(compare(args.device, *case))
        except Exception as error:  # one model's failure is reported, the others still run
            results.append({"name": case[0], "precision": case[3], "error": f"{type(error).__name__}: {error}"})
        print(f"{case[0]}: done", flush=True)
        with open(args.out, "w") as out:  # written after each model: a cut-off run keeps what it did
            out.write(report(results, args.device))


if __name__ == "__main__":
    main()
