"""A graph saved under one set of canonical rules searched in an index of another (real 2.2 vs 2.3; docs/search.md,
"Migrating to real 2.3"): later rules' ops read as the earlier rules write them, and search says what happened."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from narbench.data.canonical import EARLIER_OP, OPS_2_3, canonical_vocabulary, rules_of
from narbench.data.mapping import onto_vocabulary


def test_rules_of_names_the_canonical_version_of_a_vocabulary():
    assert [rules_of(canonical_vocabulary(v)) for v in ("2.1", "2.2", "2.3")] == ["2.1", "2.2", "2.3"]
    assert rules_of(["AddmmBackward0", "ReluBackward0"]) is None
    assert rules_of(list(canonical_vocabulary("2.3"))[:-1]) is None


def test_a_23_graph_in_a_22_vocabulary_reads_its_convolutions_as_conv():
    ops = ["conv", "conv_grouped", "batchnorm", "relu", "conv_depthwise", "conv3d", "causal_attention"]
    edges = np.array([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]])
    vocab = canonical_vocabulary("2.2")
    m = onto_vocabulary(ops, edges, vocab, "2.2")
    assert [vocab[i] for i in m.ops.tolist()] == ["conv", "conv", "batchnorm", "relu", "conv", "conv",
                                                   "causal_attention"]
    assert m.unknown == {} and np.array_equal(m.edges, edges)
    m21 = onto_vocabulary(ops, edges, canonical_vocabulary("2.1"), "2.1")  # 2.1 has no causal mark either
    assert [canonical_vocabulary("2.1")[i] for i in m21.ops.tolist()][-1] == "attention" and m21.unknown == {}
    assert set(EARLIER_OP) == {"causal_attention", *OPS_2_3}


def test_a_22_graph_in_a_23_vocabulary_maps_as_it_is():
    ops = ["conv", "batchnorm", "relu", "linear"]
    edges = np.array([[0, 1, 2], [1, 2, 3]])
    vocab = canonical_vocabulary("2.3")
    m = onto_vocabulary(ops, edges, vocab, "2.3")
    assert [vocab[i] for i in m.ops.tolist()] == ops and m.unknown == {}


def test_a_raw_graph_is_still_canonicalised():
    m = onto_vocabulary(["AddmmBackward0", "ReluBackward0"], np.array([[0], [1]]), canonical_vocabulary("2.2"), "2.2")
    assert [canonical_vocabulary("2.2")[i] for i in m.ops.tolist()] == ["linear", "relu"]


@pytest.mark.parametrize(("saved", "index", "says"), [
    ("2.2", "2.3", "read as saved"), ("2.3", "2.2", "conv_grouped as conv"), ("2.3", "2.3", None), (None, "2.3", None)])
def test_search_says_when_a_saved_graph_follows_other_rules(saved, index, says):
    from narbench.search_engine.engine import rules_warning

    text = rules_warning(saved, SimpleNamespace(canonical_version=index))
    assert (text is None) if says is None else (says in text and f"rules {saved}" in text)


def test_a_graph_file_saved_under_23_searched_in_a_22_index(tmp_path):
    """End to end: a 2.3 graph file in a `wl` index of a 2.2 toy corpus keeps its nodes and carries the warning."""
    from narbench.data.graph import ArchGraph
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search
    from narbench.data.dataset import GraphDataset, Split
    from narbench.search_engine.index_build import IndexConfig, build_index

    v22, v23 = canonical_vocabulary("2.2"), canonical_vocabulary("2.3")
    chain = lambda names, vocab: ArchGraph(ops=[vocab.index(n) for n in names],  # noqa: E731
                                           edges=np.array([list(range(len(names) - 1)), list(range(1, len(names)))]),
                                           name="q", family="f", coarse="cnn", source="t")
    corpus = [chain(["conv", "batchnorm", "relu"] * k, v22) for k in (1, 2, 3)]
    for i, g in enumerate(corpus):
        g.name, g.family = f"g{i}", f"f{i % 2}"
    n = len(corpus)
    ds = GraphDataset("real", "2.2", list(v22), corpus, "x" * 64,
                      Split(np.arange(n), np.zeros(0, dtype=np.int64), 0, 0.0))
    index = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    write_graphs(tmp_path / "q.narg", [chain(["conv_grouped", "batchnorm", "relu"] * 2, v23)], list(v23), {})
    result = search(str(tmp_path / "q.narg"), 2, index=index, progress=False)
    assert result.num_nodes == 6 and result.unknown_ops == {} and result.hits[0].name == "g1"
    assert any("saved under canonical rules 2.3" in w for w in result.warnings)
