"""Rewrites of a canonical graph that keep its design: what implementations of one family vary.

The canonical rules (`narbench.data.canonical`) make one graph of one computation written several
ways. What they cannot make one are choices that implementations of one design make differently
and that graphs do record: which activation (`act_layer=` variants of one zoo model are one
family in `real`), which normalisation (BatchNorm in one package, GroupNorm or LayerNorm in
another), a normalisation folded into the layer before it or an activation left out, one added
after a projection. An encoder trained to be invariant (`narbench.baselines.invariant`) sees each
training graph beside such a rewrite of it as a positive.

A rewrite keeps the skeleton: the parametrised and structural ops (linear, conv, attention,
pooling, add, concat, ...) and their wiring. Per eligible node, independently:

* `swap`: an activation becomes another activation, a normalisation another normalisation;
* `drop`: an activation or normalisation with one input is spliced out (its input feeds its
  consumers);
* `insert`: after a `linear` or `conv`, a new activation or normalisation between it and its
  consumers.

Ops are named by the dataset's vocabulary (`OpClasses.of(vocab)`); a vocabulary without these
names gives rewrites that change nothing. Inserted nodes are appended (ids after the others):
message passing reads edges, not ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from narbench.data.roles import ACTIVATIONS, NORMS  # the ops of a role (`narbench.data.roles`)

#: Ops after which an activation or a normalisation may be inserted.
ANCHORS = ("linear", "conv")

NONE, ACTIVATION, NORM = 0, 1, 2


@dataclass(frozen=True)
class Rates:
    """Per eligible node: probability of each rewrite (GraphCL's order of magnitude)."""

    swap: float = 0.2
    drop: float = 0.1
    insert: float = 0.05

    def __post_init__(self) -> None:
        for name in ("swap", "drop", "insert"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"rewrite rate {name} must be in [0, 1], got {value}")


@dataclass(frozen=True)
class OpClasses:
    """Op ids by role, for one vocabulary."""

    role: np.ndarray  # op id -> NONE, ACTIVATION or NORM
    anchor: np.ndarray  # op id -> bool
    activations: np.ndarray
    norms: np.ndarray

    @classmethod
    def of(cls, vocab: Sequence[str]) -> "OpClasses":
        index = {op: i for i, op in enumerate(vocab)}
        role = np.zeros(len(vocab), dtype=np.int64)
        acts = np.array([index[o] for o in ACTIVATIONS if o in index], dtype=np.int64)
        norms = np.array([index[o] for o in NORMS if o in index], dtype=np.int64)
        role[acts] = ACTIVATION
        role[norms] = NORM
        anchor = np.zeros(len(vocab), dtype=bool)
        anchor[[index[o] for o in ANCHORS if o in index]] = True
        return cls(role, anchor, acts, norms)


def rewrite(ops: np.ndarray, edges: np.ndarray, classes: OpClasses, rates: Rates,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A rewrite of the graph (`ops`: op id per node, `edges`: 2 x E producer -> consumer);
    returns new (ops, edges) with unique edges. The input arrays are not modified."""
    ops = np.asarray(ops, dtype=np.int64)
    new_ops, new_edges, _ = rewrite_batch(ops, edges, np.array([0, ops.shape[0]]), classes, rates, rng)
    return new_ops, new_edges


def rewrite_batch(ops: np.ndarray, edges: np.ndarray, ptr: np.ndarray, classes: OpClasses, rates: Rates,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rewrite of each graph of a batch: graph g holds nodes `ptr[g]:ptr[g + 1]` of `ops` (a PyG batch's `x` and
    `ptr`) and the edges between them (2 x E, global ids). Returns the rewrites batched the same way (ops, edges,
    ptr): the arrays that `rewrite` of each graph in turn, with `rng`, batched by PyG, gives (the same draws from the
    generator, in the same order), made in one pass of array work instead of one per graph (issue 60: the
    `invariant` encoder rewrote each graph of a paper batch in Python, on the host, every step)."""
    ops = np.asarray(ops, dtype=np.int64).copy()
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    ptr = np.asarray(ptr, dtype=np.int64)
    n, sizes = ops.shape[0], np.diff(ptr)
    role = classes.role[ops]
    indeg = np.bincount(dst, minlength=n)
    droppable = (role != NONE) & (indeg == 1)
    anchor = classes.anchor[ops]  # swaps change activations and norms only, so anchors are fixed
    pool = np.concatenate([classes.activations, classes.norms])
    swap_pools = [(kind, p) for kind, p in ((ACTIVATION, classes.activations), (NORM, classes.norms)) if p.size > 1]
    # the draws, graph by graph in `rewrite`'s order (the generator's stream is sequential): cheap calls only
    swapped = {kind: ([], []) for kind, _ in swap_pools}
    drop = np.zeros(n, dtype=bool)
    inserted_at, inserted_op = [], []
    for g in range(sizes.size):
        a, b = int(ptr[g]), int(ptr[g + 1])
        for kind, p in swap_pools:
            nodes = a + np.nonzero((role[a:b] == kind) & (rng.random(b - a) < rates.swap))[0]
            if nodes.size:
                swapped[kind][0].append(nodes)
                swapped[kind][1].append(rng.integers(p.size - 1, size=nodes.size))
        drop[a:b] = droppable[a:b] & (rng.random(b - a) < rates.drop)
        if pool.size:
            kept = a + np.nonzero(~drop[a:b])[0]
            chosen = kept[anchor[kept] & (rng.random(kept.size) < rates.insert)]
            if chosen.size:
                inserted_at.append(chosen)
                inserted_op.append(pool[rng.integers(pool.size, size=chosen.size)])
    # swap: another op of the same role, uniform over the others
    for kind, p in swap_pools:
        if swapped[kind][0]:
            nodes, pick = np.concatenate(swapped[kind][0]), np.concatenate(swapped[kind][1])
            place = np.zeros(classes.role.size, dtype=np.int64)
            place[p] = np.arange(p.size)  # an op's place in `p`
            ops[nodes] = p[pick + (pick >= place[ops[nodes]])]
    # drop: a dropped node's consumers read its first kept producer
    producer = np.arange(n)
    into = drop[dst]
    producer[dst[into]] = src[into]
    while True:  # resolve chains of dropped nodes (pointer jumping)
        up = drop[producer] & drop
        if not up.any():
            break
        producer[up] = producer[producer[up]]
    src, dst = producer[src[~into]], dst[~into]
    # new ids: each graph's kept nodes in order, then its inserted nodes in the order of their anchors
    owner = np.repeat(np.arange(sizes.size), sizes)
    at = np.concatenate(inserted_at) if inserted_at else np.zeros(0, dtype=np.int64)
    kept_count = np.bincount(owner[~drop], minlength=sizes.size)
    ins_count = np.bincount(owner[at], minlength=sizes.size)
    new_ptr = np.concatenate([[0], np.cumsum(kept_count + ins_count)])
    new_id = np.full(n, -1, dtype=np.int64)
    kept_nodes = np.nonzero(~drop)[0]
    new_id[kept_nodes] = new_ptr[owner[kept_nodes]] + _rank_in_group(kept_count)
    ins_id = new_ptr[owner[at]] + kept_count[owner[at]] + _rank_in_group(ins_count)
    # insert: an anchor's out-edges leave from its new node, which the anchor feeds
    src, dst = new_id[src], new_id[dst]
    if at.size:
        moved_from = np.full(new_ptr[-1], -1, dtype=np.int64)
        moved_from[new_id[at]] = ins_id
        moved = moved_from[src] >= 0
        src = np.where(moved, moved_from[src], src)
    src = np.concatenate([src, new_id[at]])
    dst = np.concatenate([dst, ins_id])
    total = int(new_ptr[-1])
    new_ops = np.empty(total, dtype=np.int64)
    new_ops[new_id[kept_nodes]] = ops[kept_nodes]
    if at.size:
        new_ops[ins_id] = np.concatenate(inserted_op)
    key = np.sort(src * total + dst)  # unique, in order (np.unique hashes first: twice the time on a paper batch)
    key = key[np.concatenate([[True], key[1:] != key[:-1]])] if key.size else key
    out = np.stack([key // total, key % total]) if total else np.zeros((2, 0), dtype=np.int64)
    return new_ops, out, new_ptr


def _rank_in_group(counts: np.ndarray) -> np.ndarray:
    """0, 1, ... within each of consecutive groups of `counts[g]` items: [2, 0, 3] -> [0, 1, 0, 1, 2]."""
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
