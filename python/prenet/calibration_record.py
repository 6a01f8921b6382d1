"""A calibration file in the user's cache (prenet.host_calibration, prenet.gpu_calibration): read as JSON of a
named format and version, with the fields its reader needs (anything else is named with what to do about it), and
filled by timing reference layers with the native harness, written after each so that an interrupted calibration
resumes."""
import json
import time
from pathlib import Path

from .atomic_file import write_json


def read_record(path, format_name, version, what, command, fields):
    """The dict in the JSON file at `path`, checked to be of `format_name` and `version` and to have `fields`
    ({name: type}); else ValueError saying that `path` is not a prenet `what` and to run `command`."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a prenet {what} ({error}); delete it and run `{command}`") from None
    if not isinstance(record, dict) or record.get("format") != format_name or record.get("version") != version or \
            not all(isinstance(record.get(name), kind) for name, kind in fields.items()):
        raise ValueError(f"{path} is not a prenet {what} of version {version}; delete it and run `{command}`")
    return record


def layer_key(kind, config):
    """A timed layer's identity in a calibration record (a resumed calibration skips the layers it has)."""
    return json.dumps([kind, config], sort_keys=True)


def time_layers(path, record, layers, start_harness, environment_keys, description, progress, row_of, timeout,
                unit="layer"):
    """Times the `layers` (tuples starting with harness kind and harness configuration) that `record` has no row
    for, with the harness `start_harness()` returns (started only when one is pending), appending
    `row_of(layer, result)` for each and writing `record` to `path` after each; then adds this machine's dispatch
    costs (prenet.host_cost) and the date, writes it and returns `path`. `environment_keys`: the harness's
    environment fields kept; `description`, `unit`: the progress bar's."""
    from . import host_cost
    from .progress import progress_bar

    # rows of layers no longer among the reference layers (a file of an earlier version) are dropped, not mixed in
    wanted = {layer_key(layer[0], layer[1]) for layer in layers}
    record["layers"] = [row for row in record["layers"] if layer_key(row["harness_kind"], row["config"]) in wanted]
    done = {layer_key(row["harness_kind"], row["config"]) for row in record["layers"]}
    pending = [layer for layer in layers if layer_key(layer[0], layer[1]) not in done]
    if pending:
        harness = start_harness()
        record["environment"] = {k: harness.environment.get(k, "") for k in environment_keys}
        bar = progress_bar(len(pending) + len(done), description, progress, unit=unit, initial=len(done))
        try:
            for i, layer in enumerate(pending):
                record["layers"].append(row_of(layer, harness.time(i, layer[0], layer[1], timeout)))
                write_json(path, record, indent=1)
                bar.update(1)
        finally:
            bar.close()
            harness.stop()
    record["host_costs"] = host_cost.measure()
    record["date"] = time.strftime("%Y-%m-%d")
    write_json(path, record, indent=1)
    return path
