"""Validation of prenet.predict_steps on this machine's CPU (issue 7): predicted against actual SGD steps to reach
50%, 20% and 10% of the initial training loss when fine-tuning a pre-trained network, over a grid of learning
rates, batch sizes and momenta, against a baseline that extrapolates an exponential fitted to the first steps.

Set-up: scikit-learn's digits (1,797 8x8 images, 10 classes, pixels / 16); an MLP 64-H-H-10 (tanh; H = 64, or
--hidden), or with --model cnn a CNN on the 8x8 images (3x3 convolutions 1-C, C-2C, max-pool 2, 2C-2C, each with
tanh, then a linear layer to 10; C = --hidden), with --model resnet a CNN with batch norms and a residual block
(3x3 convolution 1-C, a residual block of two C-C ones, max-pool 2, C-2C, each convolution followed by a batch norm
and ReLU, average pool, linear to 10), or with --model vit a vision Transformer (2x2 patches: 16 tokens of width
D = --hidden, a learned position embedding, two pre-norm blocks of 4-head attention written with linear layers,
matmul and softmax and a GELU MLP 2D wide, a layer norm, the tokens' mean, linear to 10); pre-trained on the five
classes 0-4 (SGD, lr 0.1, momentum 0.9, 30 epochs, seed 0; lr 0.03 for the Transformer), then fine-tuned on all ten
classes with plain PyTorch SGD (cross-entropy) in training mode (batch norms on the batch's statistics), batches
from prenet.loss_dynamics.batch_order (seed 123), the training loss on all 1,797 samples evaluated in eval mode
after every step, up to CAP steps. predict_steps linearises the network in eval mode (batch norms on their running
statistics).
Columns: `predicted` (predict_steps with its defaults: subset 256, 4 sampled runs, the linearisation checked over
30 real steps), its steps extrapolated from
nested subsets by each form of prenet.training_steps.EXTRAPOLATIONS, `linearised, all data` (the linearised
model trained for real on all samples: what the method would give with an unlimited subset), `exp. fit`
(c + a exp(-b t) fitted to the first BASELINE_STEPS steps of the real curve). Errors are |predicted - actual| /
actual; a prediction that never reaches a target the real run reaches counts at the cap. The errors are also given
by the verdict of predict_steps' check (prenet.linearisation_check). The linearised model on
all data needs its explicit Jacobian (samples x outputs x parameters); above JACOBIAN_LIMIT entries (a wide MLP)
that column is left out.
Each configuration is kept as it finishes (REPORT.rows.jsonl beside the report, bench/resumable_rows.py): a run
interrupted and started again with the same options on the same CPU does the configurations left (the tangent
kernel computed again), and the file goes once the report is written.
Usage: python bench/validate_steps.py [--model mlp|cnn|resnet|vit] [--hidden 64] [--lrs 0.01 0.05 0.2]
                                       [--out bench/results/steps_validation.md]
"""
import argparse
import dataclasses
import inspect
import itertools
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import prenet
from prenet.host_cost import cpu_model
from prenet.linearisation_check import LinearisationCheck
from prenet.loss_dynamics import batch_order, first_step_below
from prenet.model_state import in_mode
from prenet.reference_models import _eager_attention, _merge_heads, _split_heads
from prenet.training_steps import EXTRAPOLATIONS, _checkpoints
from report import RESULTS
from resumable_rows import ResumableRows

GRID = dict(lr=(0.01, 0.05, 0.2), batch=(16, 64), momentum=(0.0, 0.9))
FRACTIONS = (0.5, 0.2, 0.1)
CAP = 3000
SUBSET = 256
BASELINE_STEPS = 30
DATA_SEED, ORDER_SEED = 0, 123
JACOBIAN_LIMIT = 4e8  # float32 entries of the all-data Jacobian: 1.6 GB


def digits():
    from sklearn.datasets import load_digits

    data = load_digits()
    return torch.tensor(data.data / 16.0, dtype=torch.float32), torch.tensor(data.target)


def network_name(kind, hidden):
    if kind == "mlp":
        return f"MLP 64-{hidden}-{hidden}-10"
    if kind == "resnet":
        return f"CNN with batch norms, conv 1-{hidden}, residual {hidden}-{hidden}-{hidden}, pool, {2 * hidden}"
    if kind == "vit":
        return f"vision Transformer, 16 tokens of {hidden}, 2 blocks"
    return f"CNN conv 1-{hidden}-{2 * hidden}-pool-{2 * hidden}, linear {2 * hidden * 16}-10"


def conv_norm(channels_in, channels_out):
    """A 3x3 convolution (no bias: the batch norm shifts) and its batch norm."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=False), nn.BatchNorm2d(channels_out))


class Residual(torch.nn.Module):
    """ReLU(x + conv_norm(ReLU(conv_norm(x))))."""

    def __init__(self, channels):
        super().__init__()
        self.first, self.second = conv_norm(channels, channels), conv_norm(channels, channels)

    def forward(self, x):
        return torch.relu(x + self.second(torch.relu(self.first(x))))


class Attention(torch.nn.Module):
    """Multi-head self-attention written with linear layers, matmul and softmax (the reference models' eager
    attention, as Hugging Face's models write it)."""

    def __init__(self, width, heads=4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)

    def forward(self, x):
        q, k, v = (_split_heads(part, self.heads) for part in self.qkv(x).chunk(3, dim=-1))
        return self.out(_merge_heads(_eager_attention(q, k, v)))


class Block(torch.nn.Module):
    """A pre-norm Transformer block: x + attention(LN(x)), then + MLP(LN(x)), the MLP twice as wide, GELU."""

    def __init__(self, width):
        super().__init__()
        nn = torch.nn
        self.norm1, self.attention, self.norm2 = nn.LayerNorm(width), Attention(width), nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(torch.nn.Module):
    """2x2 patches of an 8x8 image as 16 tokens, a learned position embedding, two blocks, a layer norm, the tokens'
    mean, a linear head to 10."""

    def __init__(self, width):
        super().__init__()
        nn = torch.nn
        self.patches = nn.Conv2d(1, width, 2, stride=2)
        self.position = nn.Parameter(0.02 * torch.randn(16, width))
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, 10)

    def forward(self, images):
        tokens = self.patches(images).flatten(2).transpose(1, 2) + self.position
        return self.head(self.norm(self.blocks(tokens)).mean(1))


def network(kind, hidden):
    """(the network of `kind` with `hidden` units or channels (module docstring), its name)."""
    nn = torch.nn
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(64, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                              nn.Linear(hidden, 10))
    elif kind == "resnet":
        model = nn.Sequential(conv_norm(1, hidden), nn.ReLU(), Residual(hidden), nn.MaxPool2d(2),
                              conv_norm(hidden, 2 * hidden), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(2 * hidden, 10))
    elif kind == "vit":
        model = VisionTransformer(hidden)
    else:
        model = nn.Sequential(nn.Conv2d(1, hidden, 3, padding=1), nn.Tanh(),
                              nn.Conv2d(hidden, 2 * hidden, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2),
                              nn.Conv2d(2 * hidden, 2 * hidden, 3, padding=1), nn.Tanh(), nn.Flatten(),
                              nn.Linear(2 * hidden * 16, 10))
    return model, network_name(kind, hidden)


def pretrained(inputs, labels, kind, hidden):
    """The network (see `network`) pre-trained on classes 0-4."""
    torch.manual_seed(DATA_SEED)
    model, _ = network(kind, hidden)
    half = labels < 5
    x, y = inputs[half], labels[half]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03 if kind == "vit" else 0.1, momentum=0.9)
    for _ in range(30):
        for rows in torch.randperm(len(x)).split(32):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
            optimizer.step()
    return model


def fine_tune(model, inputs, labels, lr, batch, momentum, stop_loss, training_mode=True):
    """Real SGD from the model's weights, its steps in training mode or, without `training_mode`, in eval mode
    (batch norms frozen: their running statistics, as predict_steps linearises the network): (training loss after
    0, 1, ... steps, seconds spent in the steps)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    order = batch_order(len(inputs), batch, ORDER_SEED)
    losses, seconds = [], 0.0
    with in_mode(model, training_mode):
        for step in range(CAP + 1):
            with torch.no_grad(), in_mode(model, False):
                losses.append(torch.nn.functional.cross_entropy(model(inputs), labels).item())
            if losses[-1] <= stop_loss or step == CAP or not np.isfinite(losses[-1]):
                break
            rows = torch.as_tensor(next(order))
            started = time.perf_counter()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs[rows]), labels[rows]).backward()
            optimizer.step()
            seconds += time.perf_counter() - started
    return np.array(losses), seconds


def first_below(losses, target):
    below = np.nonzero(losses <= target)[0]
    return int(below[0]) if len(below) else None


def exponential_baseline(losses, target):
    """First step at which c + a exp(-b t), fitted to the first BASELINE_STEPS losses, reaches target."""
    from scipy.optimize import curve_fit

    t = np.arange(min(BASELINE_STEPS, len(losses)))
    y = losses[:len(t)]
    if not np.isfinite(y).all():  # the run diverged within them
        return None
    try:
        (a, b, c), _ = curve_fit(lambda s, a, b, c: c + a * np.exp(-b * s), t, y, p0=(y[0] - y[-1], 0.1, y[-1]),
                                 maxfev=20000)
    except RuntimeError:
        return None
    if target <= c or b <= 0 or a <= 0:
        return None
    return max(0, int(np.ceil(np.log(a / (target - c)) / b)))


def all_data_jacobian(model, inputs):
    """(the Jacobian of the outputs over every parameter on all `inputs` (samples, outputs, parameters), the outputs),
    float32, of the network linearised as predict_steps does (eval mode: batch norms on their running statistics)."""
    from prenet.tangent_kernel import jacobian_chunks, model_outputs

    with in_mode(model, False):
        jacobian = torch.cat(list(jacobian_chunks(model, inputs))).float()
        return jacobian, torch.from_numpy(model_outputs(model, inputs)).float()


def linearised_all_data(jacobian, f0, labels, lr, batch, momentum, targets):
    """Steps at which the linearised model (all_data_jacobian's `jacobian` and outputs `f0`), trained for real on
    every sample, reaches each target (its loss evaluated at predict_steps' checkpoints: every step to 200, then
    every 0.5%)."""
    delta = torch.zeros(jacobian.shape[2], requires_grad=True)
    optimizer = torch.optim.SGD([delta], lr=lr, momentum=momentum)
    order = batch_order(len(f0), batch, ORDER_SEED)
    checkpoints = _checkpoints(CAP)          # the loss on all samples at predict_steps' checkpoints only
    losses = []
    torch.set_num_threads(2)
    for step in range(CAP + 1):
        if step == checkpoints[len(losses)]:
            with torch.no_grad():
                losses.append(torch.nn.functional.cross_entropy(f0 + jacobian @ delta, labels).item())
            if losses[-1] <= min(targets) or not np.isfinite(losses[-1]):
                break
        rows = torch.as_tensor(next(order))
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(f0[rows] + jacobian[rows] @ delta, labels[rows]).backward()
        optimizer.step()
    torch.set_num_threads(1)
    return [first_step_below(checkpoints[:len(losses)], np.array(losses), t) for t in targets]


def error(predicted, actual):
    if actual is None:
        return None
    return abs((CAP if predicted is None else predicted) - actual) / actual


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a", "n/a"
    return f"{100 * statistics.median(values):.1f}%", f"{100 * float(np.percentile(values, 90)):.1f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("mlp", "cnn", "resnet", "vit"), default="mlp",
                        help="the network (docstring)")
    parser.add_argument("--hidden", type=int, default=64, help="width of the MLP's two hidden layers, the CNNs' "
                        "first channels, or the Transformer's width")
    parser.add_argument("--batch-norm", choices=("training", "frozen"), default="training",
                        help="fine-tune with batch norms on the batch's statistics (training mode) or frozen on "
                        "their running ones (eval mode)")
    parser.add_argument("--lrs", type=float, nargs="+", default=GRID["lr"], help="the grid's learning rates")
    parser.add_argument("--out", default=RESULTS / "steps_validation.md")
    args = parser.parse_args()
    grid = {**GRID, "lr": tuple(args.lrs)}
    warnings.simplefilter("ignore", prenet.LinearisationWarning)   # the check's verdict is reported per configuration
    torch.set_num_threads(1)
    inputs, labels = digits()
    if args.model != "mlp":
        inputs = inputs.reshape(-1, 1, 8, 8)
    model = pretrained(inputs, labels, args.model, args.hidden)
    parameters = sum(p.numel() for p in model.parameters())
    all_data = len(inputs) * 10 * parameters <= JACOBIAN_LIMIT
    state = {k: v.clone() for k, v in model.state_dict().items()}
    linearisation = all_data_jacobian(model, inputs) if all_data else None  # the same weights in every configuration
    with torch.no_grad(), in_mode(model, False):
        initial = torch.nn.functional.cross_entropy(model(inputs), labels).item()
    targets = [f * initial for f in FRACTIONS]
    out = Path(args.out)
    setup = dict(model=args.model, hidden=args.hidden, batch_norm=args.batch_norm, lrs=list(args.lrs),
                 initial=repr(initial), cpu=cpu_model(), torch=torch.__version__)
    kept = ResumableRows(out.with_name(out.name + ".rows.jsonl"), setup)
    kernel = None
    for lr, batch, momentum in itertools.product(*grid.values()):
        key = f"{lr}|{batch}|{momentum}"
        if key in kept.done:
            continue
        model.load_state_dict(state)
        predicted = prenet.predict_steps(model, (inputs, labels), target_loss=targets, lr=lr, batch=batch,
                                         momentum=momentum, subset=SUBSET, max_steps=CAP, kernel=kernel,
                                         check_mode="train" if args.batch_norm == "training" else "eval")
        kernel = predicted.kernel
        nested = prenet.predict_steps(model, (inputs, labels), target_loss=targets, lr=lr, batch=batch,
                                      momentum=momentum, subset=SUBSET, max_steps=CAP, extrapolate="log",
                                      kernel=kernel, check_steps=0)
        linear = (linearised_all_data(*linearisation, labels, lr, batch, momentum, targets) if all_data else
                  [None] * len(targets))
        losses, train_seconds = fine_tune(model, inputs, labels, lr, batch, momentum, min(targets),
                                          args.batch_norm == "training")
        cells = []
        for fraction, target, p, lin in zip(FRACTIONS, targets, predicted.steps, linear):
            actual = first_below(losses, target)
            forms = {f"extrapolated_{form}": nested.steps_to(target, form) for form in EXTRAPOLATIONS}
            cells.append(dict(lr=lr, batch=batch, momentum=momentum, fraction=fraction, actual=actual, predicted=p,
                              linearised=lin, baseline=exponential_baseline(losses, target), **forms,
                              predict_seconds=predicted.seconds, train_seconds=train_seconds,
                              steps_trained=len(losses) - 1, check=check_record(predicted.check)))
        kept.add(key, dict(cells=cells, kernel_seconds=kernel.seconds, parameters=kernel.parameters,
                           kernel_made=predicted.kernel_seconds > 0))
        print(f"lr {lr} batch {batch} momentum {momentum}: actual "
              f"{[c['actual'] for c in cells]} predicted {predicted.steps} ({predicted.seconds:.1f} s; "
              f"training {train_seconds:.1f} s; {predicted.check.summary})", flush=True)
    records = [kept.done[f"{lr}|{batch}|{momentum}"] for lr, batch, momentum in itertools.product(*grid.values())]
    rows = [{**cell, "check": LinearisationCheck(**{k: (np.array(v) if isinstance(v, list) else v)
                                                    for k, v in cell["check"].items()})}
            for record in records for cell in record["cells"]]
    write(rows, initial, records, out, args, all_data)
    kept.finish()


def check_record(check):
    """A LinearisationCheck's fields as JSON values (its arrays as lists; a diverged loss's infinities as JSON's)."""
    return {name: (value.tolist() if isinstance(value, np.ndarray) else value)
            for name, value in dataclasses.asdict(check).items()}


def write(rows, initial, records, out, args, all_data):
    """The report of `rows` (every cell) from `records` (each configuration's record: its cells, and the kernel it
    used: seconds, parameters, whether made there)."""
    hidden, lrs, label = args.hidden, args.lrs, network_name(args.model, args.hidden)
    label += ", batch norms frozen" if args.batch_norm == "frozen" else ""
    default = inspect.signature(prenet.predict_steps).parameters["extrapolate"].default
    methods = [("predicted", f"predict_steps (extrapolate={default})"),
               ("linearised", "linearised, all data"), ("baseline", f"exp. fit, first {BASELINE_STEPS} steps")]
    if not all_data:
        methods = [m for m in methods if m[0] != "linearised"]
    options = (f" --model {args.model}" if args.model != "mlp" else "") + (
        " --batch-norm frozen" if args.batch_norm == "frozen" else "") + (
        f" --hidden {hidden}" if hidden != 64 else "") + (
        f" --lrs {' '.join(map(str, lrs))}" if tuple(lrs) != GRID["lr"] else "")
    # the report's path as from the repository's root, where the command is run from
    shown = os.path.relpath(out.resolve(), RESULTS.parent.parent)
    command = "python bench/validate_steps.py" + (f"{options} --out {shown}" if options else "")
    lines = [f"# predict_steps on the CPU: digits {label} fine-tuning "
             f"({len(rows) // len(FRACTIONS)} configurations x {len(FRACTIONS)} targets)", "",
             f"Regenerate: `{command}`. Set-up in the script's docstring. Initial training loss "
             f"{initial:.4f} (targets {', '.join(f'{f:.0%}' for f in FRACTIONS)} of it); cap {CAP} steps; "
             f"torch {torch.__version__}, {cpu_model()}, one thread.", "",
             "## Summary (relative error of predicted steps against the real run, cells it reached)", "",
             "| method | median | 90th percentile | cells |", "|---|---|---|---|"]
    for key, name in methods:
        errors = [error(r[key], r["actual"]) for r in rows]
        median, p90 = summary(errors)
        lines.append(f"| {name} | {median} | {p90} | {sum(e is not None for e in errors)} |")
    lines += ["", "By target:", "", "| target | " + " | ".join(n for _, n in methods) + " |",
              "|---|" + "---|" * len(methods)]
    for fraction in FRACTIONS:
        cells = [r for r in rows if r["fraction"] == fraction]
        lines.append(f"| {fraction:.0%} | " + " | ".join(summary([error(r[k], r["actual"]) for r in cells])[0]
                                                          for k, _ in methods) + " |")
    lines += check_section(rows)
    lines += ["", "## Carrying the subset to the whole set", "",
              f"Extrapolated from nested subsets of the {SUBSET}-sample one ({SUBSET} x 2^(-k/2), those of two "
              "batches or more) with each form, judged against the real run and "
              "against the linearised model trained on all 1,797 samples (what an unlimited subset would give: "
              "the quantity the extrapolation estimates). Median / 90th percentile relative error.", "",
              "| extrapolation | against the real run | against the linearised model on all data |", "|---|---|---|"]
    real = summary([error(r["predicted"], r["actual"]) for r in rows])
    linear = summary([error(r["predicted"], r["linearised"]) for r in rows])
    lines.append(f"| none (the {SUBSET}-sample subset's own steps) | {real[0]} / {real[1]} | {linear[0]} / "
                 f"{linear[1]} |")
    for key, name in [(f"extrapolated_{form}", form) for form in EXTRAPOLATIONS]:
        real = summary([error(r[key], r["actual"]) for r in rows])
        linear = summary([error(r[key], r["linearised"]) for r in rows])
        lines.append(f"| {name} | {real[0]} / {real[1]} | {linear[0]} / {linear[1]} |")
    configs = rows[::len(FRACTIONS)]
    made = [record["kernel_seconds"] for record in records if record["kernel_made"]]
    simulate = [r["predict_seconds"] for r in configs]
    train = [r["train_seconds"] for r in configs]
    checks = [r["check"].seconds for r in configs]
    # an interrupted run resumed (bench/resumable_rows.py) computed the kernel again in each run
    reuse = ("computed once and reused by every configuration" if len(made) == 1 else
             f"computed in each of {len(made)} runs, interrupted and resumed, and reused by its configurations")
    lines += ["", "## Cost", "",
              f"Tangent kernel (256 samples x 10 outputs, {records[0]['parameters']} parameters, {reuse}): "
              f"{', '.join(f'{s:.1f}' for s in made)} s. Per configuration, the simulation (4 sampled runs) "
              f"and the check: median {statistics.median(simulate):.1f} s, of which the check's "
              f"{configs[0]['check'].steps} real steps median {statistics.median(checks):.2f} s. Real training to "
              f"the lowest target (steps only, loss evaluations excluded): median "
              f"{statistics.median(train):.2f} s, max {max(train):.2f} s. All {len(configs)} configurations: "
              f"predicted in {sum(simulate):.1f} s (the kernel included {'once' if len(made) == 1 else 'in each run'}"
              f"), trained in {sum(train):.1f} s; prediction / training {sum(simulate) / sum(train):.2f}.", "",
              "| lr | batch | momentum | steps trained | training s | prediction s ("
              + ("first incl. kernel" if len(made) == 1 else "with the kernel where made") + ") | check s |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['lr']} | {r['batch']} | {r['momentum']} | {r['steps_trained']} | {r['train_seconds']:.2f} | "
              f"{r['predict_seconds']:.2f} | {r['check'].seconds:.2f} |" for r in configs]
    forms = list(EXTRAPOLATIONS)
    lines += ["", "## Every cell", "", "| lr | batch | momentum | target | actual | predicted | "
              + " | ".join(f"{form} extrap." for form in forms) + " | linearised, all data | exp. fit |",
              "|" + "---|" * (8 + len(forms))]
    show = lambda v: "never" if v is None else str(v)  # noqa: E731
    lines += [f"| {r['lr']} | {r['batch']} | {r['momentum']} | {r['fraction']:.0%} | {show(r['actual'])} | "
              f"{show(r['predicted'])} | " + " | ".join(show(r[f'extrapolated_{form}']) for form in forms)
              + f" | {show(r['linearised']) if all_data else 'n/a'} | "
              f"{show(r['baseline'])} |" for r in rows]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    plot(rows, out.with_suffix(".png"), label)
    print("\n".join(lines[:16]))
    print(f"written {out} and {out.with_suffix('.png')}")


def check_section(rows):
    """The lines of the report on predict_steps' linearisation check: the errors of the cells it passes and fails,
    and each configuration's verdict."""
    from prenet.linearisation_check import GAP_LIMIT, PACE_LIMIT, VERDICTS

    lines = ["", "## The linearisation check", "",
             f"predict_steps' check: {rows[0]['check'].steps} real SGD steps ({rows[0]['check'].mode} mode, as "
             "the real runs) on the kernel's "
             f"{SUBSET} samples against the linearised model's on the same batches; it fails where the network "
             f"needs more than {PACE_LIMIT:g} times the linearised model's steps or less than 1/{PACE_LIMIT:g} of "
             f"them, or where the losses stay more than {np.exp(GAP_LIMIT):.2g} times apart at the best pace "
             "(root-mean-square). The errors of predict_steps' steps (median / 90th percentile) by verdict:", "",
             "| verdict | configurations | cells | error of steps |", "|---|---|---|---|"]
    for holds, name in VERDICTS.items():
        cells = [r for r in rows if r["check"].holds is holds]
        if cells:
            errors = [error(r["predicted"], r["actual"]) for r in cells]
            median, p90 = summary(errors)
            lines.append(f"| {name} | {len(cells) // len(FRACTIONS)} | {sum(e is not None for e in errors)} | "
                         f"{median} / {p90} |")
    lines += ["", "| lr | batch | momentum | pace | gap | verdict | error of steps at 50 / 20 / 10% |",
              "|---|---|---|---|---|---|---|"]
    for start in range(0, len(rows), len(FRACTIONS)):
        cells = rows[start:start + len(FRACTIONS)]
        check = cells[0]["check"]
        errors = " / ".join("n/a" if e is None else f"{100 * e:.0f}%"
                            for e in (error(r["predicted"], r["actual"]) for r in cells))
        pace = "n/a" if check.pace is None else f"{check.pace:.2g}"
        gap = "n/a" if check.gap is None else f"{check.gap:.2f}"
        lines.append(f"| {cells[0]['lr']} | {cells[0]['batch']} | {cells[0]['momentum']} | {pace} | {gap} | "
                     f"{check.verdict} | {errors} |")
    return lines


def plot(rows, path, label):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for key, label, marker in (("predicted", "predict_steps", "o"), ("baseline", "exp. fit", "x")):
        cells = [r for r in rows if r["actual"] and r[key]]
        ax.scatter([r["actual"] for r in cells], [r[key] for r in cells], marker=marker, label=label)
    top = max(r["actual"] or 1 for r in rows) * 2
    ax.plot([1, top], [1, top], color="grey", lw=0.8)
    ax.fill_between([1, top], [0.8, 0.8 * top], [1.2, 1.2 * top], color="grey", alpha=0.15, label="within 20%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("actual steps")
    ax.set_ylabel("predicted steps")
    ax.set_title(f"Steps to 50/20/10% of the initial loss\n(digits {label})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
