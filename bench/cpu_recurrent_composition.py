"""How prenet costs a recurrent layer on the CPU, against the CPU layer data: as prenet.predict(gpu="cpu") does, the
layer whole (the CPU's layer operator, its forward in a training step by the predictor fitted on
`train_forward_ms`); the layer's loop of small operators as the trace records it without the recurrent boundary
(prenet.fused_recurrent; each operator costed by its own kind's predictor, what predict summed before 2026-11-26);
and the whole-layer predictor fitted on the forward alone (`forward_ms`); each held against the forward timed inside
a training step (`train_forward_ms`) of sampled LSTM rows of data/cpu/lstm.csv. The composition is fitted on no LSTM
row (held out); the whole-layer predictors were fitted on most of these rows, so their errors here are mostly
fitting error (and, for the forward-alone one, the gap between a forward alone and one inside a training step).
Usage: taskset -c 1 python bench/cpu_recurrent_composition.py [--rows 30] [--out bench/results/...md]"""
import argparse
import contextlib
import csv
import random
import statistics
import time
import warnings
from pathlib import Path
from unittest import mock

import torch

import prenet
from prenet import estimate, fused_recurrent
from report import RESULTS, write_report

DATA = Path(__file__).resolve().parents[1] / "data" / "cpu" / "lstm.csv"
MAX_ELEMENTS = 2e6  # rows whose batch x steps x width exceed this are skipped (the trace runs them for real)


class Wrapped(torch.nn.Module):
    def __init__(self, lstm):
        super().__init__()
        self.lstm = lstm

    def forward(self, x):
        return self.lstm(x)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30, help="LSTM rows sampled (seed 0)")
    parser.add_argument("--out", default=RESULTS / "cpu_recurrent_composition.md")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the unmeasured-host note, once per predict
    torch.set_num_threads(1)
    rows = [r for r in csv.DictReader(DATA.open()) if r["status"] == "ok" and r["bidirectional"] == "0"]
    native, catalog, device = estimate.resolve("cpu", None)
    table, composed_errors, whole_errors, predict_errors, ratios = [], [], [], [], []
    for row in random.Random(0).sample(rows, args.rows):
        b, steps, width, hidden, layers = (int(row[k]) for k in ("batch", "seq_len", "input_size", "hidden_size",
                                                                  "num_layers"))
        if b * steps * max(width, hidden) > MAX_ELEMENTS:
            continue
        model = Wrapped(torch.nn.LSTM(width, hidden, layers, batch_first=True))

        def forward_ms():  # the layer's forward as predict costs it
            ops = prenet.predict(model, batch=b, gpu="cpu", example_input=torch.randn(1, steps, width),
                                 dataset_size=b).ops
            return ops[(ops["module"] == "lstm") & (ops["phase"] == "forward")]["ms"].sum()

        predicted = forward_ms()
        with mock.patch.object(fused_recurrent, "fused_recurrent_layers", lambda *_: contextlib.nullcontext()):
            composed = forward_ms()  # its loop of operators, each costed by its own kind
        config = {"batch": b, "seq_len": steps, "input_size": width, "hidden_size": hidden, "num_layers": layers,
                  "bidirectional": 0, "bias": 1}
        whole = native.estimate("lstm", [config], catalog, device, "sgd_momentum", "fp32", {})[0]["forward_ms"]
        measured = float(row["train_forward_ms"])
        ratios.append(composed / measured)
        composed_errors.append(abs(composed - measured) / measured)
        whole_errors.append(abs(whole - measured) / measured)
        predict_errors.append(abs(predicted - measured) / measured)
        table.append(f"| {b} | {steps} | {width} | {hidden} | {layers} | {float(row['forward_ms']):.3f} | "
                     f"{measured:.3f} | {predicted:.3f} | {composed:.3f} | {whole:.3f} |")
    summary = (f"{len(table)} rows: prenet.predict's median error {100 * statistics.median(predict_errors):.1f}%; "
               f"the composition's {100 * statistics.median(composed_errors):.1f}% (median ratio to the "
               f"measurement {statistics.median(ratios):.2f}); the forward-alone whole-layer predictor's "
               f"{100 * statistics.median(whole_errors):.1f}%")
    print(summary)
    write_report(args.out, "\n".join([
        "# A recurrent layer on the CPU: whole, as predict costs it, and its operators composed", "",
        f"`taskset -c 1 python bench/cpu_recurrent_composition.py` ({time.strftime('%Y-%m-%d')}; torch "
        f"{torch.__version__}, one thread). Forward of an LSTM layer (batch first, unidirectional), milliseconds; "
        "measured: the forward inside a training step of the harness's row (`train_forward_ms`), beside its "
        "forward alone (`forward_ms`).", "", f"- {summary}", "",
        "| batch | steps | input | hidden | layers | forward alone, measured | in a training step, measured | "
        "prenet.predict | composed | whole-layer predictor of the forward alone |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *table, ""]))


if __name__ == "__main__":
    main()
