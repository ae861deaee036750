"""Synthetic architectures (numbered in execution order) and the partition checks that the
splitter tests share (test_motif.py, test_splitters.py); benchmarks/speed/bench_motif.py loads the
builders too."""

from __future__ import annotations

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.train.splitter import Partition

# ------------------------------------------------------------------ synthetic architectures


class Builder:
    """Adds op nodes in execution order; node ids are therefore a topological numbering."""

    def __init__(self) -> None:
        self.ops: list[str] = []
        self.edges: list[tuple[int, int]] = []

    def __call__(self, op: str, *parents: int) -> int:
        self.ops.append(op)
        v = len(self.ops) - 1
        self.edges += [(p, v) for p in parents]
        return v

    def graph(self, name: str, vocab: dict[str, int] | None = None) -> ArchGraph:
        vocab = vocab if vocab is not None else {}
        ops = [vocab.setdefault(o, len(vocab)) for o in self.ops]
        edges = np.array(self.edges, dtype=np.int64).T.reshape(2, -1)
        return ArchGraph(ops=ops, edges=edges, name=name, family=name, coarse=name).validate()


VOCAB: dict[str, int] = {}
BOTTLENECK = ["conv", "bn", "relu", "conv", "bn", "relu", "conv", "bn", "add", "relu"]


def resnet_like(blocks: int = 16, projection_every: int = 0) -> ArchGraph:
    """Stem, `blocks` bottlenecks (optionally a projection conv+bn on the skip every k blocks), head."""
    b = Builder()
    x = b("input")
    x = b("maxpool", b("relu", b("bn", b("conv", x))))
    for i in range(blocks):
        h = b("relu", b("bn", b("conv", x)))
        h = b("relu", b("bn", b("conv", h)))
        h = b("bn", b("conv", h))
        skip = b("bn", b("conv", x)) if projection_every and i % projection_every == 0 else x
        x = b("relu", b("add", h, skip))
    b("linear", b("avgpool", x))
    return b.graph(f"resnet-like-{blocks}", VOCAB)


def transformer_like(blocks: int = 12, fine: bool = False) -> ArchGraph:
    """Embedding, `blocks` pre-norm encoder blocks, head. `fine` adds autograd-style view ops."""
    b = Builder()

    def lin(h: int) -> int:
        if fine:  # addmm on a flattened view, reshaped back
            return b("view", b("addmm", b("view", h)))
        return b("matmul", h)

    tok = b("input")
    x = b("add", b("embedding", tok), b("pos_embedding"))
    for _ in range(blocks):
        h = b("layernorm", x)
        q, k, v = lin(h), lin(h), lin(h)
        if fine:
            q, k, v = (b("transpose", b("view", t)) for t in (q, k, v))
            k = b("transpose", k)
        s = b("bmm", q, k)
        if fine:
            s = b("div", s)
        a = b("softmax", s)
        if fine:
            a = b("dropout", a)
        o = b("bmm", a, v)
        if fine:
            o = b("view", b("transpose", o))
        x = b("add", lin(o), x)
        h = lin(b("layernorm", x))
        h = lin(b("gelu", h))
        if fine:
            h = b("dropout", h)
        x = b("add", h, x)
    b("linear", b("layernorm", x))
    return b.graph(f"transformer-like-{blocks}", VOCAB)


def darts_like(genotype=None, cells: int = 8) -> ArchGraph:
    """A DARTS-space network (narbench.datasets.nas.build_network): stem, `cells` cells, head."""
    from narbench.datasets import nas

    if genotype is None:  # ADD_i <- (input, op) x 2
        genotype = [(0, 3), (1, 4), (0, 1), (1, 5), (2, 3), (1, 6), (3, 0), (4, 2)]
    ops, edges = nas.build_network(genotype, cells)
    return ArchGraph(ops=ops, edges=edges, name="darts-like", family="nas", coarse="nas").validate()


def permuted(graph: ArchGraph, seed: int) -> ArchGraph:
    """The same graph with node ids shuffled and the edge list shuffled."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(graph.num_nodes)  # old id -> new id
    ops = np.empty_like(graph.ops)
    ops[perm] = graph.ops
    edges = perm[graph.edges][:, rng.permutation(graph.num_edges)]
    return ArchGraph(ops=ops, edges=edges, name=graph.name + "-perm", family="", coarse="")


def relabel_by_order(graph: ArchGraph) -> tuple[ArchGraph, np.ndarray]:
    """Renumber nodes by their topological rank: an isomorphic graph with the same order."""
    order = graph.topological_order()
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    ops = graph.ops[order]
    return ArchGraph(ops=ops, edges=rank[graph.edges], name=graph.name + "-rank", family="", coarse=""), rank


def random_network(seed: int) -> ArchGraph:
    """Runs of random blocks (a small library, occasional mutated ops, skip edges), stem and head:
    many near-repeats, for the peeling, merging and recursion paths of the motif splitter."""
    rng = np.random.default_rng(seed)
    library = []
    for _ in range(3):
        size = int(rng.integers(2, 9))
        ops = rng.integers(2, 8, size=size).tolist()
        skips = [(int(rng.integers(0, i)), i) for i in range(2, size) if rng.random() < 0.3]
        library.append((ops, skips))
    b = Builder()
    x = b("stem")
    for _ in range(int(rng.integers(1, 4))):
        x = b(f"op{int(rng.integers(2, 8))}", x)
    for _ in range(int(rng.integers(2, 6))):  # runs of one block
        ops, skips = library[int(rng.integers(0, 3))]
        for _ in range(int(rng.integers(1, 9))):
            start = x
            ids = []
            for i, op in enumerate(ops):
                op = f"op{int(rng.integers(2, 8))}" if rng.random() < 0.04 else f"op{op}"
                parents = [x] + [ids[s] for s, d in skips if d == i]
                x = b(op, *parents)
                ids.append(x)
            if rng.random() < 0.5:
                x = b("add", x, start)
    b("head", x)
    return b.graph(f"random-{seed}", VOCAB)


GRAPHS = {
    "resnet": lambda: resnet_like(16),
    "transformer": lambda: transformer_like(12),
    "darts": lambda: darts_like(cells=8),
}
BLOCKS = {"resnet": 16, "transformer": 12, "darts": 8}

# ------------------------------------------------------------------ shared invariants


def check_partition(graph: ArchGraph, part: Partition) -> None:
    """Coverage, sortedness, macro edges: data-flow direction, no loops/duplicates, shared edges."""
    assert isinstance(part, Partition)
    assert part.num_parts >= 1
    assert np.array_equal(part.covered(), np.arange(graph.num_nodes))
    for p in part.parts:
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)
    me = part.macro_edges
    assert me.dtype == np.int64 and me.shape[0] == 2
    assert np.all(me[0] != me[1]), "self loop"
    pairs = set(map(tuple, me.T.tolist()))
    assert len(pairs) == me.shape[1], "duplicate macro edge"
    assert np.all(me[0] < me[1]), "macro edges follow the topological order of parts"
    members = [set(p.tolist()) for p in part.parts]
    src, dst = graph.edges.tolist()
    for i, j in pairs:  # part j contains an edge u -> v whose producer u is also in part i
        assert any(u in members[i] and u in members[j] and v in members[j] and v not in members[i]
                   for u, v in zip(src, dst)), (i, j)
    # conversely every edge lies inside some part (parts overlap by the edges between them)
    for u, v in zip(src, dst):
        assert any(u in m and v in m for m in members)


def owned_segments(splitter, graph: ArchGraph) -> list[np.ndarray]:
    order, bounds = splitter.segments(graph)
    return [order[a:z] for a, z in zip(bounds[:-1], bounds[1:])]
