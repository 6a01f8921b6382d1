"""A long benchmark's finished pieces kept as they finish, so that a run interrupted (Ctrl-C, a lost machine) and
started again with the same set-up does only what it had not done: one JSON line per piece in a file beside the
report, whose first line is the set-up; a file of another set-up is set aside and the run starts afresh."""
import json
import os
from pathlib import Path


class ResumableRows:
    """Pieces of a run ({key: record}, JSON values) kept in `path` (JSON lines) for a run of `setup` (a JSON dict):
    `done` holds those a run of the same set-up left, `add` keeps one as soon as it is made, `finish` removes the
    file once the report is written."""

    def __init__(self, path, setup):
        self.path, self.setup = Path(path), json.loads(json.dumps(setup))
        self.done = {}
        lines = _whole_lines(self.path) if self.path.exists() else []
        if lines and lines[0].get("setup") == self.setup:
            self.done = {line["key"]: line["record"] for line in lines[1:]}
            print(f"resuming from {self.path}: {len(self.done)} pieces already done", flush=True)
        elif self.path.exists():
            aside = self.path.with_name(self.path.name + ".other-setup")
            self.path.replace(aside)
            print(f"{self.path} was left by another set-up: moved to {aside}; starting afresh", flush=True)
        # written afresh: the set-up and the whole pieces, without a line an interruption cut short
        partial = self.path.with_name(self.path.name + ".partial")
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text("".join(json.dumps(value) + "\n" for value in [{"setup": self.setup}] + [
            {"key": key, "record": record} for key, record in self.done.items()]))
        partial.replace(self.path)

    def add(self, key, record):
        """Keeps `record` under `key` (a string), on disk before returning."""
        self.done[key] = json.loads(json.dumps(record))
        self._append({"key": key, "record": record})

    def finish(self):
        self.path.unlink(missing_ok=True)

    def _append(self, value):
        with self.path.open("a") as file:
            file.write(json.dumps(value) + "\n")
            file.flush()
            os.fsync(file.fileno())


def _whole_lines(path):
    """The JSON values of the file's lines up to the first that does not parse (one an interruption cut short)."""
    values = []
    for line in path.read_text().splitlines():
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return values
