"""NeuSight's convolutions as at the start of each GPU's file (prenet.measurement_order), the rows prenet.implicit_gemm
takes its overhead from."""
import numpy as np
import pandas as pd

from prenet import implicit_gemm
from prenet.datasets import load_neusight
from prenet.measurement_order import with_position


def test_position_counts_each_gpus_rows_in_file_order_and_drops_rows_without_time():
    frame = pd.DataFrame({"gpu": ["a", "b", "a", "a", "b"], "forward_ms": [1.0, 2.0, 0.0, 3.0, 4.0]})
    positioned = with_position(frame)
    assert positioned["position"].tolist() == [0, 0, 2, 1]  # the timeless row of "a" keeps its place in the count
    assert positioned["forward_ms"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_the_cost_taken_off_grows_along_each_file_and_leaves_no_trend():
    rows = implicit_gemm.conv_rows()  # every GPU's conv2d rows, as device time
    raw = with_position(load_neusight(timing="device")["conv2d"]).set_index(["gpu", "position"])["forward_ms"]
    kept = rows.set_index(["gpu", "position"])
    assert len(kept) >= 0.99 * len(raw)  # at most a handful of tiny rows are left with no time
    assert np.allclose(kept["forward_ms"] + kept["order_ms"], raw.loc[kept.index])
    for gpu, one in rows.groupby("gpu"):
        early, late = one[one["position"] < 500], one[one["position"] >= one["position"].max() - 1000]
        # NeuSight's added cost per call: near nothing at the start, a tenth of a millisecond or more at the end
        assert abs(early["order_ms"].median()) < 0.05, gpu
        assert late["order_ms"].median() > 0.1, gpu
        # the time left no longer rises along the file: against the raw rows' trend, the rank correlation of the
        # position with the time over the same configuration's time (the shapes are in one random order on every
        # GPU, so the time itself is unrelated to the position)
        before = raw.loc[gpu].reindex(one["position"]).to_numpy()
        trend = {name: pd.Series(one["position"].to_numpy()).corr(pd.Series(np.log(times)), method="spearman")
                 for name, times in (("raw", before), ("corrected", one["forward_ms"].to_numpy()))}
        assert trend["raw"] > 0.05 and abs(trend["corrected"]) < 0.03, (gpu, trend)
