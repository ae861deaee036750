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
    ops = np.asarray(ops, dtype=np.int64).copy()
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    n = ops.shape[0]
    role = classes.role[ops]
    # swap
    for kind, pool in ((ACTIVATION, classes.activations), (NORM, classes.norms)):
        if pool.size > 1:
            nodes = np.nonzero((role == kind) & (rng.random(n) < rates.swap))[0]
            for v in nodes:
                others = pool[pool != ops[v]]
                ops[v] = others[rng.integers(others.size)]
    # drop: splice out activations / normalisations with exactly one producer
    src, dst = edges
    indeg = np.bincount(dst, minlength=n)
    drop = (role != NONE) & (indeg == 1) & (rng.random(n) < rates.drop)
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
