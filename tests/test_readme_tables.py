"""The README's copies of the validation reports (bench/readme_tables.py): what a block holds, that a written report
refreshes its own block and no other, and that the committed README agrees with the committed reports."""
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
