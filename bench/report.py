"""Writing a benchmark's report: the markdown file under bench/results/ (RESULTS; folders made as needed),
echoed; the summary row of a table of leave-one-device-out cells, as the reports print it; and the arguments of a
study over the NeuSight set's kinds."""
import argparse
from pathlib import Path

import numpy as np

from readme_tables import refresh_readme

# Where the reports go, from this file rather than the working directory: a script run from inside bench/ once
# wrote its report to bench/bench/results/.
RESULTS = Path(__file__).resolve().parent / "results"


def write_report(path, text):
    """Writes `text` to `path` and prints it; a report the README copies (bench/readme_tables.py) is copied there
    afresh."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    refresh_readme(path)
    print(text)


def cells_summary_row(name, errors):
    """A markdown row over cells' errors (fractions): `name`, their median, how many are within issue 6's 15%, the
    worst."""
    return (f"| {name} | {100 * float(np.median(errors)):.1f}% | {sum(e <= 0.15 for e in errors)} of {len(errors)} | "
            f"{100 * max(errors):.1f}% |")


def kinds_and_out(description, default_out, argv=None):
    """The arguments of a study over the NeuSight set's kinds: --kinds (default: every kind of the data) and --out
    (default `default_out`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--kinds", nargs="*", default=None, help="default: every kind of the data")
    parser.add_argument("--out", type=Path, default=default_out)
    return parser.parse_args(argv)
