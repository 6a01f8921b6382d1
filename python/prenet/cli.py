"""The `prenet` command line."""
import argparse
import json
import sys
import textwrap
import warnings

from .linearisation_check import CHECK_MODES, CHECK_STEPS

# Columns of the printed feature table; the CSV written with --csv holds every feature.
SUMMARY_COLUMNS = ["name", "kind", "input_shape", "co", "forward_flops", "backward_flops", "forward_bytes",
                   "ct_ms", "train_roofline_ms"]
# The columns `prenet compare` prints unless --wide: time, what bounds it, how far it extrapolates, whether it
# fits, what it costs; the 80% interval goes beside the epoch in one column (_compare_table).
COMPARE_COLUMNS = ["gpu", "epoch_seconds", "bound", "distance", "fits", "usd_per_hour", "cost_per_epoch_usd"]


def _shape(text):
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers such as 3,224,224")
    if any(size < 1 for size in shape):
        raise argparse.ArgumentTypeError(f"'{text}' has a size below 1")
    return shape


def _sample_range(text):
    """FIRST-LAST (or one index) -> (first, last)."""
    first, _, last = text.partition("-")
    try:
        first, last = int(first), int(last or first)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a range of sample indices such as 200-399") from None
    return first, last


def _features(args):
    from .model_features import model_features
    from .models import build_model

    model, inputs = build_model(args.model, args.input_shape)
    table = model_features(model, batch=args.batch, gpu=args.gpu, **inputs)
    if args.csv:
        table.to_csv(args.csv, index=False)
    covered = table[table["kind"].notna()]
    with _pandas_display():
        print(f"{args.model} at batch {args.batch} on {args.gpu}: {len(table)} module calls, "
              f"{len(covered)} in a layer kind")
        print(table[[c for c in SUMMARY_COLUMNS if c in table]].to_string(index=False, na_rep="-"))
        totals = covered[["co", "forward_flops", "backward_flops", "forward_bytes", "ct_ms", "train_roofline_ms"]].sum()
        print("\ntotals over layer kinds: " + ", ".join(f"{k} {v:.4g}" for k, v in totals.items()))
        others = table[table["kind"].isna()]["module"].value_counts()
        if len(others):
            print("not in a layer kind yet: " + ", ".join(f"{n} x{c}" for n, c in others.items()))


def _training_run_model(args):
    """(model, its input arguments) of a training-run command, converted to channels_last if asked."""
    from .models import build_model

    model, inputs = build_model(args.model, args.input_shape)
    if args.channels_last:
        import torch

        model = model.to(memory_format=torch.channels_last)
    return model, inputs


def _calibrate(args):
    from . import gpu_calibration, host_calibration

    if args.gpu is not None:
        if args.plot:
            raise ValueError("--plot draws a CPU calibration's fitted ratios; a GPU calibration is one factor per "
                             "kind, printed")
        path = gpu_calibration.calibrate(args.gpu or None, args.out, progress=not args.no_progress)
        print(f"{gpu_calibration.from_file(path).describe()}: written to {path}")
        return
    notice = host_calibration.measured_host_notice()
    if notice:
        print(f"prenet calibrate: {notice}", file=sys.stderr)
    path = host_calibration.calibrate(args.out, progress=not args.no_progress)
    calibration = host_calibration.load(path)
    print(f"{calibration.describe()}: written to {path}")
    for part in ("forward", "train"):
        chosen = calibration.chosen[part]
        print(f"{part}: time here over the measured host's at 1 ms, per kind (and group of a kind), with the fit "
              "chosen: " + ", ".join(f"{key} {calibration.factor(part, key, 1.0):.2f} ({chosen[key]})"
                                     for key in sorted(chosen)))
    frame = calibration.host_costs.get("step_frame")
    if frame:
        from .step_frame import describe

        print(f"host work around the operators (prenet.step_frame): {describe(frame)}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        calibration.plot().savefig(args.plot, dpi=100)
        print(f"plot of the forward ratios: {args.plot}")


def _predict(args):
    from .estimate import predict
    from .step_plot import operator_times

    model, inputs = _training_run_model(args)
    estimate = predict(model, batch=args.batch, gpu=args.gpu, dataset_size=args.dataset_size,
                       optimizer=args.optimizer, precision=args.precision, progress=not args.no_progress, **inputs)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        estimate.plot(top=args.top).figure.savefig(args.plot, dpi=120, bbox_inches="tight")
    if args.json:
        print(json.dumps({"model": args.model, "gpu": estimate.gpu, "batch": estimate.batch,
                          "dataset_size": estimate.dataset_size, "optimizer": estimate.optimizer,
                          "precision": estimate.precision, "narrow_weights": list(estimate.narrow_weights),
                          "iterations": estimate.iterations,
                          "epoch_seconds": estimate.epoch_seconds, "step_seconds": estimate.step_seconds,
                          "device_ms": estimate.device_ms, "host_ms": estimate.host_ms,
                          "optimizer_ms": estimate.optimizer_ms, "interval_seconds": estimate.interval_seconds,
                          "extrapolation": estimate.extrapolation, "traced": estimate.traced,
                          "traced_for_real_because": estimate.traced_for_real_because,
                          # the step's device memory with the data copied in a batch at a time, as compare's
                          "memory_gib": estimate.memory.streamed / 2 ** 30, "fits": estimate.fits}))
        return
    with _pandas_display():
        print(repr(estimate))
        top = estimate.layers.sort_values("step_share", ascending=False).head(args.top)
        print(top.to_string(index=False))
    names, forward, backward = operator_times(estimate.ops, estimate.optimizer_ms)
    print("\ndevice ms per step by operator (forward + backward): " + ", ".join(
        f"{name} {f + b:.3g}" for name, f, b in zip(names, forward, backward)))


# `prenet training`'s flags, as its data checks (training_time.check_data_source) name them.
TRAINING_FLAGS = {"dataset": "--data", "target_loss": "--target-loss", "epochs": "--epochs",
                  "dataset_size": "--dataset-size", "input_shape": "--input-shape",
                  "samples": "--input-shape where the model has no default input"}


def _training(args):
    from .models import build_dataset, build_model
    from .training_time import check_data_source, predict_training

    check_data_source(args.data is not None, args.target_loss is not None,
                      {"dataset_size": args.dataset_size, "input_shape": args.input_shape}, TRAINING_FLAGS)
    model, inputs = build_model(args.model, args.input_shape)
    data = {"dataset": build_dataset(args.data)} if args.data else dict(inputs, dataset_size=args.dataset_size)
    steps_options = {} if args.epochs is not None else dict(loss=args.loss, subset=args.subset,
                                                            max_steps=args.max_steps, check_steps=args.check_steps,
                                                            check_mode=args.check_mode,
                                                            progress=not args.no_progress)
    result = predict_training(model, gpu=args.gpu, batch=args.batch, lr=args.lr, momentum=args.momentum,
                              epochs=args.epochs, target_loss=args.target_loss, price_per_hour=args.price,
                              precision=args.precision, optimizer=args.optimizer, **data, **steps_options)
    if not args.json:
        print(repr(result))
        return
    steps = result.steps_prediction
    print(json.dumps({"model": args.model, "gpu": result.gpu, "batch": result.batch,
                      "dataset_size": result.dataset_size, "steps": result.steps, "epochs": result.epochs,
                      "total_seconds": result.total_seconds, "step_seconds": result.estimate.step_seconds,
                      "epoch_seconds": result.estimate.epoch_seconds, "cost": result.cost,
                      "price_per_hour": result.price_per_hour,
                      # as predict's: the step's device memory with the data copied in a batch at a time
                      "memory_gib": result.estimate.memory.streamed / 2 ** 30, "fits": result.estimate.fits,
                      "steps_from": "epochs" if steps is None else "predict_steps",
                      "initial_loss": None if steps is None else steps.initial_loss,
                      "target_loss": None if steps is None else steps.target_loss,
                      "linearisation_check": None if steps is None or steps.check is None else
                      {"holds": steps.check.holds, "pace": steps.check.pace, "gap": steps.check.gap,
                       "steps": steps.check.steps, "mode": steps.check.mode, "said": str(steps.check)}}))


def _measure(args):
    from .measure import measure

    model, inputs = _training_run_model(args)
    result = measure(model, batch=args.batch, dataset_size=args.dataset_size, optimizer=args.optimizer,
                     precision=args.precision, device=args.device, repeats=args.repeats, threads=args.threads,
                     progress=not args.no_progress, keep_memory=args.keep_memory, **inputs)
    if args.json:
        print(json.dumps({"model": args.model, "device": result.device, "batch": result.batch,
                          "dataset_size": result.dataset_size, "optimizer": result.optimizer,
                          "precision": result.precision, "iterations": result.iterations,
                          "epoch_seconds": result.epoch_seconds, "epoch_min_seconds": result.epoch_min_seconds,
                          "epoch_max_seconds": result.epoch_max_seconds, "step_seconds": result.step_seconds,
                          "epochs": result.epochs, "environment": result.environment}))
    else:
        print(repr(result))


def _price(text):
    name, _, usd = text.rpartition("=")
    try:
        return name, float(usd)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not NAME=USD_PER_HOUR, such as 'H100=2.5'")


def _compare_table(table):
    """The comparison as `prenet compare` prints it without --wide: COMPARE_COLUMNS, and the 80% interval of the
    epoch as one column."""
    import math

    shown = table[COMPARE_COLUMNS].copy()
    shown.insert(2, "interval_s", [f"{low:.3g}-{high:.3g}" if not math.isnan(low) else "-"
                                   for low, high in zip(table["interval_low_s"], table["interval_high_s"])])
    return shown


def _compare(args):
    from .compare import compare

    model, inputs = _training_run_model(args)
    names = [name.strip() for given in args.gpus for name in given.split(",") if name.strip()]
    gpus = names[0] if len(names) == 1 else names  # one name, or "all" in any case: compare reads it
    table = compare(model, batch=args.batch, gpus=gpus, price_per_hour=dict(args.price or []),
                    dataset_size=args.dataset_size, optimizer=args.optimizer, precision=args.precision,
                    progress=not args.no_progress, **inputs)
    if args.plot:
        table.plot().figure.savefig(args.plot, dpi=120, bbox_inches="tight")
    if args.json:
        print(table.to_json(orient="records"))
        return
    with _pandas_display():
        print((table if args.wide else _compare_table(table)).to_string(index=False, na_rep="-"))
    if not args.wide:  # each price's source and date under the table, the table kept to a screen's width
        for gpu, source in zip(table["gpu"], table["price_source"]):
            if source:
                print(f"price of {gpu}: {source}")
    if (table["bound"] == "host").any():
        print(host_bound_note(table))
    for name, why in table.attrs.get("unsupported", {}).items():
        print(f"left out: {why}", file=sys.stderr)


def host_bound_note(table):
    """A line for the GPUs of a comparison whose steps are host-bound: there a faster GPU does not help."""
    host = table[table["bound"] == "host"]
    names = "all" if len(host) == len(table) else f"{len(host)} of {len(table)}"
    return textwrap.fill(f"host-bound on {names} GPUs (epochs {host['epoch_seconds'].min():.3g}-"
                         f"{host['epoch_seconds'].max():.3g} s): the host issues the step's kernels slower than those "
                         "GPUs run them, so a faster one does not shorten the epoch; a larger batch, fewer operators "
                         "or a faster host does", width=116)


def _gpus(args):
    from .catalog import gpus
    from .predictors import served_as

    columns = ["name", "architecture", "year", "sm_count", "fp32_tflops", "tf32_tflops", "fp16_tflops",
               "bf16_tflops", "memory_gb", "memory_bandwidth_gbs"]
    table = gpus()[columns]
    table["predictors"] = table["name"].map(served_as)  # measured, a measured twin's, or unseen and how far
    with _pandas_display():
        print(table.to_string(index=False, na_rep="-"))


def _kinds(args):
    from .layers import layer_kinds

    for kind in layer_kinds():
        keys = ", ".join(p["name"] if p["default"] is None else f"{p['name']}={p['default']}"
                         for p in kind["parameters"])
        print(f"{kind['name']:<20} ({kind['paper_name']}): {keys}")


def _collect(args):
    from .collect import collect, collect_all
    from .sampling import SAMPLERS

    options = dict(device=args.device, seed=args.seed, threads=args.threads, timeout=args.timeout,
                   max_minutes=args.max_minutes, progress=not args.no_progress)
    if args.kind == "all" and (args.again or args.profile != "wide"):
        raise SystemExit("prenet collect: --again and --profile name one kind's samples; give --kind KIND")
    if args.kind == "all":
        written = collect_all(list(SAMPLERS), args.samples, args.out, **options)
        print(json.dumps(written))
    else:
        written = collect(args.kind, args.samples, args.out, again=args.again or (), profile=args.profile, **options)
        print(f"{written} configurations of {args.kind} written to {args.out}")


def _pandas_display():
    import pandas as pd

    return pd.option_context("display.width", 200, "display.max_columns", 30, "display.float_format", "{:.4g}".format)


# predict's and compare's: a model that needs its data is traced for real, which can take a minute
NO_TRACE_PROGRESS = "no progress bar (on stderr) while the model is traced for real (shown after two seconds)"


def _training_run_arguments(command):
    """The arguments `predict`, `measure` and `compare` share: what is trained, on what input, how."""
    command.add_argument("model", help="torchvision:NAME, prenet:bert_base, prenet:gpt2, such a model's name alone "
                         "(resnet50, gpt2), package.module:factory or path/to/file.py:factory (the factory returns a "
                         "module, or a pair (module, example input) for a model that takes token ids or several "
                         "inputs)")
    command.add_argument("--batch", type=int, default=32)
    command.add_argument("--input-shape", type=_shape, help="input shape without the batch, e.g. 3,224,224 (the "
                         "sequence length for prenet:bert_base and prenet:gpt2)")
    command.add_argument("--dataset-size", type=int, default=1024, help="samples per epoch (default 1024)")
    command.add_argument("--optimizer", default="sgd",
                         help="sgd (momentum 0.9), sgd_nesterov, sgd_plain, adam, adamw, rmsprop, adagrad (any case)")
    command.add_argument("--precision", default="fp32",
                         help="fp32 (PyTorch's defaults: cuDNN convolutions in TF32 where the GPU has it), "
                              "fp32_strict (no TF32), tf32 (matmuls in TF32 too), bf16 or fp16 (autocast around "
                              "forward and loss)")
    command.add_argument("--channels-last", action="store_true",
                         help="convert the model to channels_last (NHWC) memory format, as "
                              "model.to(memory_format=torch.channels_last) does: its convolutions then need no "
                              "layout transposes on tensor cores")


def parser():
    p = argparse.ArgumentParser(prog="prenet", description="Predict deep-learning training time on any GPU.")
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("features", help="feature table of a model's layers for one GPU")
    f.add_argument("model", help="torchvision:NAME (or NAME alone), package.module:factory or "
                   "path/to/file.py:factory (a module, or a pair (module, example input))")
    f.add_argument("--gpu", default="V100", help="GPU name, alias or torch device name (default V100)")
    f.add_argument("--batch", type=int, default=32)
    f.add_argument("--input-shape", type=_shape, help="input shape without the batch, e.g. 3,224,224")
    f.add_argument("--csv", help="also write every feature of every layer to this CSV file")
    f.set_defaults(run=_features)
    c = sub.add_parser("collect", help="time random layer configurations with the native harness")
    c.add_argument("--kind", required=True, help="a harness kind (see prenet-harness --list-kinds) or 'all'")
    c.add_argument("--samples", type=int, default=2000, help="configurations per kind (indices 0..N-1)")
    c.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    c.add_argument("--out", required=True, help="CSV file (one kind) or folder (--kind all); resumed if present")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--threads", type=int, help="intra-op threads (default: all cores)")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds before a configuration counts as hung")
    c.add_argument("--max-minutes", type=float, help="stop cleanly after this long (resume later)")
    c.add_argument("--again", nargs="+", type=_sample_range, metavar="FIRST-LAST",
                   help="drop these samples' rows from the file and time them again (one kind)")
    c.add_argument("--profile", default="wide", choices=["wide", "models"],
                   help="sampling profile: wide (default, every kind) or models (convolutions as CNNs build them)")
    c.add_argument("--no-progress", action="store_true")
    c.set_defaults(run=_collect)
    e = sub.add_parser("predict", help="predicted training time of a model: per step and per epoch")
    e.add_argument("--gpu", default="V100", help="GPU name, alias or torch device name, or 'cpu' (default V100)")
    _training_run_arguments(e)
    e.add_argument("--top", type=int, default=15, help="layers to list (default 15)")
    e.add_argument("--plot", help="also save where the step goes (by module and by operator) to this image file")
    e.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    e.add_argument("--no-progress", action="store_true", help=NO_TRACE_PROGRESS)
    e.set_defaults(run=_predict)
    t = sub.add_parser("training", help="predicted total training time and cost: steps (given as epochs, or "
                       "predicted for a target loss from the model's tangent kernel) x the predicted step time")
    t.add_argument("model", help="torchvision:NAME, package.module:factory or path/to/file.py:factory (its weights "
                   "as the factory leaves them: pre-trained for fine-tuning)")
    t.add_argument("--data", help="package.module:factory or path/to/file.py:factory returning the training data: "
                   "(inputs, targets) or a torch Dataset of (input, target) pairs (needed with --target-loss)")
    t.add_argument("--dataset-size", type=int, help="with --epochs and no --data: samples per epoch")
    t.add_argument("--input-shape", type=_shape, help="with --epochs and no --data: one sample's shape without the "
                   "batch, e.g. 3,224,224 (torchvision models default to it)")
    t.add_argument("--gpu", default="V100", help="GPU name, alias or torch device name, or 'cpu' (default V100)")
    t.add_argument("--batch", type=int, default=32)
    goal = t.add_mutually_exclusive_group(required=True)
    goal.add_argument("--epochs", type=float, help="train this many epochs")
    goal.add_argument("--target-loss", type=float, help="train until the training loss reaches this (SGD)")
    t.add_argument("--lr", type=float, default=0.01, help="SGD's learning rate (with --target-loss; default 0.01)")
    t.add_argument("--momentum", type=float, default=0.0, help="SGD's momentum (default 0)")
    t.add_argument("--loss", default="cross_entropy", help="cross_entropy or mse (with --target-loss)")
    t.add_argument("--subset", type=int, default=256, help="samples of the tangent kernel (with --target-loss; "
                   "default 256)")
    t.add_argument("--max-steps", type=int, default=10000, help="with --target-loss: steps simulated before "
                   "saying the target is not reached (default 10000)")
    t.add_argument("--check-steps", type=int, default=CHECK_STEPS, help="with --target-loss: real SGD steps "
                   "compared with the linearised model's, to warn where the network leaves it (default "
                   f"{CHECK_STEPS}; 0: none)")
    t.add_argument("--check-mode", choices=tuple(CHECK_MODES), default="train", help="with --target-loss: the mode "
                   "of those steps, as the real fine-tuning runs: train (dropout on, batch norms on the batch's "
                   "statistics), eval (batch norms frozen), model (each module's own; default train)")
    t.add_argument("--optimizer", help="with --epochs: the step's optimizer as predict takes it (default: SGD, "
                   "with momentum when --momentum > 0)")
    t.add_argument("--precision", default="fp32", help="as for predict (default fp32)")
    t.add_argument("--price", type=float, help="USD per hour (default: the catalog's price for the GPU, if any)")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    t.add_argument("--no-progress", action="store_true", help="no progress bars (on stderr)")
    t.set_defaults(run=_training)
    m = sub.add_parser("measure", help="measured training epoch of a model: synthetic data resident on the device, "
                       "one warm-up epoch, the median of the timed ones (the repository's "
                       "docs/measurement_protocol.md)")
    m.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    _training_run_arguments(m)
    m.add_argument("--repeats", type=int, default=3, help="timed epochs after the warm-up (>= 3)")
    m.add_argument("--threads", type=int, help="CPU threads, PyTorch's and the BLAS library's (device cpu; "
                                                "predictions for 'cpu' are of 1; default: as they are)")
    m.add_argument("--keep-memory", action="store_true",
                   help="device cpu, glibc: keep freed memory for reuse, as PyTorch's caching allocator does on a "
                        "GPU, so that steps do not fault in fresh pages (costly in a virtual machine)")
    m.add_argument("--json", action="store_true", help="print one JSON object")
    m.add_argument("--no-progress", action="store_true", help="no progress bar over the epochs (on stderr)")
    m.set_defaults(run=_measure)
    o = sub.add_parser("compare", help="predicted epoch time and cost of a model on many GPUs, fastest first")
    _training_run_arguments(o)
    o.add_argument("--gpus", nargs="+", default=["all"],
                   help="'all' (the catalog) or names, comma- or space-separated (H100,A100 T4; quote a name with "
                        "spaces)")
    o.add_argument("--price", type=_price, action="append", help="NAME=USD per hour, overriding the catalog's "
                   "price (repeatable)")
    o.add_argument("--plot", help="also save the comparison plot to this image file")
    o.add_argument("--json", action="store_true", help="print the rows as one JSON array")
    o.add_argument("--wide", action="store_true", help="every column of the comparison (nearest fitted GPU, "
                   "memory, price source) in the table")
    o.add_argument("--no-progress", action="store_true", help=NO_TRACE_PROGRESS)
    o.set_defaults(run=_compare)
    h = sub.add_parser("calibrate", help="time reference layers on this CPU to calibrate the CPU predictors to it "
                       "(two to four minutes; resumed if interrupted), or with --gpu on this machine's CUDA GPU")
    h.add_argument("--gpu", nargs="?", const="", default=None, metavar="NAME",
                   help="calibrate the GPU predictors to this machine's CUDA GPU instead (its catalog name; default "
                   "the name torch reports): 10 timed layers per kind, applied to every prediction for that GPU")
    h.add_argument("--out", help="calibration file (default: this CPU's, or this GPU's, file in the user cache)")
    h.add_argument("--no-progress", action="store_true")
    h.add_argument("--plot", help="also save a plot of the fitted ratios (forward pass) to this image file")
    h.set_defaults(run=_calibrate)
    g = sub.add_parser("gpus", help="list the hardware catalog")
    g.set_defaults(run=_gpus)
    k = sub.add_parser("kinds", help="list the layer kinds and their configuration keys")
    k.set_defaults(run=_kinds)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning as the command line says it: "prenet: warning: ..." on stderr, without the Python source line
    that called the library."""
    print(f"prenet: warning: {message}", file=file or sys.stderr)


def main(argv=None):
    args = parser().parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        args.run(args)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as error:
        print(f"prenet: error: {error}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = shown
    return 0


if __name__ == "__main__":
    sys.exit(main())
