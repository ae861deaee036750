"""The ends trimmed by `benchmarks/search/source_ends.py` (issue 59, a validation study): what goes, and that the
graph stays connected through what went."""

from __future__ import annotations

import numpy as np

from benchmarks.search.source_ends import trim
from narbench.data.graph import ArchGraph

VOCAB = ["linear", "embedding", "add", "layernorm", "attention", "tanh"]


def _graph():
    # 0 linear (patches) -> 2 add <- 1 embedding (positions, no producer); 2 -> 3 layernorm -> 4 attention
    # -> 5 layernorm -> 6 linear -> 7 tanh (the pooler)
    ops = np.array([0, 1, 2, 3, 4, 3, 0, 5])
    edges = np.array([[0, 1, 2, 3, 4, 5, 6], [2, 2, 3, 4, 5, 6, 7]])
    return ArchGraph(ops, edges, "toy", "f", "c")


def test_each_end_goes_alone_and_the_rest_is_rewired():
    g = _graph()
    assert trim(g, VOCAB, head=False, embeddings=False) is g
    head = trim(g, VOCAB, head=True, embeddings=False)
    assert [VOCAB[o] for o in head.ops] == ["linear", "embedding", "add", "layernorm", "attention", "layernorm"]
    emb = trim(g, VOCAB, head=False, embeddings=True)
    assert "embedding" not in [VOCAB[o] for o in emb.ops] and emb.num_nodes == 7
    assert emb.edges.T.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6]]  # the add keeps its patch input
    both = trim(g, VOCAB, head=True, embeddings=True)
    assert both.num_nodes == 5 and both.validate(len(VOCAB)) is both
    assert g.num_nodes == 8  # the input graph is untouched


def test_a_bypassed_node_joins_its_producers_to_its_consumers():
    ops = np.array([0, 3, 1, 2, 0])  # linear -> layernorm -> [embedding with a producer stays] ...
    edges = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    g = ArchGraph(ops, edges, "toy", "f", "c")
    assert trim(g, VOCAB, head=False, embeddings=True) is g  # an embedding fed by the graph is an input lookup: kept
    cut = trim(g, VOCAB, head=True, embeddings=False)
    assert [VOCAB[o] for o in cut.ops] == ["linear", "layernorm"] and cut.edges.T.tolist() == [[0, 1]]
