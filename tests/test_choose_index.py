"""The index choice (`benchmarks/search/choose_index.py`, issue 59 item 4): its rule, its validation sides and
the robustness benchmark's choice of the graphs it edits, on small data the tests build."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.search.choose_index import choose
from benchmarks.search.robustness import Cell, Side, edited_graphs, validation_side


def _cell(label: str, size: int, median: float, lo: float, hi: float) -> Cell:
    return Cell(label, "all", size, 100, median, lo, hi, 0, 0, 0, 0, 0, 0)


def test_the_rule_keeps_the_best_admissible_and_breaks_ties_by_order():
    cells = {("wl", "s", 1): _cell("wl", 1, 1, 1, 1), ("wl", "s", 2): _cell("wl", 2, 1, 1, 2),
             ("a", "s", 1): _cell("a", 1, 1, 1, 1), ("a", "s", 2): _cell("a", 2, 3, 2.5, 3),   # beyond wl's: out
             ("b", "s", 1): _cell("b", 1, 1, 1, 1), ("b", "s", 2): _cell("b", 2, 2, 2, 3),     # touches wl's: in
             ("c", "s", 1): _cell("c", 1, 1, 1, 1), ("c", "s", 2): _cell("c", 2, 1, 1, 1)}
    labels = ["a", "wl", "b", "c"]
    choice, ok = choose(labels, {"a": 0.9, "wl": 0.5, "b": 0.7, "c": 0.70004}, cells)
    assert ok == {"a": False, "wl": True, "b": True, "c": True}
    assert choice == "b"  # c ties b to 4 decimals: the earlier wins
    assert choose(labels, {"a": 0.9, "wl": 0.5, "b": 0.7, "c": 0.71}, cells)[0] == "c"


def test_rule_2_weighs_each_family_once_and_reads_the_first_hit_and_p10():
    """A side's search score is the mean of family@1 and P@10, each a mean of per-family means: one family's
    many queries do not outweigh the others (the by-query figures are kept beside them)."""
    from benchmarks.search.index_quality import BY_FAMILY, search_score, summarise

    each = {"family@1": np.array([1.0, 1.0, 1.0, 0.0]), "p@10": np.array([0.9, 0.9, 0.9, 0.1]),
            "map_capped@20": np.array([0.5, 0.5, 0.5, 0.5])}
    row = summarise(each, ["vit", "vit", "vit", "swin"])
    assert row["family@1"] == pytest.approx(0.75) and row["family@1" + BY_FAMILY] == pytest.approx(0.5)
    assert row["p@10" + BY_FAMILY] == pytest.approx(0.5)
    assert search_score(row) == pytest.approx(0.5)
    row["map_capped@20" + BY_FAMILY] = 1.0  # MAP plays no part in rule 2
    assert search_score(row) == pytest.approx(0.5)


def test_only_the_chosen_graphs_are_edited_and_the_default_is_unchanged():
    from narbench.data.edits import EDIT_KINDS
    from tests.conftest import toy_graphs

    graphs, vocab = toy_graphs(), [f"op{i}" for i in range(8)]
    kind = EDIT_KINDS[0]
    everything = edited_graphs(graphs, vocab, kind, 1, 10, seed=0)
    assert edited_graphs(graphs, vocab, kind, 1, 10, 0, among=np.arange(len(graphs)))[1] == everything[1]
    among = np.array([3, 7, 20, 41])
    edited, origin = edited_graphs(graphs, vocab, kind, 1, 10, 0, among=among)
    assert sorted(origin) == among.tolist() and len(edited) == 4  # each once, none other


def _real_like():
    """A dataset with real's two splits (standard by family, unseen by model) over toy graphs."""
    from narbench.data.dataset import GraphDataset, group_split, stratified_split
    from narbench.datasets.real import model_group
    from tests.conftest import toy_graphs

    graphs = toy_graphs(per_family=30)
    for i, g in enumerate(graphs):
        g.meta["model"] = f"m{i // 3}"  # three variants per model
    fam = [g.family for g in graphs]
    unseen = group_split(fam, [model_group(g) for g in graphs], test_size=0.25, seed=0)
    return GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64,
                        stratified_split(fam, test_size=0.25, seed=0), splits={"unseen": unseen})


@pytest.mark.parametrize("name", ["standard", "unseen"])
def test_a_validation_side_never_touches_the_test_graphs(name):
    from narbench.datasets.real import model_group

    ds = _real_like()
    side: Side = validation_side(ds, name)
    split = ds.get_split(name)
    assert np.array_equal(side.index, np.sort(split.train))
    assert not set(side.pool) & set(side.val) and set(side.pool) | set(side.val) <= set(split.train)
    assert len(side.val) and {ds.graphs[i].family for i in side.val} <= {ds.graphs[i].family for i in side.pool}
    if name == "unseen":  # no variant of a validation model in the pool
        assert not {model_group(ds.graphs[i]) for i in side.val} & {model_group(ds.graphs[i]) for i in side.pool}


def test_the_source_side_holds_out_each_shared_familys_smallest_source_once():
    """`source` (code of a known family from another source): every family two sources implement is a query
    family in exactly one fold, by its smallest source's graphs; its graphs from the other source stay in that
    fold's pool; a family of one source is never a query; no test graph of `standard` is touched."""
    from benchmarks.search.index_sides import source_folds

    ds = _real_like()
    for i, g in enumerate(ds.graphs):  # vitish and resnetish: two sources (the second smaller); the rest one
        g.source = "zoo-b" if g.family in ("vitish", "resnetish") and i % 4 == 0 else "zoo-a"
    folds = source_folds(ds, seed=0, folds=2)
    train = set(ds.get_split("standard").train.tolist())
    held = [{ds.graphs[i].family for i in f.val} for f in folds]
    assert sorted(fam for h in held for fam in h) == ["resnetish", "vitish"]  # each family in one fold only
    for fold in folds:
        assert set(fold.val) | set(fold.pool) == set(fold.index) and not set(fold.val) & set(fold.pool)
        assert set(fold.index) <= train
        assert {ds.graphs[i].source for i in fold.val} == {"zoo-b"}
        for fam in {ds.graphs[i].family for i in fold.val}:  # still findable: its other source in the pool
            assert any(ds.graphs[i].family == fam and ds.graphs[i].source == "zoo-a" for i in fold.pool)
            assert all(ds.graphs[i].source == "zoo-a" for i in fold.pool if ds.graphs[i].family == fam)
    wide = source_folds(ds, seed=0, folds=2, train=ds.get_split("standard").train[::2])  # given training graphs
    assert all(set(f.index) == set(ds.get_split("standard").train[::2].tolist()) for f in wide)
    assert all(set(f.val) <= set(f.index) for f in wide)
    for g in ds.graphs:
        g.source = "zoo-a"
    with pytest.raises(ValueError, match="two sources"):
        source_folds(ds)


def test_fusions_in_two_alphabets_from_one_fit_keep_their_own_parts():
    """Candidates that differ only in their fusion share one fit; one reading WL in op roles must not reuse the
    WL part of one reading it in ops (each index's rows and its query embedding agree; the two differ)."""
    from benchmarks.search.choose_index import Candidate
    from benchmarks.search.index_sides import side_dataset, side_indexes
    from narbench.data.dataset import GraphDataset
    from narbench.search_engine.index_build import IndexConfig, fit_encoder

    toy = _real_like()
    names = ["relu", "gelu", "linear", "add", "layernorm", "rmsnorm", "conv", "softmax"]  # two roles among op0-op5
    ds = GraphDataset("toy", "0", names, toy.graphs, toy.sha256, toy.split, splits=toy.splits)
    side = validation_side(ds, "standard")
    sub = side_dataset(ds, side)
    pool = side.positions()[0]
    own = {"holdout": "family", "wl_rounds": 1}
    fitted = fit_encoder(IndexConfig(encoder="graf-lda", dataset="toy", params=own, progress=False), sub, train=pool)
    members = [Candidate("ops", "graf-lda", {**own, "fuse_wl": 0.5}),
               Candidate("roles", "graf-lda", {**own, "fuse_wl": 0.5, "fuse_wl_alphabet": "roles"})]
    out = {cand.label: (index, embed(sub.core_graphs[:8])) for cand, index, embed in side_indexes(fitted, members,
                                                                                                   sub, "toy")}
    (ops_index, ops_q), (roles_index, roles_q) = out["ops"], out["roles"]
    assert not np.allclose(ops_index.embeddings, roles_index.embeddings, atol=1e-3)
    assert not np.allclose(ops_q, roles_q, atol=1e-3)


def test_the_files_are_written_when_only_the_source_side_ran(tmp_path):
    """`--sides source` measures no edits: robustness.csv is its header alone, and choice.json is still written."""
    import csv
    import json
    import types

    from benchmarks.search.choose_index import Candidate, write_out

    args = types.SimpleNamespace(graphs=40, seed=0, boot=0, source_graphs="split")
    ds = types.SimpleNamespace(name="toy", version="0", sha256="0" * 64, canonical_version=None)
    row = {m: 0.5 for m in ("map_capped@20", "ndcg@20", "mrr@20", "family@1", "p@10")}
    row.update({m + "/family": 0.5 for m in list(row)})
    write_out(tmp_path, ds, args, [Candidate("wl", "wl")], {("wl", "source"): row}, {}, {"wl": 0.5}, {"wl": 0.5},
              {"wl": True}, "wl", {})
    with (tmp_path / "robustness.csv").open() as fh:
        assert list(csv.reader(fh)) == [["candidate", "side", "index", "kind", "size", "n", "median", "median_lo",
                                         "median_hi", "p90", "p90_lo", "p90_hi", "first", "p99", "worst"]]
    assert json.loads((tmp_path / "choice.json").read_text())["choice"] == "wl"


def test_outside_models_are_scored_by_every_family_they_expect_against_the_whole_index():
    """The `wildval` side: a model from outside the corpus searches every row of a side's index; its first hit is
    right when one of the hit's families is one it expects, and P@10 counts such hits; MAP and the rest are NaN."""
    from benchmarks.search.index_quality import outside_per_query
    from benchmarks.search.index_sides import side_dataset
    from narbench.search_engine.index_build import IndexConfig, build_index

    ds = _real_like()
    sub = side_dataset(ds, validation_side(ds, "standard"))
    index = build_index(IndexConfig(encoder="wl", dataset="toy", params={"dim": 64}, progress=False), dataset=sub)
    queries = sub.core_graphs[:6]
    own = [(g.family,) for g in queries]
    other = [("no-such-family", g.family) for g in queries]  # a second expected family: still right
    wrong = [("no-such-family",)] * len(queries)
    emb = index.embed(queries)
    right = outside_per_query(index, sub.core_graphs, emb, own)
    assert right["family@1"].tolist() == [1.0] * 6  # each finds itself first
    assert np.array_equal(outside_per_query(index, sub.core_graphs, emb, other)["p@10"], right["p@10"])
    none = outside_per_query(index, sub.core_graphs, emb, wrong)
    assert not none["family@1"].any() and not none["p@10"].any() and np.isnan(none["map_capped@20"]).all()
