"""How long a packaged predictor bundle takes to load natively (the first prenet.predict of a process on a device
pays it once): each bundle loaded REPEATS times in this process from its JSON (no cache between loads), then
REPEATS times through binary copies of its trees (prenet/regressors/tree_cache.hpp; made by one load before, in a
temporary folder, as prenet.predict keeps them in the user's cache), median and fastest, beside the size of its
model files, the JSON text they hold and the copies.
Usage: python bench/bundle_load.py [--out bench/results/bundle_load.md]"""
import argparse
import gzip
import platform
import statistics
import tempfile
import time
from pathlib import Path

from prenet._native import core
from prenet.predictors import PACKAGED_BUNDLE, PACKAGED_HOST_BUNDLE, PACKAGED_UNSEEN_BUNDLE
from report import RESULTS, write_report

REPEATS = 5


def load_seconds(folder, cache=""):
    """Seconds of each of REPEATS loads of the bundle in `folder` (through the copies in `cache`, if given)."""
    seconds = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        core().PredictorBundle(str(folder), cache)
        seconds.append(time.perf_counter() - started)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=RESULTS / "bundle_load.md")
    args = parser.parse_args()
    rows = []
    for folder in (PACKAGED_BUNDLE, PACKAGED_UNSEEN_BUNDLE, PACKAGED_HOST_BUNDLE):
        files = sorted(folder.glob("*.json.gz"))
        compressed = sum(f.stat().st_size for f in files)
        text = sum(len(gzip.decompress(f.read_bytes())) for f in files)
        seconds = load_seconds(folder)
        with tempfile.TemporaryDirectory() as cache:
            bundle = core().PredictorBundle(str(folder), cache)  # makes the copies
            copies = sum(f.stat().st_size for f in Path(cache).glob("*.trees"))
            cached = load_seconds(folder, cache)
        rows.append(f"| {folder.name} | {len(bundle.available())} | {compressed / 1e6:.1f} | {text / 1e6:.1f} | "
                    f"{statistics.median(seconds):.3f} | {min(seconds):.3f} | {text / 1e6 / min(seconds):.0f} | "
                    f"{copies / 1e6:.0f} | {statistics.median(cached):.3f} | {min(cached):.3f} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "# Loading the packaged predictor bundles", "",
        f"`python bench/bundle_load.py` ({time.strftime('%Y-%m-%d')}; {platform.machine()}, {REPEATS} loads of each "
        "in one process, each way). Model files are gzip-compressed JSON (xgboost's format for trees), read by "
        "prenet/regressors' JSON cursor; binary copies: the trees as the walker holds them, checked on reading "
        "(prenet/regressors/tree_cache.hpp).", "",
        "| bundle | predictors | files (MB, gzip) | JSON text (MB) | load, median (s) | fastest (s) | MB of text / s | "
        "copies (MB) | load from copies, median (s) | fastest (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
