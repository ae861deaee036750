"""Parts of a graph as flat arrays, and their induced subgraphs, all parts at once.

A `Partition` lists each part's node ids; encoders that work on parts (the paper's `ours`) need
every part's *induced subgraph* (its nodes' ops and the graph edges between them) and an exact
key for it, and for some parts the subgraph of the part plus its k-hop neighbourhood (the
context graph of stage 1). Doing that one part at a time scans every edge once per part
(O(parts x E) per graph). Here all parts of a graph are handled together in O(n + E + M + E')
(plus sorting each part's edges), M = the total part size (sum over parts) and E' = the edges
counted once per part holding their consumer: linear in nodes + edges times the overlap.

The loops are compiled (numba, `narbench.train._parts_kernels`).

Conventions (the same as a per-part `induced(graph, nodes)`): a part's local node order is its
sorted node ids; its edges are the graph edges with both ends in the part, in the graph's edge
order, as local (producer, consumer) indices; the subgraph's features are the op ids.
`subgraph_keys` hashes exactly those arrays (blake2b-128 of the int64 op ids, then of the 2 x m
int64 edge index), so equal keys mean equal ops and local edges.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.train.splitter import Partition

__all__ = ["GraphParts", "Subgraphs", "adjacency", "flatten", "induced_subgraphs", "neighbourhoods", "subgraph_keys"]


def flatten(parts) -> tuple[np.ndarray, np.ndarray]:
    """(offsets [P+1], nodes): part i is `nodes[offsets[i]:offsets[i+1]]` (sorted, unique)."""
    sizes = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    nodes = np.concatenate(parts).astype(np.int64, copy=False) if len(parts) else np.zeros(0, np.int64)
    return offsets, nodes


@dataclass(frozen=True, eq=False)
class Subgraphs:
    """Induced subgraphs of several node sets of one graph, as flat arrays.

    Subgraph i has nodes `nodes[offsets[i]:offsets[i+1]]` (sorted graph node ids) with op ids
    `ops[...]` (same slice), and local edges `src[e]`, `dst[e]` for e in
    `edge_offsets[i]:edge_offsets[i+1]` (indices into its node slice, graph edge order).
    """

    offsets: np.ndarray
    nodes: np.ndarray
    ops: np.ndarray
    edge_offsets: np.ndarray
    src: np.ndarray
    dst: np.ndarray

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def arrays(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(op ids [n_i], edge index [2, m_i], int64) of subgraph i."""
        a, b = self.offsets[i], self.offsets[i + 1]
        ea, eb = self.edge_offsets[i], self.edge_offsets[i + 1]
        return self.ops[a:b], np.stack([self.src[ea:eb], self.dst[ea:eb]])

    def data(self, i: int):
        """Subgraph i as a PyG Data (x = op ids), identical to `induced(graph, nodes_i)`."""
        import torch
        from narbench.data.graph import import_torch_geometric

        import_torch_geometric()
        from torch_geometric.data import Data

        x, edge_index = self.arrays(i)
        return Data(x=torch.as_tensor(x), edge_index=torch.as_tensor(edge_index), num_nodes=int(x.shape[0]))


def induced_subgraphs(graph: ArchGraph, offsets: np.ndarray, nodes: np.ndarray, csr=None) -> Subgraphs:
    """The induced subgraph of every node set (`offsets`, `nodes` as from `flatten`).

    `csr`: the graph's `adjacency(graph)` when the caller has it already."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    src, dst = graph.edges
    _, _, in_ptr, in_edge = csr if csr is not None else adjacency(graph)
    edge_offsets, lsrc, ldst = _kernels().induced_edges(
        graph.num_nodes, np.ascontiguousarray(src), offsets, nodes, in_ptr, in_edge)
    return Subgraphs(offsets, nodes, graph.ops[nodes], edge_offsets, lsrc, ldst)


def adjacency(graph: ArchGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(neighbour ptr, neighbours, in-edge ptr, in-edge ids): the undirected adjacency and the
    edges into each node (edge ids ascending)."""
    src, dst = graph.edges
    return _kernels().csr(graph.num_nodes, np.ascontiguousarray(src), np.ascontiguousarray(dst))


_KERNELS = None


def _kernels():
    """`narbench.train._parts_kernels`, imported on first use (numba start-up is paid only then)."""
    global _KERNELS
    if _KERNELS is None:
        from narbench.core.jit import setup_numba_cache

        setup_numba_cache()
        from narbench.train import _parts_kernels

        _KERNELS = _parts_kernels
    return _KERNELS


def subgraph_keys(sub: Subgraphs) -> list[bytes]:
    """Per subgraph: blake2b-128 of its int64 op ids, then of its 2 x m int64 edge index."""
    xs = memoryview(np.ascontiguousarray(sub.ops, dtype="<i8")).cast("B")
    ss = memoryview(np.ascontiguousarray(sub.src, dtype="<i8")).cast("B")
    ds = memoryview(np.ascontiguousarray(sub.dst, dtype="<i8")).cast("B")
    off = (sub.offsets * 8).tolist()
    eoff = (sub.edge_offsets * 8).tolist()
    blake = hashlib.blake2b
    keys = []
    for i in range(len(off) - 1):
        h = blake(xs[off[i] : off[i + 1]], digest_size=16)
        ea, eb = eoff[i], eoff[i + 1]
        h.update(ss[ea:eb])
        h.update(ds[ea:eb])
        keys.append(h.digest())
    return keys


def neighbourhoods(
    graph: ArchGraph, offsets: np.ndarray, nodes: np.ndarray, hops: int, csr=None
) -> tuple[np.ndarray, np.ndarray]:
    """Each node set plus every node within `hops` edges of it (either direction), flattened.

    Same sets as a per-part `neighbourhood(graph, nodes_i, hops)`, sorted within each set.
    `csr`: the graph's `adjacency(graph)` when the caller has it already.
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    if hops <= 0 or graph.num_edges == 0 or nodes.shape[0] == 0:
        return offsets, nodes
    nbr_ptr, nbr, _, _ = csr if csr is not None else adjacency(graph)
    return _kernels().neighbourhoods(graph.num_nodes, offsets, nodes, nbr_ptr, nbr, int(hops))


@dataclass(frozen=True, eq=False)
class GraphParts:
    """A graph's partition as flat arrays plus the key of every part's induced subgraph.

    Part i has nodes `nodes[offsets[i]:offsets[i+1]]`; `macro_edges` (2 x M) joins parts;
    `keys[i]` is `subgraph_keys` of part i. What the parts cache stores per graph.
    """

    offsets: np.ndarray
    nodes: np.ndarray
    macro_edges: np.ndarray
    keys: tuple[bytes, ...]

    @classmethod
    def of(cls, graph: ArchGraph, partition: Partition) -> "GraphParts":
        return cls.from_flat(graph, *flatten(partition.parts), partition.macro_edges)

    @classmethod
    def from_flat(
        cls, graph: ArchGraph, offsets: np.ndarray, nodes: np.ndarray, macro_edges: np.ndarray
    ) -> "GraphParts":
        """From flat parts (each sorted and unique, as in a `Partition`), keying every part."""
        macro = np.asarray(macro_edges, dtype=np.int64)
        macro = macro.reshape(2, 0) if macro.size == 0 else macro
        keys = subgraph_keys(induced_subgraphs(graph, offsets, nodes))
        return cls(np.asarray(offsets, dtype=np.int64), np.asarray(nodes, dtype=np.int64), macro, tuple(keys))

    @property
    def num_parts(self) -> int:
        return self.offsets.shape[0] - 1

    def part(self, i: int) -> np.ndarray:
        return self.nodes[self.offsets[i] : self.offsets[i + 1]]

    def partition(self) -> Partition:
        return Partition(parts=tuple(self.part(i) for i in range(self.num_parts)), macro_edges=self.macro_edges)

    def select(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, nodes) of the parts `idx` only, in that order."""
        idx = np.asarray(idx, dtype=np.int64)
        sizes = self.offsets[idx + 1] - self.offsets[idx]
        offsets = np.zeros(idx.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        start = np.repeat(self.offsets[idx] - offsets[:-1], sizes)
        return offsets, self.nodes[start + np.arange(int(offsets[-1]), dtype=np.int64)]
