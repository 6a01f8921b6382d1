"""The README's copies of the validation reports: each block of README.md between

    <!-- begin: bench/results/NAME.md -->
    <!-- end: bench/results/NAME.md -->

holds that report's summary lines (its bullets and its "Median / 90th percentile" line) and its first table, so
the README shows the figures of the committed report and no older ones. bench/report.py's write_report refreshes
the block of the report it writes; this script refreshes every block, or with --check lists the blocks that
differ from their reports and exits 1 (tests/test_readme_tables.py).

Run:  .venv/bin/python bench/readme_tables.py [--check]
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(?P<begin><!-- begin: (?P<source>[^ ]+) -->\n).*?(?P<end><!-- end: (?P=source) -->)", re.S)


def report_block(text):
    """The lines of a report the README copies: its summary lines (bullets, "Median ..."), a blank line and its
    first table. ValueError where it has no table."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        raise ValueError("the report has no table to copy")
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    summary = [line for line in lines[:start] if line.startswith(("- ", "Median "))]
    return "\n".join(summary + [""] * bool(summary) + lines[start:end]) + "\n"


def refreshed(readme_text, root=ROOT, only=None):
    """`readme_text` with each block (or only the one of the report at `only`, a path under `root`) copied afresh
    from its report; ValueError naming a block whose report is missing."""
    def fill(match):
        source = match["source"]
        if only is not None and (root / source).resolve() != Path(only).resolve():
            return match[0]
        path = root / source
        if not path.is_file():
            raise ValueError(f"README block {source}: no such report")
        return match["begin"] + report_block(path.read_text()) + match["end"]

    return BLOCK.sub(fill, readme_text)


def refresh_readme(report_path, readme=None):
    """Copies the report just written at `report_path` into its README block, where the README has one."""
    readme = readme or README
    text = readme.read_text()
    new = refreshed(text, readme.parent, only=report_path)
    if new != text:
        readme.write_text(new)


def stale_blocks(readme=None):
    """The sources of the README blocks that differ from their reports."""
    readme = readme or README
    text = readme.read_text()
    return [match["source"] for match in BLOCK.finditer(text)
            if match[0] != refreshed(match[0], readme.parent)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list the blocks that differ from their reports; exit 1")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_blocks()
        for source in stale:
            print(f"README.md: the block of {source} differs from the report (run bench/readme_tables.py)")
        return 1 if stale else 0
    README.write_text(refreshed(README.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
