"""Labels that keep every family (issue 59 item 1, `real` 2.3): dedup keeps every family of a shared canonical
graph, relevance is a shared family, splits keep models whole, the datasheet and search show the families."""

from __future__ import annotations

import json

import numpy as np
import pytest

from narbench.data.dataset import GraphDataset, stratified_split
from narbench.data.graph import ArchGraph
from tests.conftest import toy_graphs


def _graph(name, family, ops=(0, 1, 2), edges=((0, 1), (1, 2)), **meta) -> ArchGraph:
    return ArchGraph(ops=np.array(ops), edges=np.array(edges, dtype=np.int64).reshape(-1, 2).T, name=name,
                     family=family, coarse="other", meta=meta)


def _raw_file(path, rows):
    """A 1.0-style raw graph file: (name, raw op names, edges, family, identity) per graph, in spec order."""
    from narbench.data.store import write_graphs

    vocab = sorted({op for _, ops, _, _, _ in rows for op in ops})
    graphs = [ArchGraph(ops=[vocab.index(o) for o in ops], edges=np.array(edges, dtype=np.int64).reshape(-1, 2).T,
                        name=name, family=fam, coarse="other", source="test",
                        meta={"model": name.split("/")[1], "identity": ident})
              for name, ops, edges, fam, ident in rows]
    write_graphs(path, graphs, vocab, {"name": "real", "version": "1.0"})
    return path


# ----------------------------------------------------------------------------- the derivation


def _keep(name, family, source, meta):  # no taxonomy for hand-made specs: their own labels
    return family, meta


def test_dedup_keeps_every_family_and_off_it_writes_what_22_wrote(tmp_path):
    from narbench.data.store import read_graphs
    from narbench.zoo.derive import FAMILIES_RULE, derive

    chain = ["AddmmBackward0", "GeluBackward0", "AddmmBackward0"]
    other = ["AddmmBackward0", "TanhBackward0"]
    source = _raw_file(tmp_path / "real-1.0.narg", [
        ("test/bigbird/causal", chain, [(0, 1), (1, 2)], "bigbird_pegasus", "test/bigbird"),
        ("test/gpt2/causal", chain, [(0, 1), (1, 2)], "gpt2", "test/gpt2"),
        ("test/neo/causal", chain, [(0, 1), (1, 2)], "gpt_neo", "test/neo"),
        ("test/gpt2/relu", other, [(0, 1)], "gpt2", "test/gpt2"),
        ("test/gpt2b/causal", chain, [(0, 1), (1, 2)], "gpt2", "test/gpt2b"),
    ])
    plain = derive(source, tmp_path / "plain", relabel=_keep, canonical_version="2.2")
    kept = derive(source, tmp_path / "kept", relabel=_keep, canonical_version="2.2", keep_families=True)
    g0, v0, h0, _ = read_graphs(plain["path"])
    g1, v1, h1, _ = read_graphs(kept["path"])
    assert "families" not in h0 and h1["families"] == FAMILIES_RULE and "multi_family" not in plain
    assert all("families" not in g.meta and g.families == (g.family,) for g in g0)  # 2.2's file: one family
    assert [(g.name, g.family) for g in g0] == [(g.name, g.family) for g in g1]  # same graphs, same primary
    shared = g1[0]
    assert shared.name == "test/bigbird/causal" and shared.family == "bigbird_pegasus"
    assert shared.families == ("bigbird_pegasus", "gpt2", "gpt_neo")  # the first spec's first, each once
    assert shared.meta["identities"] == ["test/bigbird", "test/gpt2", "test/neo", "test/gpt2b"]
    assert g1[1].families == ("gpt2",) and kept["multi_family"] == 1
    # stripped of what keep_families adds, the records are 2.2's exactly
    for a, b in zip(g0, g1):
        assert a.meta == {k: v for k, v in b.meta.items() if k not in ("families", "identities")}


def test_versions_after_22_keep_families_by_default(tmp_path):
    from narbench.data.canonical import VERSIONS
    from narbench.data.store import read_graphs
    from narbench.zoo.derive import SINGLE_FAMILY_VERSIONS, derive

    later = [v for v in VERSIONS if v not in SINGLE_FAMILY_VERSIONS]
    if not later:
        pytest.skip("no canonical version after 2.2 in this checkout")
    chain = ["AddmmBackward0", "TanhBackward0"]
    source = _raw_file(tmp_path / "real-1.0.narg", [("test/a/x", chain, [(0, 1)], "fa", "test/a"),
                                                    ("test/b/x", chain, [(0, 1)], "fb", "test/b")])
    summary = derive(source, tmp_path / "d", relabel=_keep, canonical_version=later[0])
    graphs, _, header, _ = read_graphs(summary["path"])
    assert summary["multi_family"] == 1 and "families" in header and graphs[0].families == ("fa", "fb")


def test_families_property_puts_the_primary_first_and_defaults_to_the_family():
    assert _graph("a", "vit").families == ("vit",)
    assert _graph("a", "vit", families=["bert", "vit", "bert"]).families == ("vit", "bert")


def test_isomorphic_graphs_share_their_families_the_invariant_that_replaces_a():
    from narbench.datasets.isomorphism import family_set_violations, isomorphism_violations, unite_families

    a = _graph("bert/base", "bert", (0, 1, 2, 3), ((0, 1), (0, 2), (1, 3), (2, 3)), families=["bert", "big_bird"])
    b = _graph("ibert/base", "bert", (0, 2, 1, 3), ((0, 1), (0, 2), (1, 3), (2, 3)))  # the same graph, renumbered
    c = _graph("vit/x", "vit", (0, 1, 1, 3), ((0, 1), (0, 2), (1, 3), (2, 3)))
    graphs = [a, b, c]
    assert isomorphism_violations(graphs) == []  # 2.2's invariant (a) holds on the primary family
    assert family_set_violations(graphs) == [("bert/base", "ibert/base")]
    assert unite_families(graphs) == 1 and b.families == ("bert", "big_bird") and c.families == ("vit",)
    assert family_set_violations(graphs) == []
    b.family = "roberta"  # two primaries in one class: still a violation
    assert family_set_violations(graphs) == [("bert/base", "ibert/base")]


# ----------------------------------------------------------------------------- relevance


def _ranx_reference(q_sets, c_sets, ranked):
    """ranx.evaluate on Qrels built from the shared-family rule: an implementation independent of ranx_inputs."""
    from ranx import Qrels, Run, evaluate

    qrels = {f"q{i}": {f"d{j}": 1 for j, c in enumerate(c_sets) if set(q) & set(c)} for i, q in enumerate(q_sets)}
    run = {f"q{i}": {f"d{j}": float(len(r) - k) for k, j in enumerate(r)} for i, r in enumerate(ranked)}
    return evaluate(Qrels(qrels), Run(run), ["mrr@20", "map@20", "ndcg@20"], make_comparable=True)


def test_relevance_is_a_shared_family_and_one_family_per_graph_scores_as_before():
    from narbench.eval.metrics import score_rankings
    from narbench.eval.relevance import relevance_labels

    rng = np.random.default_rng(0)
    fams = ["a", "b", "c", "d"]
    corpus = [tuple(rng.choice(fams, size=rng.integers(1, 3), replace=False)) for _ in range(30)]
    queries = [tuple(rng.choice(fams, size=rng.integers(1, 3), replace=False)) for _ in range(12)]
    ranked = np.stack([rng.permutation(30)[:25] for _ in queries])
    as_labels = lambda sets: relevance_labels([_graph("g", s[0], families=list(s)) for s in sets])  # noqa: E731
    means, _ = score_rankings(as_labels(queries), as_labels(corpus), ranked)
    ref = _ranx_reference(queries, corpus, ranked)
    for m in ref:
        assert means[m] == pytest.approx(ref[m], abs=1e-12)
    # one family per graph: the family ids themselves, and the numbers of the rule "has the query's family"
    single_c, single_q = [(c[0],) for c in corpus], [(q[0],) for q in queries]
    ids = {f: i for i, f in enumerate(fams)}
    ds_graphs = [_graph("g", s[0]) for s in single_c]
    fam_ids = np.array([ids[s[0]] for s in single_c])
    assert relevance_labels(ds_graphs, fam_ids) is not None and (relevance_labels(ds_graphs, fam_ids) == fam_ids).all()
    one, _ = score_rankings(np.array([ids[q[0]] for q in single_q]), fam_ids, ranked)
    ref1 = _ranx_reference(single_q, single_c, ranked)
    assert all(one[m] == pytest.approx(ref1[m], abs=1e-12) for m in ref1)
    assert means["mrr@20"] != one["mrr@20"]  # the shared families count


def test_bounds_count_every_item_sharing_a_family():
    from narbench.eval.bounds import evaluated
    from narbench.eval.relevance import relevance_labels

    graphs = [_graph(f"g{i}", f, families=more) for i, (f, more) in enumerate(
        [("a", []), ("a", []), ("b", ["a"]), ("b", []), ("a", []), ("b", [])])]
    split = stratified_split([g.family for g in graphs], test_size=0.34, seed=0)
    fam = np.array([g.family for g in graphs])
    single = evaluated(fam, split, None, None, 0)
    multi = evaluated(fam, split, None, None, 0, relevance_labels(graphs))
    corpus = [graphs[i] for i in split.train]
    expect = [sum(bool(set(graphs[q].families) & set(c.families)) for c in corpus) for q in split.test]
    assert multi.relevant.tolist() == expect
    assert single.relevant.tolist() == [sum(c.family == graphs[q].family for c in corpus) for q in split.test]
    assert multi.relevant.tolist() != single.relevant.tolist()


def test_the_ceiling_judges_a_shared_family_relevant():
    from narbench.eval.ceiling import ceiling

    # query 0 (a) has the structure of corpus graph 0, which is a's as well as b's; query 1 (c) has no twin
    q_labels = np.empty(2, dtype=object)
    q_labels[:] = [("a",), ("c",)]
    c_labels = np.empty(3, dtype=object)
    c_labels[:] = [("b", "a"), ("c",), ("b",)]
    result = ceiling(q_labels, [0, 5], c_labels, [0, 1, 2], draws=3, depth=3)
    assert result.per_query["mrr@20"][0] == 1.0 and result.exact_per_query["mrr@20"][0] == 1.0
    assert result.exact_gap < 1e-9
    with pytest.raises(ValueError, match="no relevant corpus item"):  # plain labels: ("b","a") is not "a"
        ceiling(["a", "c"], [0, 5], ["b", "c", "b"], [0, 1, 2], draws=1, depth=3)


# ----------------------------------------------------------------------------- a run


def _shared_toy(share: bool) -> GraphDataset:
    """The toy families; with `share`, every third vggish graph is resnetish's too (one canonical graph of both)."""
    graphs = toy_graphs()
    if share:
        for g in graphs[12:24:3]:
            g.meta["families"] = [g.family, "resnetish"]
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    return GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64, split)


def test_a_run_judges_relevance_by_every_family_and_says_so():
    from narbench.eval.metrics import score_rankings
    from narbench.eval.relevance import RULE
    from narbench.harness.runner import RunConfig, run

    cfg = RunConfig(encoder="wl", dataset="toy", profile="smoke", out=None, progress=False)
    plain, shared = run(cfg, dataset=_shared_toy(False)), run(cfg, dataset=_shared_toy(True))
    assert "relevance" not in plain.result.dataset and shared.result.dataset["relevance"] == RULE
    assert np.array_equal(plain.ranked, shared.ranked)  # the same graphs, embedded alike: only relevance moved
    ds = _shared_toy(True)
    from narbench.harness.runner import select
    from narbench.train.profiles import get_profile

    _, corpus, queries = select(ds, get_profile("smoke"), 0)
    fam_ids = ds.family_ids()
    single, _ = score_rankings(fam_ids[queries], fam_ids[corpus], plain.ranked)
    assert plain.result.metrics["mrr@20"] == pytest.approx(single["mrr@20"], abs=1e-9)
    assert shared.result.metrics["map@100"] != plain.result.metrics["map@100"]


def test_training_and_the_lda_take_the_primary_family_one_copy_per_graph():
    from narbench.harness.runner import make_labels
    from narbench.train.protocol import get_protocol
    from narbench.core import registry

    ds = _shared_toy(True)
    idx = np.arange(len(ds.graphs))
    labels, record = make_labels(ds, get_protocol("family"), registry.load("encoder", "graf-lda"), idx)
    assert len(labels.cl) == len(labels.ce) == len(ds.graphs)  # no copy per family
    assert labels.cl.tolist() == ds.family_ids().tolist() and ds.families == sorted({g.family for g in ds.graphs})
    assert record is None or record["ce"] != "family" or labels.ce.tolist() == ds.family_ids().tolist()


# ----------------------------------------------------------------------------- splits


def _identity_graphs() -> list[ArchGraph]:
    """Two families of five models each; model gpt2/m0's graph is bigbird's too (one graph, two identities)."""
    out = []
    for fam in ("bigbird", "gpt2"):
        for m in range(5):
            for d in range(3):
                out.append(_graph(f"{fam}/m{m}/d{d}", fam, identity=f"{fam}/m{m}"))
    shared = out[0]  # bigbird/m0/d0, also a gpt2/m1 spec's graph
    shared.meta.update(families=["bigbird", "gpt2"], identities=["bigbird/m0", "gpt2/m1"])
    return out


def test_unseen_keeps_models_that_share_a_graph_whole():
    from narbench.data.dataset import group_split
    from narbench.datasets.families import identity_groups, straddling, whole_group_split

    graphs = _identity_graphs()
    groups = identity_groups(graphs)
    assert groups[0] == "bigbird/m0" and groups[graphs.index(next(g for g in graphs if g.name == "gpt2/m1/d2"))] \
        == "bigbird/m0"  # gpt2/m1 joins bigbird/m0's group through their graph
    labels = [g.family for g in graphs]
    for seed in range(40):
        split = whole_group_split(labels, groups, test_size=0.3, seed=seed)
        assert straddling(graphs, split) == []
        assert sorted([*split.train, *split.test]) == list(range(len(graphs)))
    # grouped by one identity per graph (2.2's rule), some seed puts a model on both sides
    leaks = [s for s in range(40) if straddling(graphs, group_split(labels, [g.meta["identity"] for g in graphs],
                                                                    test_size=0.3, seed=s))]
    assert leaks


def test_real23_splits_standard_by_primary_family_and_unseen_by_identity_groups(tmp_path, monkeypatch):
    from narbench.data.store import write_graphs
    from narbench.datasets.families import straddling
    from narbench.datasets.real import ENV_FILE, Real22Dataset, Real23Dataset

    graphs = _identity_graphs()
    path = tmp_path / "real-2.3.narg"
    write_graphs(path, graphs, ["a", "b", "c"], {"name": "real", "version": "2.3"})
    monkeypatch.setenv(ENV_FILE, str(path))
    ds = Real23Dataset().load()
    assert ds.version == "2.3" and Real23Dataset.artifact == "real-2.3.narg"
    assert ds.splits["standard"].test.tolist() == Real22Dataset().splits(ds.graphs)["standard"].test.tolist()
    assert straddling(ds.graphs, ds.splits["unseen"]) == []
    assert "joined by a graph they share" in ds.splits["unseen"].rule


# ----------------------------------------------------------------------------- the datasheet


def test_the_datasheet_counts_shared_graphs_by_reason_group():
    from narbench.datasets.datasheet import _shared, _shared_markdown
    from narbench.datasets.families import shared_counts

    graphs = [_graph("x", "bigbird_pegasus", families=["bigbird_pegasus", "gpt2", "gpt_neo"]),
              _graph("y", "bert", families=["bert", "big_bird"]), _graph("z", "vit", families=["vit"])]
    counts = shared_counts(graphs, {("bigbird_pegasus", "gpt2"): "pre-LN", ("bert", "big_bird"): "post-LN"})
    assert counts == {"graphs": 2, "families": {2: 1, 3: 1}, "visible_only_so": ["big_bird", "gpt2", "gpt_neo"],
                      "by_group": {"post-LN": 1, "pre-LN": 1, "(no reason listed)": 1}}
    text = "\n".join(_shared_markdown(counts))
    assert "2 graphs carry several families" in text and "| pre-LN | 1 |" in text
    assert _shared([_graph("z", "vit")]) == {} and _shared_markdown({}) == []  # 2.2's data: no section


# ----------------------------------------------------------------------------- search


def test_search_shows_every_family_of_a_hit(tmp_path):
    from rich.console import Console

    from narbench.search_engine.engine import render, search
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, row_families, write_index

    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=_shared_toy(True))
    assert index.header["more_families"] == ["resnetish"]
    write_index(index, tmp_path / "toy.nari")
    index = read_index(tmp_path / "toy.nari")
    shared = index.row_of(toy_graphs()[12].name)
    assert row_families(index, shared) == ("vggish", "resnetish")
    result = search(toy_graphs()[15].name, index=index, k=47)
    hits = {h.name: h.families for h in result}
    assert hits[toy_graphs()[12].name] == ("vggish", "resnetish") and hits[toy_graphs()[13].name] == ("vggish",)
    assert json.loads(json.dumps(result.to_json()))["hits"][0]["families"]
    console = Console(record=True, width=200)
    render(result, console)
    assert "vggish, resnetish" in console.export_text() and "vggish, resnetish" in str(result)
    plain = build_index(IndexConfig(encoder="wl", progress=False), dataset=_shared_toy(False))
    assert "more_families" not in plain.header and "more_indptr" not in plain.arrays


def test_a_result_judged_by_another_rule_is_refused(tmp_path):
    from narbench.eval import validation

    with pytest.raises(validation.InvalidResultError, match="not this narbench's rule"):
        validation._check_dataset(tmp_path / "r.json", type("R", (), {
            "dataset": {"name": "toy", "version": "0", "sha256": "0" * 64, "relevance": "same name"},
            "split": "standard"})(), [validation.KnownDataset("toy", "0", None, ("standard",))])
