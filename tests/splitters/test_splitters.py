"""Tests for the segment splitters: `motif` (paper section 3.2/3.3) and the uniform baselines (4.4)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from narbench.graph import ArchGraph
from narbench.splitter import Partition
from narbench.splitters._segments import part_keys, segments_to_partition
from narbench.splitters.motif import MotifSplitter, encode_nodes, encode_sequence
from narbench.splitters.uniform import MotifNumberSplitter, NodeNumberSplitter, RandomSplitter

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


# ------------------------------------------------------------------ motif splitter


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_motif_finds_repeated_block(kind):
    graph = GRAPHS[kind]()
    blocks = BLOCKS[kind]
    sp = MotifSplitter()
    part, keys = sp.split_with_keys(graph)
    check_partition(graph, part)
    assert blocks <= part.num_parts <= blocks + 3, part.num_parts
    assert len(keys) == part.num_parts and all(isinstance(k, bytes) for k in keys)
    # the repeated block is a motif: one owned segment per block with the same op sequence
    segs = owned_segments(sp, graph)
    sig = Counter(tuple(graph.ops[s].tolist()) for s in segs)
    top, count = sig.most_common(1)[0]
    assert count == blocks, sig
    # all copies but the first have the same part (the first one's input comes from the stem)
    assert Counter(keys).most_common(1)[0][1] >= blocks - 2


def test_motif_resnet_block_boundaries():
    graph = resnet_like(16)
    inv = {v: k for k, v in VOCAB.items()}
    segs = owned_segments(MotifSplitter(), graph)
    names = [[inv[o] for o in graph.ops[s].tolist()] for s in segs]
    assert names[0] == ["input", "conv", "bn", "relu", "maxpool"]
    assert names[1:17] == [BOTTLENECK] * 16  # blocks start at conv, end after the final relu
    assert names[17] == ["avgpool", "linear"]
    part = MotifSplitter().split(graph)
    assert part.macro_edges.T.tolist() == [[i, i + 1] for i in range(17)]


def test_motif_transformer_block_boundaries():
    graph = transformer_like(12)
    inv = {v: k for k, v in VOCAB.items()}
    segs = owned_segments(MotifSplitter(), graph)
    firsts = [inv[int(graph.ops[s[0]])] for s in segs[1:13]]
    lasts = [inv[int(graph.ops[s[-1]])] for s in segs[1:13]]
    assert firsts == ["layernorm"] * 12 and lasts == ["add"] * 12
    assert all(len(s) == 14 for s in segs[1:13])


def test_motif_darts_cells_and_nas_generate():
    from narbench.datasets import nas

    graph = darts_like(cells=8)
    segs = owned_segments(MotifSplitter(), graph)
    assert [len(s) for s in segs] == [1] + [nas.NODES_PER_CELL] * 8 + [2]
    graphs, _, _ = nas.generate(seed=0, n_classes=2, per_class=10)
    for g in graphs:
        part = MotifSplitter().split(g)
        check_partition(g, part)
        assert part.num_parts == g.meta["cells"] + 2, (g.name, part.num_parts)


def test_motif_random_darts_cells():
    """Random DARTS genotypes, 4-8 cells: exactly stem | one part per cell | head."""
    from narbench.datasets import nas

    rng = np.random.default_rng(7)
    sp = MotifSplitter()
    for i in range(60):
        genotype = []
        for a in range(4):  # ADD_a: 2 distinct inputs among c_{k-2}, c_{k-1}, ADD_0..ADD_{a-1}
            genotype += [(int(x), int(rng.integers(7))) for x in rng.choice(a + 2, 2, replace=False)]
        cells = 4 + i % 5
        g = darts_like(genotype, cells=cells)
        sizes = [len(s) for s in owned_segments(sp, g)]
        assert sizes == [1] + [nas.NODES_PER_CELL] * cells + [2], (i, sizes)


def test_motif_with_variant_blocks():
    """Projection blocks (extra conv+bn on the skip) are parts of their own, not merged."""
    graph = resnet_like(16, projection_every=4)
    part = MotifSplitter().split(graph)
    check_partition(graph, part)
    assert 16 <= part.num_parts <= 19
    sizes = Counter(len(s) for s in owned_segments(MotifSplitter(), graph))
    assert sizes[10] == 12 and sizes[12] == 4, sizes


def test_motif_two_kinds_of_blocks():
    """A CNN backbone feeding a transformer: both repeated blocks are found (recursion)."""
    b = Builder()
    x = b("input")
    for _ in range(6):
        x = b("relu", b("add", b("bn", b("conv", b("relu", b("bn", b("conv", x))))), x))
    for _ in range(6):
        h = b("layernorm", x)
        a = b("bmm", b("softmax", b("bmm", b("matmul", h), b("matmul", h))), b("matmul", h))
        x = b("add", b("matmul", a), x)
        x = b("add", b("matmul", b("gelu", b("matmul", b("layernorm", x)))), x)
    b("linear", x)
    graph = b.graph("hybrid", VOCAB)
    part = MotifSplitter().split(graph)
    check_partition(graph, part)
    assert 12 <= part.num_parts <= 15, part.num_parts


def test_motif_deterministic_and_isomorphism_invariant():
    sp = MotifSplitter()
    for make in GRAPHS.values():
        graph = make()
        p1, k1 = sp.split_with_keys(graph)
        p2, k2 = sp.split_with_keys(graph)
        assert k1 == k2 and all(np.array_equal(a, b) for a, b in zip(p1.parts, p2.parts))
        shuffled = permuted(graph, seed=1)
        canon, rank = relabel_by_order(shuffled)  # same topological order, other numbering
        ps, ks = sp.split_with_keys(shuffled)
        pc, kc = sp.split_with_keys(canon)
        assert ks == kc  # the same motifs
        assert np.array_equal(rank[shuffled.topological_order()], canon.topological_order())
        assert [np.sort(rank[p]).tolist() for p in ps.parts] == [p.tolist() for p in pc.parts]
        assert np.array_equal(ps.macro_edges, pc.macro_edges)
        # labels do not depend on the numbering at all
        lab = encode_nodes(shuffled)
        assert np.array_equal(lab[shuffled.topological_order()], encode_nodes(canon)[canon.topological_order()])
        assert np.array_equal(encode_sequence(shuffled), encode_sequence(canon))


def test_motif_keys_mean_identical_subgraphs():
    graph = transformer_like(6)
    part, keys = MotifSplitter().split_with_keys(graph)
    order = graph.topological_order()
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    seen: dict[bytes, tuple] = {}
    for p, k in zip(part.parts, keys):
        nodes = p[np.argsort(rank[p])]
        local = {int(v): i for i, v in enumerate(nodes)}
        edges = sorted((local[u], local[v]) for u, v in graph.edges.T.tolist() if u in local and v in local)
        sub = (tuple(graph.ops[nodes].tolist()), tuple(edges))
        assert seen.setdefault(k, sub) == sub
    assert len(seen) < part.num_parts  # the cache has something to share


def test_motif_small_and_unrepeated_graphs():
    for n in (1, 2, 5):
        b = Builder()
        x = b("input")
        for i in range(n - 1):
            x = b(f"op{i}", x)
        g = b.graph(f"chain{n}", VOCAB)
        part = MotifSplitter().split(g)
        check_partition(g, part)
        assert part.num_parts == 1
    iso = ArchGraph(ops=[0, 1, 2], edges=np.zeros((2, 0)), name="iso", family="", coarse="")
    check_partition(iso, MotifSplitter().split(iso))


def test_motif_config():
    assert MotifSplitter().params() == {"steps": 2, "children": False, "depth": 2, "max_phases": 8}
    with pytest.raises(ValueError):
        MotifSplitter(steps=-1)
    for steps in (1, 3):  # other settings still give a valid partition
        g = resnet_like(8)
        check_partition(g, MotifSplitter(steps=steps).split(g))
        check_partition(g, MotifSplitter(steps=steps, children=True).split(g))


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
    from narbench import registry

    for name, cls in [("motif", MotifSplitter), ("node-number", NodeNumberSplitter),
                      ("motif-number", MotifNumberSplitter), ("random", RandomSplitter)]:
        assert registry.load("splitter", name) is cls
        assert cls.name == name


# ------------------------------------------------------------------ compiled == reference


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


def _reference_cases():
    from narbench.datasets.nas import generate

    graphs = [resnet_like(16), resnet_like(48, projection_every=4), transformer_like(12),
              transformer_like(20, fine=True), darts_like(cells=8), darts_like(cells=4)]
    graphs += [random_network(seed) for seed in range(40)]
    graphs += [permuted(g, 1) for g in graphs[:6]]
    graphs += generate(seed=0, n_classes=10, per_class=4)[0]
    return graphs


@pytest.mark.parametrize("params", [{}, {"steps": 1}, {"steps": 3, "children": True}, {"depth": 0},
                                    {"max_phases": 1}, {"steps": 0}])
def test_compiled_motif_splitter_equals_the_python_reference(params):
    from tests.motif_reference import ReferenceMotifSplitter

    new, ref = MotifSplitter(**params), ReferenceMotifSplitter(**params)
    for graph in _reference_cases():
        order_new, bounds_new = new.segments(graph)
        order_ref, bounds_ref = ref.segments(graph)
        assert np.array_equal(order_new, order_ref), graph.name
        assert bounds_new.tolist() == bounds_ref.tolist(), graph.name
        p_new, p_ref = new.split(graph), ref.split(graph)
        assert p_new.num_parts == p_ref.num_parts
        assert all(np.array_equal(a, b) for a, b in zip(p_new.parts, p_ref.parts))
        assert np.array_equal(p_new.macro_edges, p_ref.macro_edges)


@pytest.mark.slow
def test_compiled_motif_splitter_equals_the_python_reference_on_real_graphs():
    import narbench
    from tests.motif_reference import ReferenceMotifSplitter

    ds = narbench.load_dataset("real")
    rng = np.random.default_rng(12)
    new, ref = MotifSplitter(), ReferenceMotifSplitter()
    for i in rng.choice(len(ds.graphs), size=150, replace=False):
        graph = ds.graphs[i]
        if graph.num_nodes > 20000:
            continue
        assert new.segments(graph)[1].tolist() == ref.segments(graph)[1].tolist(), graph.name


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
