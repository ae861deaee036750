"""One design spelled another way: the variants of a graph that two implementations of it differ by.

Outside code that the index misses is most often a corpus design written with a different implementation choice
(a SqueezeNet with a batch norm after every convolution, a network with SiLU where its zoo writes ReLU). These
functions make such variants of a graph, for a discriminant to learn that the directions they move a graph along
are not design (`graf-lda`'s `spellings`): `bn-out` (every batch norm left out), `bn-in` (a batch norm after every
convolution that has none), `act-swap` (every activation one other activation). A variant equal to the graph, or one
that would leave no node, is not made.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from narbench.data.edits import _graph, remove_nodes
from narbench.data.graph import ArchGraph
from narbench.data.roles import ACTIVATIONS

#: the variants `spelling_variants` makes, by name
SPELLINGS = ("bn-out", "bn-in", "act-swap")


def _ids(vocab: Sequence[str], names) -> np.ndarray:
    return np.array([i for i, op in enumerate(vocab) if op in names], dtype=np.int64)


def bn_out(graph: ArchGraph, vocab: Sequence[str]) -> ArchGraph | None:
    """`graph` without its batch norms (their producers feed their consumers), or None when it has none."""
    nodes = np.flatnonzero(graph.ops == vocab.index("batchnorm")) if "batchnorm" in vocab else np.array([], int)
    if not nodes.size or nodes.size >= graph.num_nodes:
        return None
    return remove_nodes(graph, nodes)


def bn_in(graph: ArchGraph, vocab: Sequence[str]) -> ArchGraph | None:
    """`graph` with a batch norm after every convolution whose consumers are not one batch norm (the norm numbered
    right after it, reading it and feeding all its consumers), or None when every convolution has one."""
    if "batchnorm" not in vocab:
        return None
    bn = vocab.index("batchnorm")
    conv = {i for i, op in enumerate(vocab) if op.startswith("conv")}
    src, dst = graph.edges
    consumers: dict[int, list[int]] = {}
    for s, d in zip(src.tolist(), dst.tolist()):
        consumers.setdefault(s, []).append(d)
    targets = [v for v in range(graph.num_nodes) if int(graph.ops[v]) in conv
               and not (len(consumers.get(v, [])) == 1 and int(graph.ops[consumers[v][0]]) == bn)]
    if not targets:
        return None
    is_target = np.zeros(graph.num_nodes, dtype=bool)
    is_target[targets] = True
    new_id = np.arange(graph.num_nodes) + np.concatenate([[0], np.cumsum(is_target)[:-1]])  # after earlier norms
    norm_of = new_id + 1  # a target's norm comes right after it
    ops = np.insert(graph.ops, np.flatnonzero(is_target) + 1, bn)
    out_src = np.where(is_target[src], norm_of[src], new_id[src])
    edges = np.concatenate([np.stack([out_src, new_id[dst]]),
                            np.stack([new_id[targets], norm_of[targets]])], axis=1)
    return _graph(graph, ops, edges, f"bn-in{len(targets)}")


def act_swap(graph: ArchGraph, vocab: Sequence[str]) -> ArchGraph | None:
    """`graph` with every activation made one other (ReLU, or SiLU where ReLU is the most common), or None when it
    has no activation."""
    acts = _ids(vocab, set(ACTIVATIONS))
    nodes = np.flatnonzero(np.isin(graph.ops, acts))
    if not nodes.size or "relu" not in vocab or "silu" not in vocab:
        return None
    values, counts = np.unique(graph.ops[nodes], return_counts=True)
    to = vocab.index("silu") if int(values[np.argmax(counts)]) == vocab.index("relu") else vocab.index("relu")
    ops = graph.ops.copy()
    ops[nodes] = to
    return _graph(graph, ops, graph.edges, "act-swap")


def spelling_variants(graph: ArchGraph, vocab: Sequence[str]) -> list[ArchGraph]:
    """The variants of `graph` (`SPELLINGS`) that differ from it."""
    out, vocab = [], list(vocab)
    for make in (bn_out, bn_in, act_swap):
        v = make(graph, vocab)
        if v is not None and not (np.array_equal(v.ops, graph.ops) and np.array_equal(v.edges, graph.edges)):
            out.append(v)
    return out
