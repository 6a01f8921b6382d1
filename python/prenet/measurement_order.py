"""The order in which NeuSight measured its rows, and what it adds to their times.

NeuSight measured each GPU's convolutions in one process, in one random order of shapes, and a call's time grows
with how far into that process it was measured: by the end of a file (about 5,000 shapes) 0.2-0.6 ms a call more by
GPU, the same milliseconds at every size, so a cost per call and not a slower GPU (bench/conv_measurement_order.py;
the median over each GPU's last 1,000 rows). A training process runs a few dozen shapes, as at the start of such a
file. `at_first_position` takes that cost off each row: a model of the rows' time learns the position beside the
configuration (xgboost on our features, the bundles' target), and each row loses what the model adds between
position 0 and its own.
"""
import numpy as np


def with_position(frame):
    """`frame` with `position`: each row's index within its GPU's file (prenet.datasets.load_neusight keeps the
    files' order, one file per GPU and operator), rows without a time dropped."""
    frame = frame.copy()
    frame["position"] = frame.groupby("gpu").cumcount()
    return frame[frame["forward_ms"] > 0].reset_index(drop=True)


def position_model(kind, frame, rows=None):
    """(model, its inputs for every row of `frame`, target): xgboost on our features and the row's position
    (`frame` from with_position), fitted on `rows` (a boolean mask; default all)."""
    from . import training

    ours = training.OursInputs(kind, frame)  # with_position's rows all have a time: the same rows, in order
    x = np.c_[ours.x, ours.frame["position"].to_numpy(float)]
    fit_rows = np.ones(len(frame), bool) if rows is None else np.asarray(rows)
    return training.make_model("xgboost").fit(x[fit_rows], ours.y[fit_rows]), x, ours.target


def predicted_at(kind, frame, fitted, position):
    """Milliseconds the position model `fitted` (position_model's) gives each row of `frame` at `position`."""
    from . import training

    model, x, target = fitted
    z = x.copy()
    z[:, -1] = position
    return training.to_ms(kind, frame, target, model.predict(z))


def at_first_position(kind, frame):
    """`frame` (from prenet.datasets.load_neusight) with `position` and `forward_ms` as at the start of its file:
    each row's time less what a position model fitted on every row adds between position 0 and the row's own
    (`order_ms`, the part taken off); a row left with no time is dropped."""
    frame = with_position(frame)
    fitted = position_model(kind, frame)
    frame["order_ms"] = (predicted_at(kind, frame, fitted, frame["position"].to_numpy(float)) -
                         predicted_at(kind, frame, fitted, 0))
    frame["forward_ms"] = frame["forward_ms"] - frame["order_ms"]
    return frame[frame["forward_ms"] > 0].reset_index(drop=True)
