"""`narbench.search_engine.ranks`: the rank of an index graph over the whole index is the rank `narbench search`
gives it, on a small `wl` index built here (exact duplicates first, ties by row)."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.data.dataset import GraphDataset, stratified_split
from narbench.data.edits import EditSpec, random_edit
from narbench.data.graph import ArchGraph
from narbench.data.store import write_graphs
from narbench.search_engine.engine import search
from narbench.search_engine.index_build import IndexConfig, build_index
from narbench.search_engine.ranks import query_graph, ranks_of
from tests.conftest import toy_graphs

VOCAB = [f"op{i}" for i in range(8)]


def twin(g: ArchGraph) -> ArchGraph:
    """`g` with its nodes numbered in reverse: the same design (the same WL embedding), other content."""
    n = g.num_nodes
    return ArchGraph(ops=g.ops[::-1].copy(), edges=(n - 1 - g.edges), name=f"{g.name}-twin", family=g.family,
                     coarse=g.coarse, source=g.source)


@pytest.fixture(scope="module")
def toy():
    """(dataset, its wl index): the four toy families and a twin of two of their graphs (tied embeddings)."""
    graphs = toy_graphs(per_family=6)
    graphs += [twin(graphs[0]), twin(graphs[7])]
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    ds = GraphDataset("toy", "0", VOCAB, graphs, "0" * 64, split)
    return ds, build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)


def searched_rank(index, graph: ArchGraph, name: str, tmp_path) -> int:
    """The rank `narbench.search` gives index graph `name` for `graph` saved to a graph file (0: not a hit)."""
    path = tmp_path / "query.narg"
    write_graphs(path, [graph], VOCAB, {})
    hits = [h.name for h in search(str(path), len(index), index=index, progress=False, order="cosine")]
    return hits.index(name) + 1 if name in hits else 0


def test_ranks_of_edited_graphs_are_the_ranks_search_gives(toy, tmp_path):
    ds, index = toy
    rng = np.random.default_rng(0)
    edited, names = [], []
    for g in ds.graphs[:-2:2]:  # not the twins: numbered backwards, the edits refuse them
        for kind in ("remove", "insert", "duplicate-block"):
            e = random_edit(g, EditSpec(kind, 2), VOCAB, rng)
            if e is not None:
                edited.append(e)
                names.append(g.name)
    queries = [query_graph(e, VOCAB, index) for e in edited]
    ranks = ranks_of(index, index.embed(queries), [index.row_of(n) for n in names], [q.content_hash() for q in queries])
    assert len(edited) >= 20 and ranks.min() >= 1 and ranks.max() > 1  # not every original comes first
    assert ranks.tolist() == [searched_rank(index, e, n, tmp_path) for e, n in zip(edited, names)]


def test_a_duplicate_comes_first_and_ties_break_by_row(toy, tmp_path):
    ds, index = toy
    g = ds.graphs[7]
    own, other = index.row_of(g.name), index.row_of(f"{g.name}-twin")
    query = query_graph(g, VOCAB, index)
    emb, digest = index.embed([query, query]), query.content_hash()
    assert np.allclose(index.embeddings[own], index.embeddings[other])  # tied
    assert ranks_of(index, emb, [own, other], [digest, digest]).tolist() == [1, 2]  # the exact duplicate first
    assert searched_rank(index, g, f"{g.name}-twin", tmp_path) == 2
    assert own > other  # rows are in content-hash order: the twin's comes first
    assert ranks_of(index, emb, [own, other], None).tolist() == [2, 1]  # without the hash: ties by row


def test_ranks_of_refuses_what_does_not_fit(toy):
    _, index = toy
    emb = index.embeddings[:2]
    with pytest.raises(ValueError, match="as many targets"):
        ranks_of(index, emb, [0])
    with pytest.raises(ValueError, match="target rows"):
        ranks_of(index, emb, [0, len(index)])
