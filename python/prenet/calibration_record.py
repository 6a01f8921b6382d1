"""Reading a calibration file from the user's cache (prenet.host_calibration, prenet.gpu_calibration): JSON of a
named format and version, with the fields its reader needs; anything else is named with what to do about it."""
import json
from pathlib import Path


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
