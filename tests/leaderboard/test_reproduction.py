"""The Reproduction section (`narbench.leaderboard.reproduction`) from hand-made result files."""

from __future__ import annotations

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.eval.metrics import PAPER_NDCG
from tests.handmade import write_result
from tests.leaderboard.conftest import N_QUERIES, base


def _with_paper_ndcg(q: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query scores of a file written since `ndcg_paper@k`: NDCG under the uncut ideal is lower."""
    return {"ndcg@20": q, **{m: q * 0.5 for m in PAPER_NDCG}}


@pytest.fixture
def repro(tmp_path):
    """nas, standard split: ours+motif (3 seeds, all with ndcg_paper), gcn (3 old files without it),
    gat (seed 0 old, seeds 1-2 new), ours+node-number (Table 2); the same ours on the unseen split."""
    out = tmp_path / "res"
    for s in range(3):
        q = base(s)
        write_result(out, "ours", "motif", s, _with_paper_ndcg(q))
        write_result(out, "gcn", "none", s, q - 0.3)
        write_result(out, "gat", "none", s, q - 0.1 if s == 0 else _with_paper_ndcg(q - 0.1))
        write_result(out, "ours", "node-number", s, _with_paper_ndcg(q - 0.05))
        write_result(out, "ours", "motif", s, _with_paper_ndcg(q), split="unseen")
    return out


def _mean_std(values: list[np.ndarray]) -> str:
    means = np.array([float(np.round(v, 6).mean()) for v in values])
    return f"{means.mean():.3f}±{means.std(ddof=1):.3f}"


def test_blocks_match_each_paper_row_to_our_row(repro):
    records = lb.collect([repro])
    df = lb.aggregate(records)
    blocks = lb.build_reproduction(lb.build_tables(records, df), df)
    # the unseen split has no counterpart in the paper: only standard-split blocks
    assert [b.title for b in blocks] == ["Table 1 · nas · split standard · quick · cpu · protocol family",
                                         "Table 2 · nas · split standard · quick · cpu · protocol family"]
    t1, t2 = blocks
    assert [(p.name, r.label if r else None) for p, r in t1.lines] == [("GCN", "gcn"), ("GAT", "gat"),
                                                                         ("Ours", "ours+motif")]
    assert [(p.name, r.label if r else None) for p, r in t2.lines] == [
        ("Node Num", "ours+node-number"), ("Motif Num", None), ("Random", None), ("Ours", "ours+motif")]


def test_paper_row_ids_per_table():
    key = lb.Key("nas", "standard", "quick", "cpu", "family", "ours", "motif", "cl", "pretrained")
    assert [lb.paper_row_id(t, key) for t in (1, 2, 3, 4)] == ["ours+motif", "motif", "cl", "pretrained"]
    assert lb.paper_row_id(1, key._replace(encoder="gcn", splitter="none")) == "gcn"
    assert lb.paper_row_id(1, key._replace(encoder="random", protocol=lb.ANY_PROTOCOL)) is None


def test_section_renders_paper_numbers_beside_both_conventions(repro, tmp_path):
    readme = lb.write_leaderboard([repro], tmp_path / "lb", plots=False).read_text()
    section = readme[readme.index("## Reproduction"):]
    assert readme.index("## Table 4") < readme.index("## Reproduction")
    for reason in ("12,517", "`evaluation/eval.py`", "`evaluation/evaluator.py`", "not cut at k",
                   "`subgraph_model.epoch: 0`", "MAPc"):
        assert reason in section, reason
    t1 = section[section.index("### Table 1 · nas · split standard"):]
    t1 = t1[:t1.index("\n\n", t1.index("|"))].splitlines()[2:]
    assert t1[0].startswith("| paper row | ours | n | k | MRR paper | MRR ours | MAP paper | MAPc ours | MAP ours |")
    ours20 = next(ln for ln in t1 if ln.startswith("| Ours | ours+motif | 3 | 20 |"))
    cells = [c.strip() for c in ours20.strip("|").split("|")][4:]
    qs = [base(s) for s in range(3)]
    # the paper's Table 1, NAS, Ours @20: MRR 1.000, MAP 0.952, NDCG 0.969; ours: the hand-made means
    assert cells == ["*1.000*", _mean_std(qs), "*0.952*", _mean_std(qs), _mean_std(qs), "*0.969*", _mean_std(qs),
                     _mean_std([q * 0.5 for q in qs])]
    # gcn: no file has ndcg_paper; gat: one of three lacks it -> no value, and the note names both
    gcn20 = next(ln for ln in t1 if ln.startswith("| GCN | gcn | 3 | 20 |"))
    gat100 = next(ln for ln in t1 if ln.startswith("| GAT | gat | 3 | 100 |"))
    assert gcn20.endswith("| – |") and gat100.endswith("| – |")
    assert "- `NDCGp` missing for gcn, gat: their result files (all seeds or some) were written before" in section
    assert "No row below has `NDCGp` yet" not in section
    # Table 2: paper rows without a result of ours say so
    assert "| Motif Num | (no result) |  | 50 | *0.998* | – |" in section
    assert "split unseen" not in section


def test_partial_paper_ndcg_is_no_mean_in_the_aggregate(repro):
    df = lb.aggregate(lb.collect([repro]))
    by = {(r["encoder"], r["splitter"], r["split"]): r for r in df.to_dict(orient="records")}
    assert by[("ours", "motif", "standard")]["ndcg_paper@20 mean"] == pytest.approx(
        np.mean([np.round(base(s) * 0.5, 6).mean() for s in range(3)]))
    assert np.isnan(by[("gat", "none", "standard")]["ndcg_paper@20 mean"])
    assert np.isnan(by[("gcn", "none", "standard")]["ndcg_paper@50 mean"])


def test_no_matching_result_says_so(tmp_path):
    out = tmp_path / "res"
    write_result(out, "random", "none", 0, np.full(N_QUERIES, 0.1))  # a floor: not in the paper
    records = lb.collect([out])
    df = lb.aggregate(records)
    blocks = lb.build_reproduction(lb.build_tables(records, df), df)
    assert blocks == []
    assert "No `quick` or `paper` results on the `standard` split" in lb.reproduction_markdown(blocks)


def test_paper_protocol_block_borrows_ours_family_run(tmp_path):
    """`ours` trains on the family under both protocols: the `paper` block shows its `family` run, and says
    so; gcn (coarse labels under `paper`) is never borrowed."""
    out = tmp_path / "res"
    for s in range(2):
        write_result(out, "gcn", "none", s, base(s) - 0.2, protocol="paper")
        write_result(out, "ours", "motif", s, base(s))
        write_result(out, "gcn", "none", s, base(s) - 0.1)
    write_result(out, "gat", "none", 0, base(0))  # family only: not borrowed into the paper block
    records = lb.collect([out])
    df = lb.aggregate(records)
    paper = next(b for b in lb.build_reproduction(lb.build_tables(records, df), df) if b.setting[4] == "paper")
    rows = {p.name: r for p, r in paper.lines}
    assert rows["Ours"].key.protocol == "family" and rows["GCN"].key.protocol == "paper" and rows["GAT"] is None
    assert paper.borrowed == ["ours+motif"]
    text = lb.reproduction_markdown([paper])
    assert "- ours+motif: the `family` run (this encoder trains on the family under both protocols" in text
    # no file here has ndcg_paper: said once above the blocks, not under each
    assert "No row below has `NDCGp` yet: their result files" in text and "`NDCGp` missing for" not in text
