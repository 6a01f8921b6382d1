"""How long a packaged predictor bundle takes to load natively (the first prenet.predict of a process on a device
pays it once): each bundle loaded REPEATS times in this process (no cache between loads), median and fastest,
beside the size of its model files and the JSON text they hold.
Usage: python bench/bundle_load.py [--out bench/results/bundle_load.md]"""
import argparse
import gzip
import platform
import statistics
import time

from prenet._native import core
from prenet.predictors import PACKAGED_BUNDLE, PACKAGED_HOST_BUNDLE, PACKAGED_UNSEEN_BUNDLE
from report import write_report

REPEATS = 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/bundle_load.md")
    args = parser.parse_args()
    rows = []
    for folder in (PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE, PACKAGED_HOST_BUNDLE):
        files = sorted(folder.glob("*.json.gz"))
        compressed = sum(f.stat().st_size for f in files)
        text = sum(len(gzip.decompress(f.read_bytes())) for f in files)
        seconds = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            bundle = core().PredictorBundle(str(folder))
            seconds.append(time.perf_counter() - started)
        rows.append(f"| {folder.name} | {len(bundle.available())} | {compressed / 1e6:.1f} | {text / 1e6:.1f} | "
                    f"{statistics.median(seconds):.3f} | {min(seconds):.3f} | {text / 1e6 / min(seconds):.0f} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "# Loading the packaged predictor bundles", "",
        f"`python bench/bundle_load.py` ({time.strftime('%Y-%m-%d')}; {platform.machine()}, {REPEATS} loads of each "
        "in one process). Model files are gzip-compressed JSON (xgboost's format for trees), read by "
        "prenet/regressors' JSON cursor.", "",
        "| bundle | predictors | files (MB, gzip) | JSON text (MB) | load, median (s) | fastest (s) | MB of text / s |",
        "| --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
