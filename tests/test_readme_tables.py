"""The README's copies of the validation reports (bench/readme_tables.py): what a block holds, that a written report
refreshes its own block and no other, and that the committed README agrees with the committed reports."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import readme_tables  # noqa: E402
from report import write_report  # noqa: E402

REPORT = """# A report

`command` (date).

- fp32: median error 12.3%
- bf16: median error 9.0%

Median / 90th percentile error: 6.1% / 17.0%.

| model | error |
| --- | --- |
| a | 1.0% |

A paragraph after the table.

| second | table |
| --- | --- |
"""


def test_a_block_is_the_reports_summary_lines_and_first_table():
    assert readme_tables.report_block(REPORT) == (
        "- fp32: median error 12.3%\n- bf16: median error 9.0%\nMedian / 90th percentile error: 6.1% / 17.0%.\n\n"
        "| model | error |\n| --- | --- |\n| a | 1.0% |\n")
    with pytest.raises(ValueError, match="no table"):
        readme_tables.report_block("# A report\n\nno table here\n")


def test_writing_a_report_refreshes_its_own_block_only(tmp_path, monkeypatch):
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (results / "other.md").write_text("| other |\n| --- |\n")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- begin: bench/results/mine.md -->\nold\n<!-- end: bench/results/mine.md -->\n"
                      "<!-- begin: bench/results/other.md -->\nstale\n<!-- end: bench/results/other.md -->\nend\n")
    monkeypatch.setattr(readme_tables, "README", readme)
    monkeypatch.chdir(tmp_path)
    write_report("bench/results/mine.md", REPORT)
    text = readme.read_text()
    assert "old" not in text and "| a | 1.0% |" in text and "- fp32: median error 12.3%" in text
    assert "stale" in text  # the other report was not written
    assert text.startswith("intro\n") and text.endswith("end\n")
    assert readme_tables.stale_blocks(readme) == ["bench/results/other.md"]
    (results / "other.md").unlink()
    with pytest.raises(ValueError, match="other.md: no such report"):
        readme_tables.refreshed(readme.read_text(), tmp_path)


def test_a_report_written_elsewhere_leaves_the_readme_alone(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- begin: bench/results/mine.md -->\nold\n<!-- end: bench/results/mine.md -->\n")
    monkeypatch.setattr(readme_tables, "README", readme)
    write_report(tmp_path / "elsewhere.md", REPORT)
    assert "old" in readme.read_text()


def test_the_committed_readme_shows_the_committed_reports():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "readme_tables.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    blocks = readme_tables.BLOCK.finditer((ROOT / "README.md").read_text())
    assert {block["source"] for block in blocks} == {"bench/results/validate_h100.md",
                                                       "bench/results/validate_cpu_kept_memory_repredicted.md"}


def _table_rows(report):
    """The cells of a report's first table, as the README copies it (readme_tables.report_block), past its header
    and rule."""
    table = [line for line in readme_tables.report_block(report).splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in table[2:]]


def test_the_readmes_opening_figures_are_the_committed_reports():
    """The figures a reader meets first, in the README's opening paragraph, are those of the reports they name:
    the H100 validation, the GPU predictors' test medians by kind, and the CPU's committed epochs predicted again."""
    readme = (ROOT / "README.md").read_text()
    opening = " ".join(readme.split("Contents:")[0].split())
    found = re.search(r"H100, a GPU none of them saw, ([\d.]+)% median error in fp32 \(90th percentile ([\d.]+)%, "
                      r"(\d+) cases\) and ([\d.]+)% in bf16 \((\d+) cases\); single layers on the GPUs they learned "
                      r"from, ([\d.]+)-([\d.]+)% median by kind; whole models on a CPU, ([\d.]+)% median and "
                      r"([\d.]+)% 90th percentile \((\d+) cases", opening)
    assert found, "the README's opening paragraph no longer states its figures in the form this test reads"
    h100 = (ROOT / "bench" / "results" / "validate_h100.md").read_text()
    fp32 = re.search(r"- fp32, all models: (\d+) cases, median error ([\d.]+)%, 90th percentile ([\d.]+)%", h100)
    bf16 = re.search(r"- bf16 \(autocast\): (\d+) cases, median error ([\d.]+)%", h100)
    medians = [float(row[3].rstrip("%")) for row in
               _table_rows((ROOT / "results" / "predictors_gpu.md").read_text())]
    cpu = (ROOT / "bench" / "results" / "validate_cpu_kept_memory_repredicted.md").read_text()
    now = re.search(r"in the report, ([\d.]+)% / ([\d.]+)% now", cpu)
    expected = (fp32[2], fp32[3], fp32[1], bf16[2], bf16[1], f"{min(medians):.1f}", f"{max(medians):.1f}",
                now[1], now[2], str(len(_table_rows(cpu))))
    assert found.groups() == expected
