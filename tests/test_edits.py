"""Graph edits (`narbench.data.edits`): each changes what it says and leaves a valid graph numbered in execution
order, on small graphs built here."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.data.canonical import canonical_vocabulary
from narbench.data.edits import (EDIT_KINDS, EditSpec, activations, blocks, cut_nodes, drop_block, duplicate_block,
                                 insert_node, insert_nodes, random_edit, remove_nodes, swap_ops)
from tests.conftest import chain_graph, edge_list_graph

VOCAB = list(canonical_vocabulary("2.2"))
OP = {name: i for i, name in enumerate(VOCAB)}


def pairs(g) -> list[tuple[int, int]]:
    return [tuple(e) for e in g.edges.T.tolist()]


def residual(layers: int = 2):
    """conv, then `layers` residual layers (layernorm -> linear -> gelu -> linear, added to the layer's input),
    then a linear head: every layer is a block of five nodes."""
    block = [OP["layernorm"], OP["linear"], OP["gelu"], OP["linear"], OP["add"]]
    g = chain_graph("res", "fam", "attention", block, layers, skip=True)
    g.ops[0], g.ops[-1] = OP["conv"], OP["linear"]
    g.edges = np.array(sorted(pairs(g)), dtype=np.int64).T  # sorted by (producer, consumer), as the corpus is
    return g


def well_formed(g) -> None:
    g.validate(len(VOCAB))
    src, dst = g.edges
    assert (src < dst).all() and pairs(g) == sorted(set(pairs(g)))  # numbered in execution order, unique, sorted


def test_remove_nodes_reconnects_producers_to_consumers():
    g = edge_list_graph([OP["conv"], OP["relu"], OP["relu"], OP["linear"], OP["add"]],
                        [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (0, 4)])
    out = remove_nodes(g, [3])
    well_formed(out)
    assert out.ops.tolist() == [OP["conv"], OP["relu"], OP["relu"], OP["add"]]
    assert pairs(out) == [(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]
    chained = remove_nodes(g, [1, 3])  # through two removed neighbours: 0 -> (1) -> (3) -> 4
    assert chained.num_nodes == 3 and pairs(chained) == [(0, 1), (0, 2), (1, 2)]
    assert g.num_nodes == 5 and g.num_edges == 6  # the input is left alone
    with pytest.raises(ValueError, match="leaves no graph"):
        remove_nodes(g, range(5))
    with pytest.raises(ValueError, match="has nodes 0..4"):
        remove_nodes(g, [7])
    backwards = edge_list_graph([OP["relu"], OP["conv"]], [(1, 0)])
    for edit in (lambda: remove_nodes(backwards, [0]), lambda: insert_node(backwards, 0, OP["gelu"]),
                 lambda: cut_nodes(backwards)):
        with pytest.raises(ValueError, match="not numbered in execution order"):
            edit()


def test_insert_puts_a_node_on_an_edge():
    g = edge_list_graph([OP["conv"], OP["relu"], OP["linear"]], [(0, 1), (0, 2), (1, 2)])
    out = insert_node(g, 2, OP["gelu"])  # on 1 -> 2
    well_formed(out)
    assert out.ops.tolist() == [OP["conv"], OP["relu"], OP["gelu"], OP["linear"]]
    assert pairs(out) == [(0, 1), (0, 3), (1, 2), (2, 3)]
    first = insert_node(g, 0, OP["gelu"])  # on 0 -> 1: the new node is numbered 1, the rest move up
    assert first.ops.tolist() == [OP["conv"], OP["gelu"], OP["relu"], OP["linear"]]
    assert pairs(first) == [(0, 1), (0, 3), (1, 2), (2, 3)]
    many = insert_nodes(g, np.random.default_rng(0), [OP["mish"]], 4)
    well_formed(many)
    assert many.num_nodes == 7 and many.num_edges == 7 and (many.ops == OP["mish"]).sum() == 4
    with pytest.raises(ValueError, match="not an edge 3"):
        insert_node(g, 3, OP["gelu"])


def test_cuts_and_blocks_of_a_residual_graph():
    g = residual(2)  # 0 conv | 1-5 layer | 6-10 layer | 11 head; the skips jump over 1-4 and 6-9
    assert cut_nodes(g).tolist() == [0, 5, 10, 11]
    assert blocks(g, 5).tolist() == [0, 5]
    assert blocks(g, 1).tolist() == [10]
    assert blocks(g, 6).tolist() == [5]  # the second layer and the head
    assert blocks(g, 3).tolist() == []
    with pytest.raises(ValueError, match="not a block"):
        drop_block(g, 1, 3)


def test_duplicating_or_dropping_a_layer_makes_the_deeper_or_shallower_model():
    g, deeper, shallower = residual(2), residual(3), residual(1)
    for start in blocks(g, 5).tolist():
        more = duplicate_block(g, start, 5)
        well_formed(more)
        assert more.content_hash() == deeper.content_hash()
        less = drop_block(g, start, 5)
        well_formed(less)
        assert less.content_hash() == shallower.content_hash()
    head = drop_block(g, 10, 1)  # the head dropped: the last layer's add is the output
    assert head.num_nodes == 11 and pairs(head) == pairs(g)[:-1]
    twice = duplicate_block(g, 10, 1)
    assert twice.ops[-2:].tolist() == [OP["linear"]] * 2 and pairs(twice)[-1] == (11, 12)


def test_swap_changes_only_the_ops_named():
    g = residual(1)
    out = swap_ops(g, [3], [OP["silu"]])
    well_formed(out)
    assert out.ops.tolist() == [*g.ops[:3].tolist(), OP["silu"], *g.ops[4:].tolist()]
    assert pairs(out) == pairs(g)
    with pytest.raises(ValueError, match="distinct nodes"):
        swap_ops(g, [3, 3], [OP["silu"], OP["relu"]])


@pytest.mark.parametrize("kind", EDIT_KINDS)
@pytest.mark.parametrize("size", [1, 2, 5])
def test_random_edits_change_what_they_say(kind, size):
    g = residual(3)
    g.ops[[8, 13]] = OP["relu"]  # three activations in all, of two kinds
    rng = np.random.default_rng(size)
    out = random_edit(g, EditSpec(kind, size), VOCAB, rng)
    if kind in ("drop-block", "duplicate-block") and size == 2 or kind == "swap-activation" and size == 5:
        assert out is None  # no block of two nodes; three activations for five swaps
        return
    well_formed(out)
    assert out.content_hash() != g.content_hash() and out.family == g.family
    grows = {"remove": -size, "insert": size, "drop-block": -size, "duplicate-block": size, "swap-activation": 0}
    assert out.num_nodes == g.num_nodes + grows[kind]
    if kind == "insert":
        assert OP["other"] not in out.ops.tolist() or OP["other"] in g.ops.tolist()
    if kind == "swap-activation":
        changed = np.flatnonzero(out.ops != g.ops)
        assert len(changed) == size
        acts = {OP[a] for a in activations()}
        assert set(g.ops[changed].tolist()) <= acts and set(out.ops[changed].tolist()) <= acts


def test_random_edits_are_seeded_and_refuse_what_a_graph_cannot_take():
    g = residual(2)
    spec = EditSpec("remove", 3)
    a = random_edit(g, spec, VOCAB, np.random.default_rng(7))
    assert a.content_hash() == random_edit(g, spec, VOCAB, np.random.default_rng(7)).content_hash()
    single = edge_list_graph([OP["relu"]], [])
    assert random_edit(single, EditSpec("remove", 1), VOCAB, np.random.default_rng(0)) is None
    assert random_edit(single, EditSpec("insert", 1), VOCAB, np.random.default_rng(0)) is None
    with pytest.raises(ValueError, match="unknown edit"):
        EditSpec("rotate", 1)
    with pytest.raises(ValueError, match="positive number"):
        EditSpec("remove", 0)


def test_the_activations_are_ops_of_the_canonical_vocabulary():
    assert {"relu", "gelu", "silu"} <= set(activations()) <= set(VOCAB)
    assert not {"sigmoid", "tanh"} & set(activations())  # gates are not swapped for activations
