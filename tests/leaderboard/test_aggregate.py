"""Aggregation over seeds (`narbench.leaderboard.aggregate`)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from narbench import leaderboard as lb
from tests.handmade import write_result


def test_mean_sample_std_and_n_over_seeds(tmp_path):
    for s, v in enumerate((0.5, 0.6, 0.7)):
        write_result(tmp_path, "gcn", "none", s, np.full(10, v))
    recs = lb.collect([tmp_path])
    df = lb.aggregate(recs)
    row = df.iloc[0]
    assert (row["dataset"], row["device"], row["encoder"], row["objective"], row["init"]) == ("nas", "cpu", "gcn", "ce+cl", "scratch")
    assert row["n"] == 3 and row["seeds"] == "0 1 2"
    assert row["ndcg@20 mean"] == pytest.approx(0.6, abs=1e-12)
    assert row["ndcg@20 std"] == pytest.approx(0.1, abs=1e-12)  # sample std, ddof=1
    assert row["map_capped@100 mean"] == pytest.approx(0.6, abs=1e-12)
    one = lb.aggregate([r for r in recs if r.result.seed == 1])
    assert one.iloc[0]["n"] == 1 and math.isnan(one.iloc[0]["mrr@20 std"])  # a single seed has no std


def test_aggregate_files(tmp_path):
    write_result(tmp_path / "res", "gcn", "none", 0, np.full(10, 0.5))
    csv, js = lb.write_aggregate(lb.aggregate(lb.collect([tmp_path / "res"])), tmp_path / "lb")
    assert csv.read_text().splitlines()[0].startswith("dataset,split,profile,device,protocol,encoder,splitter,")
    (row,) = json.loads(js.read_text())
    assert row["ndcg@20 mean"] == 0.5 and row["ndcg@20 std"] is None
