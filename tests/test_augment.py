"""Design-keeping rewrites (`narbench.train.augment`): what each rewrite does on small graphs."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.train import augment
from narbench.train.augment import OpClasses, Rates, rewrite, rewrite_batch

VOCAB = ["add", "batchnorm", "conv", "gelu", "layernorm", "linear", "relu", "silu", "sigmoid", "other"]
IDX = {op: i for i, op in enumerate(VOCAB)}
CLASSES = OpClasses.of(VOCAB)


def graph(*ops_edges):
    ops, edges = ops_edges
    return np.array([IDX[o] for o in ops]), np.array(edges, dtype=np.int64).reshape(2, -1)


# conv -> batchnorm -> relu -> conv -> add(<- first conv)
OPS = ["conv", "batchnorm", "relu", "conv", "add"]
EDGES = [[0, 1, 2, 3, 0], [1, 2, 3, 4, 4]]


def names(ops):
    return [VOCAB[i] for i in ops]


def edge_set(edges):
    return set(map(tuple, edges.T.tolist()))


def test_no_rewrite_is_the_identity():
    ops, edges = graph(OPS, EDGES)
    got_ops, got_edges = rewrite(ops, edges, CLASSES, Rates(0, 0, 0), np.random.default_rng(0))
    assert names(got_ops) == OPS and edge_set(got_edges) == edge_set(edges)


def test_swap_keeps_each_role_and_the_wiring():
    ops, edges = graph(OPS, EDGES)
    got_ops, got_edges = rewrite(ops, edges, CLASSES, Rates(swap=1, drop=0, insert=0), np.random.default_rng(0))
    got = names(got_ops)
    assert got[1] in {"layernorm"} and got[2] in {"gelu", "silu"}  # another op of the same role
    assert [got[0], got[3], got[4]] == ["conv", "conv", "add"] and edge_set(got_edges) == edge_set(edges)


def test_drop_splices_norm_and_activation_chains():
    ops, edges = graph(OPS, EDGES)
    got_ops, got_edges = rewrite(ops, edges, CLASSES, Rates(swap=0, drop=1, insert=0), np.random.default_rng(0))
    assert names(got_ops) == ["conv", "conv", "add"]
    assert edge_set(got_edges) == {(0, 1), (1, 2), (0, 2)}  # conv -> conv, both into the add


def test_a_gate_or_a_two_input_node_is_never_dropped_or_swapped():
    ops, edges = graph(["linear", "sigmoid", "relu", "add"], [[0, 1, 0, 2], [1, 3, 2, 3]])
    got_ops, _ = rewrite(ops, edges, CLASSES, Rates(swap=1, drop=0, insert=0), np.random.default_rng(1))
    assert names(got_ops)[1] == "sigmoid" and names(got_ops)[3] == "add"


def test_insert_puts_a_node_between_an_anchor_and_its_consumers():
    ops, edges = graph(["linear", "add", "linear"], [[0, 0, 2], [1, 2, 1]])
    got_ops, got_edges = rewrite(ops, edges, CLASSES, Rates(swap=0, drop=0, insert=1), np.random.default_rng(0))
    got = names(got_ops)
    assert len(got) == 5 and got[:3] == ["linear", "add", "linear"]
    assert {got[3], got[4]} <= {"batchnorm", "layernorm", "gelu", "relu", "silu"}
    # linear0 -> new3 -> {add, linear2}; linear2 -> new4 -> add
    assert edge_set(got_edges) == {(0, 3), (3, 1), (3, 2), (2, 4), (4, 1)}


def test_rewrites_are_seeded_and_keep_edges_valid():
    rng_graph = np.random.default_rng(5)
    ops = rng_graph.integers(len(VOCAB), size=60)
    src = rng_graph.integers(0, 59, size=120)
    dst = src + 1 + rng_graph.integers(0, 5, size=120)
    dst = np.minimum(dst, 59)
    edges = np.unique(np.stack([src, dst]), axis=1)
    a = rewrite(ops, edges, CLASSES, Rates(), np.random.default_rng(3))
    b = rewrite(ops, edges, CLASSES, Rates(), np.random.default_rng(3))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    n = a[0].shape[0]
    assert a[1].size and a[1].min() >= 0 and a[1].max() < n and (a[1][0] != a[1][1]).all()
    assert not np.array_equal(a[0], ops) or a[1].shape != edges.shape  # something changed


def test_rates_are_checked():
    with pytest.raises(ValueError, match="rewrite rate drop must be in"):
        Rates(drop=1.5)


# ----------------------------------------------------------------------------- batched rewrites
def _per_graph_rewrite(ops: np.ndarray, edges: np.ndarray, classes: OpClasses, rates: Rates,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`rewrite` as it was written before `rewrite_batch` (one graph, a Python loop per swapped and per dropped
    node): the reference the batched rewrite must equal draw for draw."""
    ops = np.asarray(ops, dtype=np.int64).copy()
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    n = ops.shape[0]
    role = classes.role[ops]
    # swap
    for kind, pool in ((augment.ACTIVATION, classes.activations), (augment.NORM, classes.norms)):
        if pool.size > 1:
            nodes = np.nonzero((role == kind) & (rng.random(n) < rates.swap))[0]
            for v in nodes:
                others = pool[pool != ops[v]]
                ops[v] = others[rng.integers(others.size)]
    # drop: splice out activations / normalisations with exactly one producer
    src, dst = edges
    indeg = np.bincount(dst, minlength=n)
    drop = (role != augment.NONE) & (indeg == 1) & (rng.random(n) < rates.drop)
    if drop.any():
        producer = np.arange(n)
        producer[dst[drop[dst]]] = src[drop[dst]]
        for v in np.nonzero(drop)[0]:  # a chain of dropped nodes resolves to its first kept producer
            u = producer[v]
            while drop[u] and producer[u] != u:
                u = producer[u]
            producer[v] = u
        keep_edge = ~drop[dst]
        src, dst = producer[src[keep_edge]], dst[keep_edge]
        kept = np.nonzero(~drop)[0]
        new_id = np.full(n, -1, dtype=np.int64)
        new_id[kept] = np.arange(kept.size)
        ops, src, dst, n = ops[kept], new_id[src], new_id[dst], kept.size
    # insert after anchors
    pool = np.concatenate([classes.activations, classes.norms])
    if pool.size:
        anchors = np.nonzero(classes.anchor[ops] & (rng.random(n) < rates.insert))[0]
        if anchors.size:
            new = n + np.arange(anchors.size)
            slot = np.full(n, -1, dtype=np.int64)
            slot[anchors] = new
            moved = slot[src] >= 0  # an anchor's out-edges leave from its new node
            src = np.where(moved, slot[src], src)
            src = np.concatenate([src, anchors])
            dst = np.concatenate([dst, new])
            ops = np.concatenate([ops, pool[rng.integers(pool.size, size=anchors.size)]])
            n += anchors.size
    key = np.unique(src * n + dst) if src.size else np.zeros(0, dtype=np.int64)
    return ops, np.stack([key // n, key % n]) if n else np.zeros((2, 0), dtype=np.int64)


def _random_dag(rng, n):
    src = rng.integers(0, max(n - 1, 1), size=2 * n)
    dst = np.minimum(src + 1 + rng.integers(0, 4, size=2 * n), n - 1)
    keep = src < dst
    return rng.integers(len(VOCAB), size=n), np.unique(np.stack([src[keep], dst[keep]]), axis=1)


@pytest.mark.parametrize("rates", [Rates(), Rates(0.5, 0.5, 0.5), Rates(1, 1, 1), Rates(0, 0, 0)])
def test_a_batch_rewritten_at_once_equals_each_graph_rewritten_in_turn(rates):
    """`rewrite_batch` gives what `rewrite` of each graph in turn with one generator, batched by PyG, gave: the same
    draws in the same order, so `invariant`'s runs keep their numbers bit for bit (its configuration hash stays)."""
    make = np.random.default_rng(11)
    graphs = [_random_dag(make, int(n)) for n in make.integers(1, 40, size=25)]
    graphs.append((np.array([IDX["conv"], IDX["batchnorm"], IDX["relu"], IDX["relu"], IDX["add"]]),
                   np.array([[0, 1, 2, 3, 0], [1, 2, 3, 4, 4]])))  # a chain of droppable nodes
    ref_rng, rng = np.random.default_rng(7), np.random.default_rng(7)
    want_ops, want_edges, want_ptr, offset = [], [], [0], 0
    for ops, edges in graphs:
        o, e = _per_graph_rewrite(ops, edges, CLASSES, rates, ref_rng)
        want_ops.append(o)
        want_edges.append(e + offset)
        offset += o.shape[0]
        want_ptr.append(offset)
    sizes = [ops.shape[0] for ops, _ in graphs]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ops = np.concatenate([o for o, _ in graphs])
    edges = np.concatenate([e + s for (_, e), s in zip(graphs, starts)], axis=1)
    got_ops, got_edges, got_ptr = rewrite_batch(ops, edges, np.concatenate([[0], np.cumsum(sizes)]), CLASSES, rates, rng)
    assert np.array_equal(got_ops, np.concatenate(want_ops))
    assert np.array_equal(got_edges, np.concatenate(want_edges, axis=1))
    assert np.array_equal(got_ptr, want_ptr)
    assert rng.random() == ref_rng.random()  # the generator is left where the per-graph loop left it


def test_rewrite_is_the_batch_of_one():
    ops, edges = graph(OPS, EDGES)
    a = rewrite(ops, edges, CLASSES, Rates(0.5, 0.5, 0.5), np.random.default_rng(4))
    b = _per_graph_rewrite(ops, edges, CLASSES, Rates(0.5, 0.5, 0.5), np.random.default_rng(4))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
