"""Small edits of an architecture's graph: remove or insert nodes, drop or duplicate a block, swap activations.

How far does an index's embedding move a graph for a small change of design? The search robustness benchmark
(`benchmarks/search/robustness.py`, issue 59 item 4) edits corpus graphs with these and asks where the original
ranks. Each edit returns a new `ArchGraph` (the input is left alone) whose nodes stay numbered in execution order
(every edge goes from a lower to a higher id, as every `real` graph is), whose edges are unique and sorted by
(producer, consumer) as the corpus stores them, and whose op ids stay in the vocabulary: a valid DAG.

A *block* is the run of nodes `a+1 .. b` between two single-node cuts `a < b`: nodes that no edge jumps over
(`cut_nodes`), so the block's nodes take data only from `a` and from each other, and only `b` feeds what follows
(a residual sublayer ending in its add, a chain of layers). Activations that may be swapped for one another are
the table `narbench/data/activations.csv` (rectifiers and their smooth kin; gates such as sigmoid are not).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.data.mapping import splice

#: The edits `random_edit` makes, by name; an edit's size is the number of nodes it changes.
EDIT_KINDS = ("remove", "insert", "drop-block", "duplicate-block", "swap-activation")


@dataclass(frozen=True)
class EditSpec:
    """One edit to make: its kind (`EDIT_KINDS`) and size (nodes removed, inserted, in the block, or swapped)."""

    kind: str
    size: int

    def __post_init__(self) -> None:
        if self.kind not in EDIT_KINDS:
            raise ValueError(f"unknown edit {self.kind!r}; the edits are {', '.join(EDIT_KINDS)}")
        if isinstance(self.size, bool) or not isinstance(self.size, (int, np.integer)) or self.size < 1:
            raise ValueError(f"an edit's size is a positive number of nodes, got {self.size!r}")


@lru_cache(maxsize=1)
def activations() -> tuple[str, ...]:
    """The activation ops a swap exchanges (`narbench/data/activations.csv`, column `op`)."""
    path = Path(str(resources.files("narbench"))) / "data" / "activations.csv"
    with path.open(newline="") as fh:
        return tuple(row["op"] for row in csv.DictReader(fh))


def _graph(graph: ArchGraph, ops: np.ndarray, edges: np.ndarray, what: str) -> ArchGraph:
    """A new graph with `graph`'s labels, `ops` and `edges` (made unique and sorted by producer, consumer)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    if edges.size:
        edges = np.unique(edges.T, axis=0).T.copy()
    return ArchGraph(ops=np.asarray(ops, dtype=np.int64), edges=edges, name=f"{graph.name}~{what}",
                     family=graph.family, coarse=graph.coarse, source=graph.source)


def _check_order(graph: ArchGraph) -> None:
    """`ValueError` unless every edge of `graph` goes up (the edits keep and rely on execution order)."""
    if graph.num_edges and not bool((graph.edges[0] < graph.edges[1]).all()):
        raise ValueError(f"graph {graph.name!r} is not numbered in execution order (an edge goes down)")


def _check_nodes(graph: ArchGraph, nodes: Sequence[int]) -> np.ndarray:
    nodes = np.unique(np.asarray(nodes, dtype=np.int64))
    if nodes.size and (nodes[0] < 0 or nodes[-1] >= graph.num_nodes):
        raise ValueError(f"graph {graph.name!r} has nodes 0..{graph.num_nodes - 1}, not {nodes.tolist()}")
    return nodes


def remove_nodes(graph: ArchGraph, nodes: Sequence[int]) -> ArchGraph:
    """`graph` without `nodes`, each removed node's producers connected to its consumers (through removed
    neighbours too, as `narbench.data.mapping.splice` splices); at least one node must stay."""
    _check_order(graph)
    nodes = _check_nodes(graph, nodes)
    if nodes.size >= graph.num_nodes:
        raise ValueError(f"removing {nodes.size} of {graph.num_nodes} nodes leaves no graph")
    keep = np.ones(graph.num_nodes, dtype=bool)
    keep[nodes] = False
    edges = splice(graph.edges, keep)
    renumber = np.cumsum(keep) - 1
    return _graph(graph, graph.ops[keep], renumber[edges], f"remove{nodes.size}")


def insert_node(graph: ArchGraph, edge: int, op: int) -> ArchGraph:
    """`graph` with a new node of op `op` on its `edge`-th edge (producer -> new -> consumer), numbered right
    after the producer so that every edge still goes up."""
    if not 0 <= edge < graph.num_edges:
        raise ValueError(f"graph {graph.name!r} has {graph.num_edges} edges, not an edge {edge}")
    _check_order(graph)
    src, dst = graph.edges[:, edge].tolist()
    new = src + 1
    shift = lambda ids: ids + (ids >= new)  # noqa: E731 - nodes after the producer move up by one
    edges = np.delete(graph.edges, edge, axis=1)
    edges = np.concatenate([shift(edges), [[src, new], [new, dst + 1]]], axis=1)
    ops = np.insert(graph.ops, new, op)
    return _graph(graph, ops, edges, "insert1")


def insert_nodes(graph: ArchGraph, rng: np.random.Generator, ops: Sequence[int], size: int) -> ArchGraph:
    """`graph` with `size` new nodes, one at a time on an edge drawn uniformly (a later one may land on an edge
    an earlier one made), each of an op drawn uniformly from `ops`."""
    if graph.num_edges == 0:
        raise ValueError(f"graph {graph.name!r} has no edge to insert a node on")
    out = graph
    for _ in range(size):
        out = insert_node(out, int(rng.integers(out.num_edges)), int(rng.choice(np.asarray(ops))))
    return _graph(graph, out.ops, out.edges, f"insert{size}")


def cut_nodes(graph: ArchGraph) -> np.ndarray:
    """The nodes that no edge jumps over (no edge `s -> d` with `s < v < d`), ascending: in a graph numbered in
    execution order, everything before such a node reaches everything after it only through it."""
    _check_order(graph)
    n = graph.num_nodes
    src, dst = graph.edges
    jump = dst - src > 1
    over = np.zeros(n + 1, dtype=np.int64)
    np.add.at(over, src[jump] + 1, 1)
    np.add.at(over, dst[jump], -1)
    return np.flatnonzero(np.cumsum(over[:n]) == 0)


def blocks(graph: ArchGraph, size: int) -> np.ndarray:
    """The blocks of `size` nodes, as the cut before each one (`a`: the block is `a+1 .. a+size`), ascending."""
    cut = np.zeros(graph.num_nodes + size, dtype=bool)
    cut[cut_nodes(graph)] = True
    return np.flatnonzero(cut[: graph.num_nodes] & cut[size: size + graph.num_nodes])


def _check_block(graph: ArchGraph, start: int, size: int) -> int:
    end = start + size
    if size < 1 or start < 0 or end >= graph.num_nodes or not np.isin([start, end], cut_nodes(graph)).all():
        raise ValueError(f"nodes {start + 1}..{end} of graph {graph.name!r} are not a block (between two cuts)")
    return end


def drop_block(graph: ArchGraph, start: int, size: int) -> ArchGraph:
    """`graph` without the block `start+1 .. start+size`: what its last node fed, the cut `start` feeds."""
    end = _check_block(graph, start, size)
    src, dst = graph.edges
    inside = lambda ids: (ids > start) & (ids <= end)  # noqa: E731
    keep = ~inside(dst)  # edges into the block go
    src, dst = np.where(src == end, start, src)[keep], dst[keep]  # the block's exit becomes its entry
    shift = lambda ids: ids - size * (ids > end)  # noqa: E731
    ops = np.delete(graph.ops, np.arange(start + 1, end + 1))
    return _graph(graph, ops, np.stack([shift(src), shift(dst)]), f"drop-block{size}")


def duplicate_block(graph: ArchGraph, start: int, size: int) -> ArchGraph:
    """`graph` with the block `start+1 .. start+size` repeated: its copy follows it (fed by the block's last
    node as the block is fed by `start`) and feeds what the block fed."""
    end = _check_block(graph, start, size)
    src, dst = graph.edges
    moved = lambda ids: ids + size * (ids > end)  # noqa: E731 - nodes after the block make room for the copy
    out_src = np.where(src == end, end + size, moved(src))  # what the block fed, its copy feeds
    body = (dst > start) & (dst <= end)  # the block's own edges (into it), copied
    copy_src = np.where(src[body] == start, end, src[body] + size)
    edges = np.concatenate([np.stack([out_src, moved(dst)]), np.stack([copy_src, dst[body] + size])], axis=1)
    ops = np.insert(graph.ops, end + 1, graph.ops[start + 1: end + 1])
    return _graph(graph, ops, edges, f"duplicate-block{size}")


def swap_ops(graph: ArchGraph, nodes: Sequence[int], ops: Sequence[int]) -> ArchGraph:
    """`graph` with node `nodes[i]`'s op set to `ops[i]` (edges unchanged)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    if len(np.unique(nodes)) != len(nodes) or len(nodes) != len(ops):
        raise ValueError("swap_ops takes distinct nodes and one op for each")
    _check_nodes(graph, nodes)
    new = graph.ops.copy()
    new[nodes] = np.asarray(ops, dtype=np.int64)
    return _graph(graph, new, graph.edges, f"swap{len(nodes)}")


def random_edit(graph: ArchGraph, spec: EditSpec, vocab: Sequence[str], rng: np.random.Generator) -> ArchGraph | None:
    """`graph` with one edit of `spec`'s kind and size drawn with `rng` (over `vocab`, the op names of `graph`'s
    ids), or None when `graph` cannot take it (too few nodes, edges, blocks of that size or activations).

    remove: `size` distinct nodes drawn uniformly (`remove_nodes`); insert: `insert_nodes` with any op of the
    vocabulary but `other` (the unknown op); drop-block, duplicate-block: a block of `size` nodes drawn uniformly
    (`blocks`); swap-activation: `size` distinct activation nodes (`activations`), each set to another
    activation of the vocabulary drawn uniformly."""
    kind, size = spec.kind, int(spec.size)
    if kind == "remove":
        if graph.num_nodes <= size:
            return None
        return remove_nodes(graph, rng.choice(graph.num_nodes, size, replace=False))
    if kind == "insert":
        if graph.num_edges == 0:
            return None
        return insert_nodes(graph, rng, [i for i, op in enumerate(vocab) if op != "other"], size)
    if kind in ("drop-block", "duplicate-block"):
        starts = blocks(graph, size)
        if starts.size == 0:
            return None
        start = int(rng.choice(starts))
        return drop_block(graph, start, size) if kind == "drop-block" else duplicate_block(graph, start, size)
    acts = [i for i, op in enumerate(vocab) if op in set(activations())]
    nodes = np.flatnonzero(np.isin(graph.ops, acts))
    if nodes.size < size:
        return None
    nodes = np.sort(rng.choice(nodes, size, replace=False))
    new = [int(rng.choice([a for a in acts if a != graph.ops[v]])) for v in nodes]
    return swap_ops(graph, nodes, new)
