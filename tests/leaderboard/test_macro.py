"""The per-family macro average (`narbench.leaderboard.macro`), a second view of Table 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.leaderboard import clusters
from narbench.leaderboard.macro import family_macro
from tests.conftest import HAND_MADE_SHA256
from tests.handmade import write_result


def test_macro_is_the_mean_over_families_of_each_familys_mean():
    scores = [1.0, 1.0, 1.0, 0.0, 0.5]
    assert family_macro(scores, ["a", "a", "a", "b", "b"]) == pytest.approx((1.0 + 0.25) / 2)
    assert family_macro(scores, ["a"] * 5) == pytest.approx(np.mean(scores))  # one family: the mean over queries
    assert math.isnan(family_macro([], []))
    with pytest.raises(ValueError, match="4 families for 5 queries"):
        family_macro(scores, ["a"] * 4)


def test_the_macro_view_reorders_rows_that_win_on_a_large_family(tmp_path, monkeypatch):
    """90 queries of family `big`, 10 of `small`: gcn is perfect on `big` and poor on `small`, gat fair on
    both. Over queries gcn leads; over families gat does, and the view says so."""
    families = ("big",) * 90 + ("small",) * 10
    monkeypatch.setitem(clusters.DECLARED, ("nas", "1.0", HAND_MADE_SHA256),
                        lambda split, n: clusters.QueryGroups("test", tuple(map(str, range(n))), families))
    gcn = np.array([1.0] * 90 + [0.2] * 10)
    gat = np.array([0.5] * 90 + [1.0] * 10)
    for s in range(3):
        write_result(tmp_path, "gcn", "none", s, gcn)
        write_result(tmp_path, "gat", "none", s, gat)
    tables = lb.build_tables(lb.collect([tmp_path]))
    rows = {r.label: r for r in tables[0].blocks[0].rows}
    assert rows["gcn"].mean["ndcg@20"] > rows["gat"].mean["ndcg@20"]
    assert rows["gcn"].macro["ndcg@20"][0] == pytest.approx(0.6)
    assert rows["gat"].macro["ndcg@20"][0] == pytest.approx(0.75)
    assert rows["gat"].macro["ndcg@20"][1] == 0.0  # identical seeds: no spread
    md = lb.tables_markdown(tables)
    view = md.split("## Per-family macro average")[1]
    lines = [ln for ln in view.splitlines() if ln.startswith("| g")]
    assert lines[0].startswith("| gat | 3 |") and lines[0].endswith("| 2 → 1 |") and "**0.7500±0.0000**" in lines[0]
    assert lines[1].startswith("| gcn | 3 |") and lines[1].endswith("| 1 → 2 |")
    # the per-query cell as Table 1 shows it (its † from the test); the macro cells carry no test
    assert "not a verdict" in view and lines[0].count(lb.SIG_MARK) == 1 and f"0.5500±0.0000{lb.SIG_MARK} |" in lines[0]
    assert all(t.number == 1 or all(not r.macro for b in t.blocks for r in b.rows) for t in tables)  # Table 1 only
