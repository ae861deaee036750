"""Design-keeping rewrites (`narbench.train.augment`): what each rewrite does on small graphs."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.train.augment import OpClasses, Rates, rewrite

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
