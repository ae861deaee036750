"""The one in-memory type for an architecture's computational graph.

A graph is a DAG whose nodes are operations (ids into a dataset's op vocabulary) and whose
edges carry data from producer to consumer. Everything else in narbench (datasets, splitters,
encoders, the search) consumes this type.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class GraphError(ValueError):
    """A graph record is malformed; the message names the record and the problem."""


@dataclass(eq=False)
class ArchGraph:
    """A computational graph: op-type ids per node and a 2 x E producer -> consumer edge index."""

    ops: np.ndarray
    edges: np.ndarray
    name: str
    family: str
    coarse: str
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ops = np.asarray(self.ops, dtype=np.int64).reshape(-1)
        edges = np.asarray(self.edges, dtype=np.int64)
        if edges.size == 0:
            edges = edges.reshape(2, 0)
        self.edges = edges

    @property
    def families(self) -> tuple[str, ...]:
        """Every family the graph belongs to, its primary `family` first: a canonical graph that specs of
        several families share keeps them all in `meta["families"]` (real 2.3 on); else `(family,)`."""
        more = self.meta.get("families") or ()
        return (self.family, *(f for f in dict.fromkeys(map(str, more)) if f != self.family))

    @property
    def num_nodes(self) -> int:
        return int(self.ops.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[1]) if self.edges.ndim == 2 else 0

    def validate(self, num_ops: int | None = None, *, dag: bool = True) -> "ArchGraph":
        """Raise `GraphError` naming this record if it is not a well-formed (acyclic) graph."""
        where = f"graph {self.name!r}"
        if self.num_nodes == 0:
            raise GraphError(f"{where}: empty graph (no nodes)")
        if self.edges.ndim != 2 or self.edges.shape[0] != 2:
            raise GraphError(f"{where}: edge index must have shape (2, E), got {self.edges.shape}")
        bad_ops = self.ops < 0 if num_ops is None else (self.ops < 0) | (self.ops >= num_ops)
        if bad_ops.any():
            bad = int(self.ops[bad_ops][0])
            raise GraphError(f"{where}: op id {bad} outside the vocabulary [0, {num_ops})")
        if self.num_edges:
            lo, hi = int(self.edges.min()), int(self.edges.max())
            if lo < 0 or hi >= self.num_nodes:
                bad = lo if lo < 0 else hi
                raise GraphError(
                    f"{where}: edge endpoint {bad} out of range for {self.num_nodes} nodes"
                )
        if dag and self.num_edges:
            order = self.topological_order()
            if order.shape[0] != self.num_nodes:
                raise GraphError(f"{where}: contains a cycle, but a DAG is required")
        return self

    def topological_order(self) -> np.ndarray:
        """Kahn's order, ties broken by the smallest node id (stable for a given numbering).

        Returns fewer than `num_nodes` ids when the graph has a cycle.
        """
        import heapq

        n = self.num_nodes
        src, dst = self.edges
        if not src.size or bool((src < dst).all()):
            # Numbered in execution order (every edge goes up): then the smallest ready node is
            # always the next id, so Kahn's order with this tie-break is 0..n-1.
            return np.arange(n, dtype=np.int64)
        indeg = np.bincount(dst, minlength=n)
        order_idx = np.argsort(src, kind="stable")
        starts = np.searchsorted(src[order_idx], np.arange(n + 1))
        succ = dst[order_idx]
        heap = [int(i) for i in np.flatnonzero(indeg == 0)]
        heapq.heapify(heap)
        indeg = indeg.tolist()
        out: list[int] = []
        while heap:
            u = heapq.heappop(heap)
            out.append(u)
            for v in succ[starts[u] : starts[u + 1]].tolist():
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(heap, v)
        return np.asarray(out, dtype=np.int64)

    def content_hash(self) -> str:
        """sha256 of the op sequence and edge list: equal hashes mean identical graphs."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.ops, dtype="<i8").tobytes())
        h.update(b"|")
        h.update(np.ascontiguousarray(self.edges, dtype="<i8").tobytes())
        return h.hexdigest()

    def to_pyg(self, num_ops: int, *, one_hot: bool = True):
        """A `torch_geometric.data.Data` over a vocabulary of `num_ops` op types.

        `one_hot=True`: float features `x` [N, num_ops]; `one_hot=False`: op ids `x` (long [N]),
        for encoders that start with an embedding layer (same model, far less memory).
        """
        import torch
        import_torch_geometric()
        from torch_geometric.data import Data

        op = torch.as_tensor(self.ops, dtype=torch.long)
        x = torch.nn.functional.one_hot(op, num_ops).float() if one_hot else op
        return Data(x=x, edge_index=torch.as_tensor(self.edges, dtype=torch.long), num_nodes=self.num_nodes)


def import_torch_geometric() -> None:
    """Import `torch_geometric.nn` without the warning its import raises; a no-op once imported.

    torch_geometric (2.8) applies `torch.jit.script` to two of its classes while it is being
    imported, and torch deprecates `torch.jit.script` (a DeprecationWarning, a FutureWarning in
    some builds), so every GNN run printed a warning about code narbench never calls. The filter
    covers this one import and that one message; a `torch.jit.script` call of your own still warns.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*`?torch\.jit\.script`? is (deprecated|not supported)")
        import torch_geometric.nn  # noqa: F401
