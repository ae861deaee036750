"""Shared machinery for splitters that cut the topological order into contiguous segments.

All shipped splitters except `none` work the same way once they have chosen where to cut:
the fixed topological order (`ArchGraph.topological_order`) is cut into contiguous *segments*
given by `bounds` (``0 = b_0 < b_1 < ... < b_S = n``; segment ``i`` is positions
``b_i .. b_{i+1} - 1``), and `segments_to_partition` turns them into an overlapping
`Partition`:

* part ``i`` = the nodes of segment ``i`` plus the *producers* of every edge entering the
  segment, so consecutive parts overlap by those edges (section 3.3 of the paper: motifs
  overlap by edges);
* one macro edge ``i -> j`` per pair of segments joined by at least one graph edge ``u -> v``
  with ``u`` in segment ``i`` and ``v`` in segment ``j`` (the edge lies in part ``j``, its
  producer in both). Segments are contiguous in a topological order, so ``i < j``: macro
  edges follow the data flow, with no self loops and no duplicates, and the macro graph is a DAG.

`part_keys` gives each part a hashable signature (its induced subgraph in topological order)
so that an encoder can cache one embedding per distinct subgraph.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from narbench.data.graph import ArchGraph, GraphError
from narbench.train.splitter import Partition, Splitter


def checked_order(graph: ArchGraph) -> np.ndarray:
    """`graph.topological_order()`, raising `GraphError` if the graph has a cycle."""
    order = graph.topological_order()
    if order.shape[0] != graph.num_nodes:
        raise GraphError(f"graph {graph.name!r}: contains a cycle; splitters need a DAG")
    return order


def positions(order: np.ndarray) -> np.ndarray:
    """Inverse permutation: `pos[node]` = the node's index in `order`."""
    pos = np.empty(order.shape[0], dtype=np.int64)
    pos[order] = np.arange(order.shape[0], dtype=np.int64)
    return pos


def normalize_bounds(bounds: Any, n: int) -> np.ndarray:
    """Sorted unique cut positions with 0 and n added; raises on cuts outside [0, n]."""
    b = np.unique(np.asarray(bounds, dtype=np.int64).reshape(-1))
    if b.size and (b[0] < 0 or b[-1] > n):
        raise ValueError(f"segment bounds must lie in [0, {n}], got {b[0]}..{b[-1]}")
    return np.unique(np.concatenate([[0, n], b])).astype(np.int64) if n else np.zeros(1, np.int64)


def segments_to_flat(graph: ArchGraph, order: np.ndarray, bounds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`segments_to_partition` as flat arrays: (offsets [P+1], nodes, macro edges [2, M]).

    Part i is `nodes[offsets[i]:offsets[i+1]]`, sorted and unique, exactly the `Partition`'s
    `parts[i]`; all parts are built at once (no per-part numpy calls).
    """
    n = graph.num_nodes
    b = normalize_bounds(bounds, n)
    nseg = b.shape[0] - 1
    if nseg <= 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros((2, 0), np.int64)
    seg_of_pos = np.repeat(np.arange(nseg, dtype=np.int64), np.diff(b))
    seg = seg_of_pos[positions(order)]
    src, dst = graph.edges
    su, sv = seg[src], seg[dst]
    cross = su != sv
    csrc, cu, cv = src[cross], su[cross], sv[cross]
    # part = the segment's nodes plus the producers of the edges entering it (never in the
    # segment itself): (part, node) keys, sorted; node keys come sorted when `order` is 0..n-1
    own = seg * n + np.arange(n, dtype=np.int64)
    if own.size > 1 and bool((own[1:] < own[:-1]).any()):
        own = np.sort(own)
    entering = np.unique(cv * n + csrc)
    member = np.sort(np.concatenate([own, entering]), kind="stable") if entering.size else own
    part_of, nodes = np.divmod(member, n)
    offsets = np.searchsorted(part_of, np.arange(nseg + 1, dtype=np.int64))
    if cu.size:
        pair = np.unique(cu * nseg + cv)
        macro = np.stack([pair // nseg, pair % nseg])
    else:
        macro = np.zeros((2, 0), np.int64)
    return offsets.astype(np.int64), nodes, macro


def segments_to_partition(graph: ArchGraph, order: np.ndarray, bounds: Any) -> Partition:
    """The overlapping `Partition` of contiguous segments of `order` (see the module docstring)."""
    offsets, nodes, macro = segments_to_flat(graph, order, bounds)
    return Partition(parts=tuple(nodes[offsets[i] : offsets[i + 1]] for i in range(offsets.shape[0] - 1)),
                     macro_edges=macro)


def part_keys(graph: ArchGraph, partition: Partition, order: np.ndarray | None = None) -> tuple[bytes, ...]:
    """A hashable, exact signature of each part's induced subgraph.

    The part's nodes are listed in topological order (their rank in `order`); the key encodes
    the node count, the op ids in that order and the induced edges as sorted (local producer,
    local consumer) pairs. Equal keys therefore mean identical subgraphs (same ops, same edges
    under the topological numbering); isomorphic parts whose nodes come in a different order
    may get different keys (a cache miss, never a wrong hit).
    """
    if order is None:
        order = checked_order(graph)
    pos = positions(order)
    P = partition.num_parts
    if P == 0:
        return ()
    sizes = np.array([p.shape[0] for p in partition.parts], dtype=np.int64)
    mem_node = np.concatenate(partition.parts)
    mem_part = np.repeat(np.arange(P, dtype=np.int64), sizes)
    # sort memberships by (part, topological position): the local index within a part
    srt = np.lexsort((pos[mem_node], mem_part))
    mem_node, mem_part = mem_node[srt], mem_part[srt]
    offs = np.concatenate([[0], np.cumsum(sizes)])
    local = np.arange(mem_node.shape[0], dtype=np.int64) - offs[mem_part]
    n = graph.num_nodes
    member_key = mem_part * n + mem_node  # unique per membership
    by_key = np.argsort(member_key, kind="stable")
    sorted_key = member_key[by_key]
    # induced edges: expand every edge over the parts that contain its consumer
    src, dst = graph.edges
    by_node = np.argsort(mem_node, kind="stable")
    node_sorted = mem_node[by_node]
    lo = np.searchsorted(node_sorted, dst, "left")
    hi = np.searchsorted(node_sorted, dst, "right")
    cnt = hi - lo
    eidx = np.repeat(np.arange(src.shape[0], dtype=np.int64), cnt)
    first = np.repeat(lo - np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt)
    m_dst = by_node[first + np.arange(eidx.shape[0], dtype=np.int64)]  # membership index of dst
    e_part = mem_part[m_dst]
    want = e_part * n + src[eidx]
    at = np.searchsorted(sorted_key, want)
    at_c = np.minimum(at, sorted_key.shape[0] - 1)
    ok = sorted_key[at_c] == want
    m_src = by_key[at_c[ok]]
    e_part, l_src, l_dst = e_part[ok], local[m_src], local[m_dst[ok]]
    es = np.lexsort((l_src, l_dst, e_part))
    e_part, l_src, l_dst = e_part[es], l_src[es], l_dst[es]
    e_starts = np.searchsorted(e_part, np.arange(P + 1))
    ops = graph.ops[mem_node].astype("<i4")
    keys = []
    for i in range(P):
        a, z = e_starts[i], e_starts[i + 1]
        keys.append(
            struct.pack("<ii", int(sizes[i]), int(z - a))
            + ops[offs[i] : offs[i + 1]].tobytes()
            + np.stack([l_src[a:z], l_dst[a:z]], axis=1).astype("<i4").tobytes()
        )
    return tuple(keys)


class SegmentSplitter(Splitter):
    """Base for splitters that cut the topological order; subclasses implement `segment_bounds`."""

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        """Cut positions into `order` (``0 = b_0 < ... < b_S = n``)."""
        raise NotImplementedError

    def segments(self, graph: ArchGraph) -> tuple[np.ndarray, np.ndarray]:
        """(topological order, normalized bounds) of the split."""
        order = checked_order(graph)
        return order, normalize_bounds(self.segment_bounds(graph, order), graph.num_nodes)

    def split(self, graph: ArchGraph) -> Partition:
        order, bounds = self.segments(graph)
        return segments_to_partition(graph, order, bounds)

    def split_flat(self, graph: ArchGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`split` as flat arrays (offsets, nodes, macro edges); see `segments_to_flat`."""
        order, bounds = self.segments(graph)
        return segments_to_flat(graph, order, bounds)

    def split_with_keys(self, graph: ArchGraph) -> tuple[Partition, tuple[bytes, ...]]:
        """The partition and, per part, its exact subgraph signature (see `part_keys`)."""
        order, bounds = self.segments(graph)
        partition = segments_to_partition(graph, order, bounds)
        return partition, part_keys(graph, partition, order)
