"""What `prenet calibrate --gpu` would do for the H100 with its reference layers chosen one way or another, simulated
with the H100 layer rows of data/gpu (timed by the same harness, on the GPU session's machines) instead of new
timings: per kind the calibration takes PER_KIND rows, spread over their predicted device time on a log scale
(gpu_calibration.spread_in_time, as calibrate picks them since 2026-11-27) or evenly by rank (as it picked them
before), and the file so made (the real calibration's host costs kept) is applied to the H100 validation set
(bench/validate_h100.py --gpu-calibration). The validation epochs are never fitted on; the rows stand for the
calibration's own timings, which is what a calibration is fitted on.

Run:  .venv/bin/python bench/gpu_calibration_from_rows.py [--out FILE] (about a minute).
Writes bench/results/gpu_calibration_from_rows.md.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prenet import gpu_calibration
from prenet.datasets import collection_folders, load_harness_rows
from report import RESULTS, write_report

ROOT = Path(__file__).resolve().parent.parent
REPORT = RESULTS / "gpu_calibration_from_rows.md"
GPU = "NVIDIA H100 80GB HBM3"
CALIBRATION = ROOT / "data" / "gpu" / "NVIDIA_H100_80GB_HBM3_calibration.json"


def harness_rows():
    """[(native kind, native configuration, forward ms)] of the H100 rows that a calibration's reference layers could
    be (datasets.load_harness_rows: a linear layer without a fused activation, as calibrate times it)."""
    from prenet._native import core

    keys = {kind["name"]: [p["name"] for p in kind["parameters"]] for kind in core().layer_kinds()}
    tables = load_harness_rows(collection_folders(ROOT / "data" / "gpu", GPU.replace(" ", "_")))
    return [(kind, {key: int(row[key]) for key in keys[kind] if key in table}, float(row["forward_ms"]))
            for kind, table in tables.items() for row in table.to_dict("records") if row["forward_ms"] > 0]


def evenly_by_rank(times, count):
    """The selection before 2026-11-27: `count` of the layers inside [MIN_DEVICE_MS, MAX_DEVICE_MS], evenly spaced
    by rank in predicted time."""
    inside = sorted((t, i) for i, t in enumerate(times)
                    if gpu_calibration.MIN_DEVICE_MS <= t <= gpu_calibration.MAX_DEVICE_MS)
    return sorted({inside[round(j * (len(inside) - 1) / max(1, count - 1))][1] for j in range(min(count, len(inside)))})


def calibration_file(rows, pick, folder, kinds, host_costs):
    """A calibration file of the rows `pick(times, count)` chooses for each of `kinds`; its path."""
    layers = []
    for kind in sorted(kinds):
        of_kind = [row for row in rows if row[0] == kind]
        if not of_kind:
            continue
        times = gpu_calibration._predicted_ms(kind, [row[1] for row in of_kind], GPU)
        for i in pick(times, gpu_calibration.PER_KIND):
            _, native_config, forward_ms = of_kind[i]
            # the record's harness fields name the native layer: the rows hold no other
            layers.append({"harness_kind": kind, "config": native_config, "kind": kind, "native_config": native_config,
                           "status": "ok", "error": "", "forward_ms": forward_ms})
    path = Path(folder) / f"{pick.__name__}.json"
    path.write_text(json.dumps({"format": gpu_calibration.FORMAT, "version": gpu_calibration.VERSION, "gpu": GPU,
                                "layers": layers, "host_costs": host_costs, "date": time.strftime("%Y-%m-%d")}))
    return path


def validated(calibration):
    """The summary lines of bench/validate_h100.py run with the calibration file `calibration` (None:
    uncalibrated)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "report.md"
        command = [sys.executable, str(Path(__file__).parent / "validate_h100.py"), "--out", str(out)]
        if calibration is not None:
            command += ["--gpu-calibration", str(calibration)]
        subprocess.run(command, check=True, capture_output=True, text=True, cwd=Path(__file__).parent)
        text = out.read_text()
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args()
    started = time.monotonic()
    rows = harness_rows()
    session = json.loads(CALIBRATION.read_text())
    kinds = {layer["kind"] for layer in session["layers"]}  # the kinds calibrate times
    lines = []
    with tempfile.TemporaryDirectory() as folder:
        runs = [("as predicted (no calibration)", None),
                ("the GPU session's calibration (its own 80 timed layers, spread over predicted time; 2026-11-27 "
                 "afternoon)", CALIBRATION)]
        runs += [(f"{PICKS[pick]} from the H100 rows",
                  calibration_file(rows, pick, folder, kinds, session.get("host_costs"))) for pick in PICKS]
        for label, path in runs:
            summary = validated(path)
            lines += [f"### {label}", "", *(f"- {line}" for line in summary)]
            if path is not None:
                factors = gpu_calibration.from_file(path).factors
                lines.append("- factors: " + ", ".join(f"{kind} x{f:.2f}" for kind, f in sorted(factors.items())))
            lines.append("")
            print(label, summary[0], flush=True)
    text = "\n".join([
        "# A GPU calibration's reference layers: spread over time, or evenly by rank (simulated on the H100 rows)",
        "", f"`.venv/bin/python bench/gpu_calibration_from_rows.py` ({time.strftime('%Y-%m-%d')}, "
        f"{time.monotonic() - started:.0f} s). {len(rows)} H100 layer rows of data/gpu (every seed) stand for the "
        f"calibration's timings: per kind {gpu_calibration.PER_KIND} of them, chosen as named, make a calibration "
        "file (with the session's measured host costs), applied to the H100 validation set by "
        "bench/validate_h100.py --gpu-calibration. The rows were timed by the harness on the GPU sessions' machines, "
        "as calibrate times its layers; no validation epoch is fitted on.", "", *lines])
    write_report(args.out, text)


PICKS = {gpu_calibration.spread_in_time: "spread over predicted time (calibrate since 2026-11-27)",
         evenly_by_rank: "evenly by rank (calibrate before)"}

if __name__ == "__main__":
    main()
