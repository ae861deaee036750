"""Tests for the `motif` splitter (paper section 3.2/3.3), and the compiled splitter against the
pure-Python reference (motif_reference.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from narbench.data.graph import ArchGraph
from narbench.splitters.motif import MotifSplitter, encode_nodes, encode_sequence
from tests.splitters.synthetic import (BLOCKS, BOTTLENECK, GRAPHS, VOCAB, Builder, check_partition, darts_like,
                                       owned_segments, permuted, random_network, relabel_by_order, resnet_like,
                                       transformer_like)

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

# ------------------------------------------------------------------ compiled == reference


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
    from tests.splitters.motif_reference import ReferenceMotifSplitter

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
    from tests.splitters.motif_reference import ReferenceMotifSplitter

    ds = narbench.load_dataset("real")
    rng = np.random.default_rng(12)
    new, ref = MotifSplitter(), ReferenceMotifSplitter()
    for i in rng.choice(len(ds.graphs), size=150, replace=False):
        graph = ds.graphs[i]
        if graph.num_nodes > 20000:
            continue
        assert new.segments(graph)[1].tolist() == ref.segments(graph)[1].tolist(), graph.name
