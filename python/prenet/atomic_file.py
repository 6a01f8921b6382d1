"""Files written whole or not at all: a run interrupted while writing leaves the previous version in place."""
import json
from pathlib import Path


def write_json(path, value, indent=None):
    """Writes `value` as JSON to `path` (folders made as needed) through a temporary file beside it, renamed over
    `path` once complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=indent) + "\n")
    partial.replace(path)
