"""Our CPU set as the predictors learn from it (prenet.datasets): the folders that belong to a set, and a
configuration timed more than once."""
import pandas as pd
import pytest

from conftest import ROOT
from prenet.datasets import cpu_folders, load_cpu

KEYS = ["batch", "features", "optimizer"]


def test_a_configuration_timed_twice_keeps_the_faster_time_of_each_mode(tmp_path):
    rows = pd.read_csv(ROOT / "data" / "cpu" / "add.csv").head(20)
    first, second = tmp_path / "cpu", tmp_path / "cpu_second"
    first.mkdir()
    second.mkdir()
    rows.to_csv(first / "add.csv", index=False)
    again = rows.copy()  # the same configurations timed apart: the first ten in a stretch 1.5 times slower
    timed = [c for c in rows.columns if c.startswith(("forward", "train_")) and c.endswith("_ms")]
    again.loc[:9, timed] *= 1.5
    again.loc[10:, timed] *= 0.9
    again.to_csv(second / "add.csv", index=False)
    assert cpu_folders(first) == [first, second]
    add = load_cpu(first)["add"]
    assert len(add) == len(rows.drop_duplicates(KEYS)) == len(load_cpu(second)["add"])  # the second set alone
    both = rows.merge(add, on=KEYS, suffixes=("_first", ""))
    faster = [1.0] * 10 + [0.9] * 10
    assert both["forward_ms"].tolist() == pytest.approx((both["forward_ms_first"] * faster).tolist())
    assert both["train_ms"].tolist() == pytest.approx((both["train_step_ms"] * faster).tolist())
