"""Writing a benchmark's report: the markdown file under bench/results/ (folders made as needed), echoed."""
from pathlib import Path


def write_report(path, text):
    """Writes `text` to `path` and prints it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
