"""`motif`: the paper's motif sampling (section 3.2, eq. 2) and macro graph (section 3.3).

**Node encoding (eq. 2).** Step 0 labels every node with its op type. At step ``k`` a node's
new label is an id for the pattern (its step ``k-1`` label, the multiset of its parents'
step ``k-1`` labels[, the multiset of its children's]), so after ``s`` steps a label encodes
the node's order-``s`` upstream neighbourhood. Ids are 64-bit hashes of the pattern built
from a fixed integer mixer (splitmix64) with a commutative sum over the multiset: they are
deterministic, do not depend on node numbering, Python's hash seed or the other graphs, and
are comparable across graphs. Listing the nodes in the fixed topological order
(`ArchGraph.topological_order`) gives the encoded sequence ``C^s``.

**Motif discovery (repeated subsequences of C^s).** Near-linear anchor segmentation:

1. *Anchor.* For every label occurring at least twice, cutting ``C^s`` before each of its
   occurrences gives the stretches between consecutive occurrences (plus, when it starts /
   ends with a copy, the stretch before the first / from the last occurrence). Stretches are
   grouped by content (length + polynomial prefix hash, O(1) each) and a label is scored by
   the description length it saves, ``sum over groups with m >= 2 copies of (m-1)*len - m``
   (one stored copy instead of ``m``, one reference per copy). This prefers the label that
   occurs once per repeated block: twice per block saves the same symbols but pays twice the
   references; once per two blocks saves less. All labels together have ``n`` occurrences,
   so scoring all of them is one sort, O(n log n). The best label's largest-saving group is
   the motif ``D`` (length ``L``).
2. *Phase.* The anchor fixes the period, not where a block begins. All cuts are shifted by
   one offset in ``-(L-1)..0`` that minimises the mean *cut width* at ``D``'s copies: the
   number of tensors alive across the cut (nodes before it with a consumer after it). Blocks
   start where the fewest tensors are alive (after a residual add: 1; between DARTS cells: 2).
   Anchor occurrences whose cut is wider than ``D``'s widest are dropped (they sit inside a
   variant block, e.g. a projection conv that looks like a first conv). Ties are broken by
   the number of nodes in repeated segments after steps 3-4, then by the offset nearest 0.
3. *Peeling.* A repeated class is a subgraph (op sequence + internal edges, ignoring the
   context that the labels carry) that at least two segments have. A segment longer than a
   class with more copies than its own gets copies of that class split off its front and
   back while they match: the first block after the stem (same subgraph, other labels), a
   block that lost its anchor next to a variant block, the stem before a first variant.
4. *Merging.* Adjacent classes X != Y that nearly always come as XY are one unit (an anchor
   occurring twice per block gives half blocks A B A B; context at the ends can make that
   finer split save slightly more than the whole block).
5. *Recursion.* A non-repeated stretch with room for two blocks (``>= 2L`` nodes) is
   segmented again by steps 1-4 (up to `depth` levels): a second kind of repeated block,
   e.g. the transformer blocks after a CNN backbone.
6. *Step choice.* Steps 1-5 run with the anchors taken from each encoding step ``s, s-1,
   ..., 0`` and the segmentation saving the most with segments compared as subgraphs (the
   score of step 1 with subgraph keys instead of label content) wins; ties keep the larger
   step. This matters for networks with few copies, where context leaves no label repeat
   of a whole block at step ``s`` (a 4-cell DARTS network: cells 0 and 1 read the stem).

Every position is in exactly one segment, so every node is covered; what no repeat explains
(stem, head, variant blocks) stays a part of its own. Parts and the macro graph are built
from the segments by `narbench.splitters._segments.segments_to_partition` (parts overlap by
the edges entering them; macro edges follow the data flow), and
`MotifSplitter.split_with_keys` adds an exact signature per part for embedding caches.
Without any repeat (best saving <= 0) the graph is one part.

**Implementation.** Eq. 2 and steps 1-6 run compiled (numba, `_motif_windows`, `_motif_phases`,
`_motif_segments`, `_motif_sequence`, cached on disk after the first compilation): O((n + E) log n) per phase tried
(at most `max_phases`) and step, with no per-segment Python. Segments are compared through exact
integer class ids of their keys (`_motif_windows`); the result is the same, cut for cut, as the
original pure-Python implementation, which tests/splitters/motif_reference.py keeps as the
reference.

The sequence, hence the motifs, depends on `ArchGraph.topological_order`, which breaks ties by
node id: graphs should be numbered in execution order (as tracers and the NAS generator do).
With arbitrary numbering the order inside each block can differ from block to block and
fewer repeats are found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.train.splitter import SplitterConfig

from narbench.core.jit import setup_numba_cache

setup_numba_cache()
from . import _motif_phases, _motif_segments, _motif_sequence, _motif_windows  # noqa: E402
from ._segments import SegmentSplitter, checked_order

__all__ = ["MotifSplitter", "encode_nodes", "encode_sequence"]

_U64 = np.uint64
_M1, _M2 = _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB)
_SALT_OP, _SALT_PAR, _SALT_CHILD = _U64(0x9E3779B97F4A7C15), _U64(0xD6E8FEB86659FD93), _U64(0xA0761D6478BD642F)
_SALT_AGG, _SALT_CAGG, _K_SELF = _U64(0xE7037ED1A0B428DB), _U64(0x8EBC6AF09C88C6E3), _U64(0x589965CC75374CC3)
_BASE = 0x1D8E4E27C47D124F  # odd: invertible mod 2^64
_BASE_INV = pow(_BASE, -1, 1 << 64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wrapping arithmetic, no Python hash involved)."""
    x = np.array(x, dtype=_U64, copy=True)
    x ^= x >> _U64(30)
    x *= _M1
    x ^= x >> _U64(27)
    x *= _M2
    x ^= x >> _U64(31)
    return x


def encode_nodes(graph: ArchGraph, steps: int = 2, children: bool = False) -> np.ndarray:
    """Eq. 2: the step-`steps` neighbour-pattern label (uint64) of every node, by node id."""
    return encode_levels(graph, steps, children)[-1]


def encode_levels(graph: ArchGraph, steps: int = 2, children: bool = False) -> list[np.ndarray]:
    """The labels of every step 0..`steps` of eq. 2 (uint64 per node, by node id)."""
    n = graph.num_nodes
    src, dst = graph.edges
    h = _mix(graph.ops.astype(_U64) ^ _SALT_OP)
    levels = [h]
    for _ in range(int(steps)):
        par = np.zeros(n, dtype=_U64)
        np.add.at(par, dst, _mix(h ^ _SALT_PAR)[src])  # multiset of parents: commutative sum
        new = _mix(h * _K_SELF + _mix(par + _SALT_AGG))
        if children:
            chi = np.zeros(n, dtype=_U64)
            np.add.at(chi, src, _mix(h ^ _SALT_CHILD)[dst])
            new = _mix(new ^ _mix(chi + _SALT_CAGG))
        h = new
        levels.append(h)
    return levels


def encode_sequence(
    graph: ArchGraph, steps: int = 2, children: bool = False, order: np.ndarray | None = None
) -> np.ndarray:
    """``C^s``: dense label ids (ranked by hash value) of the nodes in topological order."""
    if order is None:
        order = checked_order(graph)
    _, dense = np.unique(encode_nodes(graph, steps, children)[order], return_inverse=True)
    return dense.reshape(-1).astype(np.int64)


_CONSTS = np.array([_SALT_OP, _SALT_PAR, _SALT_CHILD, _SALT_AGG, _SALT_CAGG, _K_SELF, _BASE, _BASE_INV], dtype=_U64)
_KERNELS = (_motif_windows, _motif_phases, _motif_segments, _motif_sequence)  # the compiled code: part of `code_version`


class MotifSplitter(SegmentSplitter):
    """Motif sampling (eq. 2) + repeated-subsequence segmentation; see the module docstring.

    Defaults. ``steps=2``: labels see two hops upstream, enough to tell a block's first conv
    from its inner convs and the two residual adds of a transformer block apart, while a
    difference (the stem feeding the first block, a projection block) changes the labels of
    only the nodes within two hops downstream of it. On the synthetic ResNet, ResNet with
    projection blocks, transformer (coarse and autograd-style) and DARTS graphs of the tests,
    steps 2 and 3 (with or without children) give exactly one part per block; with steps 1
    the transformer needs merging (step 4) and projection blocks lose their extra conv+bn.
    ``children=False``: a parent-only label depends on upstream context alone, so every copy
    of a stacked block keeps identical labels up to the last one (the head never leaks into
    it) and the sequence reads like the forward pass; with children, the last copy is also
    perturbed by the head, so motif ends blur on both sides. The paper's toy example
    (Figure 2) also takes parents as neighbours.
    """

    name = "motif"
    max_classes = 8  # repeated classes tried per peeling round (step 3)

    @dataclass(frozen=True)
    class Config(SplitterConfig):
        steps: int = 2  # s in eq. 2: labels encode the order-s upstream neighbourhood
        children: bool = False  # also encode children's labels (see the class docstring)
        depth: int = 2  # recursion levels for a second kind of motif in non-repeated stretches
        max_phases: int = 8  # tied phase offsets evaluated (step 2)

        def __post_init__(self) -> None:
            for name in ("steps", "depth"):
                v = getattr(self, name)
                if int(v) != v or v < 0:
                    raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
            if int(self.max_phases) != self.max_phases or self.max_phases < 1:
                raise ValueError(f"max_phases must be a positive integer, got {self.max_phases!r}")

    @classmethod
    def code_version(cls) -> str:
        """The base class's digest plus the source of every compiled kernel module (`_KERNELS`)."""
        import hashlib
        import inspect

        kernels = "".join(inspect.getsource(module) for module in _KERNELS)
        return hashlib.sha256((super().code_version() + kernels).encode()).hexdigest()

    def encode(self, graph: ArchGraph, order: np.ndarray | None = None) -> np.ndarray:
        """``C^s`` of `graph`: dense labels of its nodes in topological order."""
        return encode_sequence(graph, self.config.steps, self.config.children, order)

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        n = graph.num_nodes
        if n <= 1:
            return np.array([0, n], dtype=np.int64)
        src, dst = graph.edges
        # the label sequences of steps 0..s (eq. 2), prefix hashes, cut widths, edges by position;
        # segments are compared as subgraphs: op sequence + internal edges relative to the start
        dense, S, Bpow, cost, es, ed, ops = _motif_sequence.seq_arrays(
            np.ascontiguousarray(graph.ops, dtype=np.int64), np.ascontiguousarray(src), np.ascontiguousarray(dst),
            np.ascontiguousarray(order, dtype=np.int64), int(self.config.steps), bool(self.config.children), _CONSTS)
        # Context (the stem feeding the first block, the cells feeding the next ones) changes
        # the labels of the first copies of a block; with few copies the repeats at step s can
        # be sub-blocks. Every step s..0 is tried and the segmentation whose segments repeat
        # best as subgraphs (context-free) wins; ties keep the larger step. Steps 1-6 run
        # compiled (`_motif_segments`).
        return _motif_segments.segment_bounds(dense, S, Bpow, cost, es, ed, ops, int(self.config.depth),
                                              int(self.config.max_phases), int(self.max_classes))
