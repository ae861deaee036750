"""Seed-matched paired tests (`narbench.leaderboard.significance`)."""

from __future__ import annotations

from narbench import leaderboard as lb
from tests.leaderboard.conftest import N_QUERIES


def test_seed_matching_uses_only_common_seeds(results):
    sel = lb.select_runs(lb.collect([results]))
    key_ours = next(k for k in sel if k.encoder == "ours" and k.splitter == "motif")
    key_gcn = next(k for k in sel if k.encoder == "gcn")
    a, b, seeds = lb.paired_scores(sel[key_ours], {1: sel[key_gcn][1]}, "ndcg@20")
    assert seeds == [1] and len(a) == len(b) == N_QUERIES
    a, b, seeds = lb.paired_scores(sel[key_ours], sel[key_gcn], "ndcg@20")
    assert seeds == [0, 1, 2] and len(a) == 3 * N_QUERIES
    assert lb.paired_test(a, a) == 1.0 and lb.paired_test(a, b) < 1e-6
    assert lb.paired_test(a, b, "fisher") < 0.05
