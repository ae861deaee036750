"""The ceiling oracle (`narbench.eval.ceiling`) on small hand-built cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from narbench.cli import ceiling as D
from narbench.eval import ceiling as C
from narbench.eval.metrics import score_rankings
from tests.conftest import chain_graph, edge_list_graph

METRICS = ("mrr@20", "map@20", "map_capped@20", "ndcg@20", "ndcg@100")


def _case():
    """Corpus: a1 (class 0) and b1 (class 0) are one structure in families A and B; a2 (class 1) is A's alone.

    Queries: qa (family A) and qb (family B), each a structure of its own (classes 7 and 8)."""
    corpus_labels, corpus_classes = ["A", "B", "A"], [0, 0, 1]
    return corpus_labels, corpus_classes


def test_pure_classes_score_one():
    labels = ["A"] * 5 + ["B"] * 4 + ["C"] * 3
    classes = [0, 0, 1, 2, 2, 3, 4, 4, 4, 5, 6, 6]  # every class in one family
    q_labels, q_classes = ["A", "B", "C", "A"], [0, 3, 9, 10]  # a query may share a corpus structure or not
    res = C.ceiling(q_labels, q_classes, labels, classes, draws=5)
    for m in (*C.TABLE_METRICS, "map@20"):
        assert res.means[m] == pytest.approx(1.0)
        assert res.exact_means[m] == pytest.approx(1.0)
    assert res.exact_gap == pytest.approx(0.0)


def test_cross_family_twin_caps_the_score_by_the_expected_amount():
    """By hand. Query of A: a2 (share 1) first, then {a1, b1} (share 1/2) in random order; |R| = 2.
    RR = 1; DCG = 1 + (1/log2 3 + 1/2) / 2 against the ideal 1 + 1/log2 3; AP = (1 + (1 + 2/3) / 2) / 2.
    Query of B: {a1, b1} first in random order; |R| = 1: RR = AP = (1 + 1/2) / 2; DCG = (1 + 1/log2 3) / 2."""
    corpus_labels, corpus_classes = _case()
    res = C.ceiling(["A", "B"], [7, 8], corpus_labels, corpus_classes, draws=1)
    l3 = 1 / math.log2(3)
    want_a = {"mrr@20": 1.0, "ndcg@20": (1 + (l3 + 0.5) / 2) / (1 + l3), "map@20": (1 + (1 + 2 / 3) / 2) / 2}
    want_b = {"mrr@20": 0.75, "ndcg@20": (1 + l3) / 2, "map@20": 0.75}
    for m in want_a:
        assert res.exact_per_query[m][0] == pytest.approx(want_a[m], abs=1e-12)
        assert res.exact_per_query[m][1] == pytest.approx(want_b[m], abs=1e-12)
    assert res.exact_per_query["map_capped@20"][0] == pytest.approx(want_a["map@20"])  # min(20, |R|) = |R|
    assert res.exact_means["ndcg@20"] < 1.0
    # the project's metric code over both tie orders gives the same expectation
    orders = [np.array([[2, 0, 1], [0, 1, 2]]), np.array([[2, 1, 0], [1, 0, 2]])]
    for m in want_a:
        ranx = np.mean([score_rankings(["A", "B"], corpus_labels, o)[1][m] for o in orders], axis=0)
        assert ranx == pytest.approx([want_a[m], want_b[m]], abs=1e-12)
    many = C.ceiling(["A", "B"], [7, 8], corpus_labels, corpus_classes, draws=400)
    assert many.means["ndcg@20"] == pytest.approx(res.exact_means["ndcg@20"], abs=0.02)


def test_expected_metrics_equal_ranx_over_every_tie_order():
    """Blocks (relevant, size): (1, 1), (2, 4), (0, 2), (1, 2), then irrelevant items; every order enumerated."""
    rel = [[1], [1, 1, 0, 0], [0, 0], [1, 0]]
    items, start = [], 0
    for block in rel:
        items.append(list(range(start, start + len(block))))
        start += len(block)
    labels = [lab for block in rel for lab in block] + [0] * 3  # 1 relevant, 0 not
    n_rel = sum(labels)
    rankings = []
    for perms in itertools.product(*(itertools.permutations(b) for b in items)):
        rankings.append([i for p in perms for i in p] + [9, 10, 11])
    ranked = np.array(rankings)
    _, per_query = score_rankings([1] * len(ranked), labels, ranked, ks=(2, 5, 20))
    exact = C.expected_metrics([(sum(b), len(b)) for b in rel], n_rel, ks=(2, 5, 20))
    for m in ("mrr", "map", "map_capped", "ndcg"):
        for k in (2, 5, 20):
            assert exact[f"{m}@{k}"] == pytest.approx(per_query[f"{m}@{k}"].mean(), abs=1e-12), f"{m}@{k}"


def test_expected_first_hit_when_the_first_block_has_no_relevant():
    exact = C.expected_metrics([(0, 3), (1, 2)], 1, ks=(20,))
    assert exact["mrr@20"] == pytest.approx((1 / 4 + 1 / 5) / 2)


def test_queries_with_one_structure_share_one_ranking():
    """qa (A) and qb (B) are isomorphic: one group, ranked by summed shares (class 0: 1/2 + 1/2, class 1: 1 + 0)."""
    corpus_labels, corpus_classes = _case()
    groups, _, _ = C.oracle_groups(["A", "B", "A"], [7, 7, 8], corpus_labels, corpus_classes)
    assert len(groups) == 2
    shared = next(g for g in groups if len(g.queries) == 2)
    # key(class 0) = 1/2 + 1/2 = 1 = key(class 1) = 1 + 0: one tie block of all three graphs
    assert [sorted(b.tolist()) for b in shared.blocks] == [[0, 1, 2]]
    for draw in range(5):
        ranked = C.draw_rankings(groups, 3, 3, draw)
        assert ranked[0].tolist() == ranked[1].tolist()
        assert sorted(ranked[0].tolist()) == [0, 1, 2]
    res = C.ceiling(["A", "B", "A"], [7, 7, 8], corpus_labels, corpus_classes, draws=3)
    for m in METRICS:
        assert res.exact_per_query[m][0] <= res.exact_per_query[m][2]  # sharing costs A's query


def test_group_ranking_follows_the_summed_relevance():
    corpus_labels = ["A", "A", "B", "B", "B", "C"]
    corpus_classes = [0, 0, 1, 2, 2, 3]
    groups, _, _ = C.oracle_groups(["B", "B", "A"], [5, 5, 5], corpus_labels, corpus_classes)
    (g,) = groups
    # keys: class 0: 1 (one A query x share 1); classes 1, 2: 2 (two B queries x share 1); class 3: 0
    assert [sorted(b.tolist()) for b in g.blocks] == [[2, 3, 4], [0, 1]]
    assert g.fill.tolist() == [5]


def test_deterministic():
    rng = np.random.default_rng(3)
    corpus_labels = rng.integers(0, 4, 60).tolist()
    corpus_classes = rng.integers(0, 25, 60).tolist()
    q_labels, q_classes = rng.integers(0, 4, 12).tolist(), rng.integers(0, 30, 12).tolist()
    q_labels = [lab if lab in corpus_labels else corpus_labels[0] for lab in q_labels]
    a = C.ceiling(q_labels, q_classes, corpus_labels, corpus_classes, depth=20, draws=4)
    b = C.ceiling(q_labels, q_classes, corpus_labels, corpus_classes, depth=20, draws=4)
    for m in a.per_query:
        assert np.array_equal(a.per_query[m], b.per_query[m])
    assert a.exact_gap < 0.1


def test_structure_classes_iso_and_near_duplicate():
    base = chain_graph("a", "A", "cnn", [2, 3, 4], 3, skip=True)
    perm = np.array([0, 3, 1, 2, 4, 7, 5, 6, 8, 9, 10])  # the same graph with nodes renumbered
    inv = np.argsort(perm)
    renamed = edge_list_graph(base.ops[inv], perm[base.edges].T, name="b", family="B")
    other = chain_graph("c", "A", "cnn", [2, 3, 4], 3, skip=False)
    # two disjoint copies of `base`: every WL count doubles (cosine 1), not isomorphic to `base`
    double = edge_list_graph(np.concatenate([base.ops, base.ops]),
                             np.concatenate([base.edges, base.edges + base.num_nodes], axis=1).T, name="d")
    graphs = [base, renamed, other, double]
    iso = D.structure_classes(graphs, "iso")
    assert iso[0] == iso[1] and len({iso[0], iso[2], iso[3]}) == 3
    nd = D.structure_classes(graphs, "nd")
    assert nd[0] == nd[1] == nd[3] and nd[2] != nd[0]
    assert iso.tolist() == D.structure_classes(graphs, "iso").tolist()
    with pytest.raises(ValueError):
        D.structure_classes(graphs, "wl")


def test_write_csv_keeps_rows_of_splits_not_rerun(tmp_path):
    path = tmp_path / "c.csv"
    row = {"dataset": "real", "split": "unseen", "resolution": "iso", "queries": 3}
    D.write_csv(path, ("dataset", "split", "resolution", "queries"), [row, {**row, "split": "crossimpl"}],
                key=("dataset", "split", "resolution"))
    D.write_csv(path, ("dataset", "split", "resolution", "queries"), [{**row, "split": "crossimpl", "queries": 5}],
                replace=[("real", "crossimpl", "iso")], key=("dataset", "split", "resolution"))
    lines = path.read_text().splitlines()
    assert lines == ["dataset,split,resolution,queries", "real,unseen,iso,3", "real,crossimpl,iso,5"]


def test_write_csv_keeps_the_rows_of_another_version(tmp_path):
    """Computing real 2.2's ceiling keeps 2.1's rows (its committed leaderboard still cites them)."""
    path, cols, key = tmp_path / "c.csv", ("dataset", "version", "split", "resolution", "rule", "queries"), D.CEILING_KEY
    old = {"dataset": "real", "version": "2.1", "split": "unseen", "resolution": "iso", "rule": "label", "queries": 3}
    D.write_csv(path, cols, [old], key=key)
    D.write_csv(path, cols, [{**old, "version": "2.2", "queries": 4}], replace=[("real", "2.2", "unseen", "iso", "label")],
                key=key)
    D.write_csv(path, cols, [{**old, "version": "2.2", "queries": 5}], replace=[("real", "2.2", "unseen", "iso", "label")],
                key=key)
    assert path.read_text().splitlines()[1:] == ["real,2.1,unseen,iso,label,3", "real,2.2,unseen,iso,label,5"]


def test_registered_versions_add_their_splits():
    known = D.known_splits()
    assert known[:len(D.SPLITS)] == list(D.SPLITS)
    assert ("real-2.2", "unseen") in known and ("real-2.2", "crossimpl") in known
    assert not any(d.startswith("nas-") for d, _ in known)


def test_vote_rule_ranks_a_query_by_its_structure_in_the_corpus():
    """qa (family A) has the structure of class 0, which the corpus holds as two B graphs and one A graph:
    `label` ranks A's graphs first (class 1: share 1, then class 0: share 1/3); `vote` weighs the classes by
    class 0's families (A 1, B 2): class 0 key (1 * 1 + 2 * 2) / 3 = 5/3, class 1 (A) key 1, class 2 (B) key 2."""
    corpus_labels, corpus_classes = ["A", "B", "B", "A", "B"], [0, 0, 0, 1, 2]
    (lab,), _, _ = C.oracle_groups(["A"], [0], corpus_labels, corpus_classes, rule="label")
    assert [sorted(b.tolist()) for b in lab.blocks] == [[3], [0, 1, 2]]
    (vote,), _, _ = C.oracle_groups(["A"], [0], corpus_labels, corpus_classes, rule="vote")
    assert [sorted(b.tolist()) for b in vote.blocks] == [[4], [0, 1, 2], [3]]
    # a structure the corpus does not hold: the vote falls back to the query's label
    (new,), _, _ = C.oracle_groups(["A"], [9], corpus_labels, corpus_classes, rule="vote")
    assert [sorted(b.tolist()) for b in new.blocks] == [[3], [0, 1, 2]]
    assert C.ceiling(["A"], [0], corpus_labels, corpus_classes, rule="vote", draws=2).exact_means["ndcg@20"] < \
        C.ceiling(["A"], [0], corpus_labels, corpus_classes, rule="label", draws=2).exact_means["ndcg@20"]
    with pytest.raises(ValueError):
        C.oracle_groups(["A"], [0], corpus_labels, corpus_classes, rule="best")


def test_each_ceiling_row_says_whether_it_is_a_bound():
    """`iso` rows bound every method that reads only the graph; `nd` rows are a WL-resolution reference that
    methods exceed (graf-lda on real 2.2), named so in the table's `kind` column."""
    fam = np.array(["A", "B", "A", "B"], dtype=object)
    classes = {"iso": np.array([0, 1, 2, 3]), "nd": np.array([0, 0, 1, 1])}
    corpus, queries = np.array([0, 1]), np.array([2, 3])
    ceilings = {(res, "label"): C.ceiling(fam[queries], cls[queries], fam[corpus], cls[corpus], draws=2)
                for res, cls in classes.items()}
    rep = D.SplitReport("real", "unseen", {"version": "2.2", "sha256": "0" * 64}, corpus, queries, ceilings, classes, {})
    rows = D.ceiling_rows(rep, fam)
    assert [(r["resolution"], r["kind"]) for r in rows] == [("iso", "bound"), ("nd", "reference")]
    assert rows[0]["ndcg@20"] == "1.0000" and float(rows[1]["ndcg@20"]) < 1
    assert D.CEILING_COLUMNS.index("kind") == D.CEILING_COLUMNS.index("rule") + 1
