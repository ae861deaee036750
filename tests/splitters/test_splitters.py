"""Tests for the segment splitters: the uniform baselines (paper section 4.4) and what every segment
splitter shares (segments to parts, registry, topological order); `motif` is in test_motif.py."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.splitters._segments import part_keys, segments_to_partition
from narbench.splitters.motif import MotifSplitter
from narbench.splitters.uniform import MotifNumberSplitter, NodeNumberSplitter, RandomSplitter
from tests.splitters.synthetic import GRAPHS, check_partition, darts_like, owned_segments, random_network, resnet_like

# ------------------------------------------------------------------ uniform splitters


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_node_number(kind):
    graph = GRAPHS[kind]()
    for k in (1, 7, 16, 10_000):
        sp = NodeNumberSplitter(nodes_per_part=k)
        part = sp.split(graph)
        check_partition(graph, part)
        sizes = [len(s) for s in owned_segments(sp, graph)]
        assert part.num_parts == -(-graph.num_nodes // k)
        assert all(s == k for s in sizes[:-1]) and 1 <= sizes[-1] <= k


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_motif_number(kind):
    graph = GRAPHS[kind]()
    for k in (1, 3, 8, 10_000):
        sp = MotifNumberSplitter(num_parts=k)
        part = sp.split(graph)
        check_partition(graph, part)
        sizes = [len(s) for s in owned_segments(sp, graph)]
        assert part.num_parts == min(k, graph.num_nodes)
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_random_splitter(kind):
    graph = GRAPHS[kind]()
    sp = RandomSplitter(min_size=4, max_size=12, seed=3)
    part = sp.split(graph)
    check_partition(graph, part)
    sizes = [len(s) for s in owned_segments(sp, graph)]
    assert all(4 <= s <= 12 for s in sizes), sizes
    again = RandomSplitter(min_size=4, max_size=12, seed=3).split(graph)
    assert all(np.array_equal(a, b) for a, b in zip(part.parts, again.parts))
    other = [len(s) for s in owned_segments(RandomSplitter(min_size=4, max_size=12, seed=4), graph)]
    assert other != sizes
    # seeded per graph (content hash), not by the position in a dataset
    other_graph = GRAPHS["resnet" if kind != "resnet" else "darts"]()
    RandomSplitter(min_size=4, max_size=12, seed=3).split(other_graph)
    assert [len(s) for s in owned_segments(sp, graph)] == sizes


def test_random_splitter_edges_of_range():
    g = darts_like(cells=5)  # 68 nodes
    sizes = [len(s) for s in owned_segments(RandomSplitter(min_size=100, max_size=200), g)]
    assert sizes == [g.num_nodes]
    for seed in range(20):
        sizes = [len(s) for s in owned_segments(RandomSplitter(min_size=5, max_size=9, seed=seed), g)]
        assert sum(sizes) == g.num_nodes and all(5 <= s <= 9 for s in sizes), sizes
    with pytest.raises(ValueError):
        RandomSplitter(min_size=5, max_size=4)


def test_segments_to_partition_overlap():
    """Parts overlap by the edges entering them; macro edges join segments an edge crosses."""
    graph = resnet_like(2)
    order = graph.topological_order()
    part = segments_to_partition(graph, order, [0, 5, 15, 25, graph.num_nodes])
    check_partition(graph, part)
    assert part.parts[1].tolist() == [4] + list(range(5, 15))  # + maxpool, the block's input
    assert part.parts[2].tolist() == [14] + list(range(15, 25))
    assert part.macro_edges.T.tolist() == [[0, 1], [1, 2], [2, 3]]
    keys = part_keys(graph, part)
    assert keys[1] != keys[2]  # same block, but its input is maxpool vs relu


def test_registry_entry_points():
    from narbench.core import registry

    for name, cls in [("motif", MotifSplitter), ("node-number", NodeNumberSplitter),
                      ("motif-number", MotifNumberSplitter), ("random", RandomSplitter)]:
        assert registry.load("splitter", name) is cls
        assert cls.name == name


def test_segments_to_flat_equals_the_partition():
    from narbench.splitters._segments import segments_to_flat

    graph = resnet_like(8, projection_every=3)
    order, bounds = MotifSplitter().segments(graph)
    part = segments_to_partition(graph, order, bounds)
    offsets, nodes, macro = segments_to_flat(graph, order, bounds)
    assert [nodes[a:z].tolist() for a, z in zip(offsets[:-1], offsets[1:])] == [p.tolist() for p in part.parts]
    assert np.array_equal(macro, part.macro_edges)


def test_topological_order_fast_path_equals_kahn_with_smallest_id_first():
    import heapq

    for graph in (random_network(3), resnet_like(5), darts_like(cells=3)):
        assert np.all(graph.edges[0] < graph.edges[1])  # numbered in execution order: the fast path
        n = graph.num_nodes
        indeg = np.bincount(graph.edges[1], minlength=n).tolist()
        succ = [[] for _ in range(n)]
        for u, v in graph.edges.T.tolist():
            succ[u].append(v)
        heap = [i for i in range(n) if indeg[i] == 0]
        out = []
        while heap:
            u = heapq.heappop(heap)
            out.append(u)
            for v in succ[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(heap, v)
        assert graph.topological_order().tolist() == out
