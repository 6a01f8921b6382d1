"""bench/resumable_rows.py: a long benchmark's finished pieces survive an interruption and a run of the same set-up
resumes from them; another set-up's, or a line cut short, does not leak into a run."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from resumable_rows import ResumableRows  # noqa: E402

SETUP = {"model": "mlp", "lrs": [0.01, 0.2], "initial": "2.3"}


def test_pieces_kept_are_given_back_to_a_run_of_the_same_setup(tmp_path):
    path = tmp_path / "report.md.rows.jsonl"
    first = ResumableRows(path, SETUP)
    assert first.done == {}
    first.add("0.01|16", {"cells": [1, None, float("inf")], "seconds": 0.5})
    again = ResumableRows(path, dict(SETUP))
    assert list(again.done) == ["0.01|16"]
    assert again.done["0.01|16"]["cells"][:2] == [1, None] and again.done["0.01|16"]["cells"][2] == float("inf")
    again.add("0.2|16", {"cells": [2]})
    assert list(ResumableRows(path, SETUP).done) == ["0.01|16", "0.2|16"]
    again.finish()
    assert not path.exists()


def test_a_line_cut_short_is_dropped_and_the_rest_kept(tmp_path):
    path = tmp_path / "rows.jsonl"
    ResumableRows(path, SETUP).add("a", {"x": 1})
    with path.open("a") as file:
        file.write('{"key": "b", "rec')                       # the process killed while writing
    resumed = ResumableRows(path, SETUP)
    assert resumed.done == {"a": {"x": 1}}
    resumed.add("c", {"x": 3})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("key") for line in lines] == [None, "a", "c"]


def test_another_setups_pieces_are_set_aside_not_used(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    ResumableRows(path, SETUP).add("a", {"x": 1})
    other = ResumableRows(path, {**SETUP, "initial": "2.4"})       # another pre-trained network
    assert other.done == {}
    assert "another set-up" in capsys.readouterr().out
    aside = path.with_name(path.name + ".other-setup")
    assert json.loads(aside.read_text().splitlines()[1])["key"] == "a"
    assert json.loads(path.read_text().splitlines()[0]) == {"setup": {**SETUP, "initial": "2.4"}}
