"""Isomorphism of architecture graphs: a canonical hash equal for isomorphic graphs, the isomorphism
classes of a set of graphs, and the taxonomy's invariant (a): isomorphic graphs are never in two
families (`isomorphism_violations`); where graphs carry several families (real 2.3 on), isomorphic graphs
carry the same ones (`unite_families` makes it so, `family_set_violations` checks it).

The hash numbers nodes by Weisfeiler-Lehman colours (the motif splitter's `encode_levels`), so the
whole `real` set is classed in seconds: graphs are bucketed by a cheap invariant first.
"""

from __future__ import annotations

import hashlib

import numpy as np

from narbench.data.graph import ArchGraph


def canonical_hash(graph: ArchGraph, max_rounds: int = 64) -> str:
    """A hash equal for isomorphic graphs: `content_hash` after a canonical node numbering.

    Nodes get Weisfeiler-Lehman colours (op, parents' and children's colours) refined until the
    number of colours stops growing; the numbering is Kahn's topological order with ready nodes
    taken by colour. Nodes the refinement cannot tell apart are interchangeable in the DAGs of
    real networks (parallel branches of one block), so ties among them are broken by node id.
    """
    from narbench.splitters.motif import encode_levels

    n = graph.num_nodes
    levels = encode_levels(graph, max_rounds, children=True)
    colours, classes = levels[0], len(np.unique(levels[0]))
    for level in levels[1:]:
        k = len(np.unique(level))
        if k == classes:
            break
        colours, classes = level, k
    rank = np.unique(colours, return_inverse=True)[1].reshape(-1).astype(np.int64)
    order = _kahn(graph, rank)
    if len(order) != n:
        raise ValueError(f"graph {graph.name!r} has a cycle; no canonical numbering")
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    src, dst = pos[graph.edges[0]], pos[graph.edges[1]]
    key = np.lexsort((dst, src))
    canon = ArchGraph(ops=graph.ops[order], edges=np.stack([src[key], dst[key]]), name=graph.name,
                      family="", coarse="")
    return canon.content_hash()


def _kahn(graph: ArchGraph, rank: np.ndarray) -> np.ndarray:
    import heapq

    n = graph.num_nodes
    src, dst = graph.edges
    indeg = np.bincount(dst, minlength=n).tolist()
    idx = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[idx], np.arange(n + 1)).tolist()
    succ = dst[idx].tolist()
    r = rank.tolist()
    heap = [(r[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, u = heapq.heappop(heap)
        out.append(u)
        for v in succ[starts[u]:starts[u + 1]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (r[v], v))
    return np.asarray(out, dtype=np.int64)


def _invariant_key(graph: ArchGraph) -> str:
    """A cheap isomorphism invariant (sizes, op counts, WL-3 colour multiset): a bucket key."""
    from narbench.splitters.motif import encode_levels

    h = hashlib.sha256(f"{graph.num_nodes}:{graph.num_edges}".encode())
    for level in encode_levels(graph, 3, children=True):
        h.update(np.sort(level).tobytes())
    return h.hexdigest()


def isomorphic_classes(graphs: list[ArchGraph]) -> list[list[int]]:
    """Indices of `graphs` grouped into isomorphism classes of two or more members.

    Graphs are bucketed by a cheap invariant first; only buckets of two or more get the
    canonical hash, so the whole `real` set takes seconds.
    """
    buckets: dict[str, list[int]] = {}
    for i, g in enumerate(graphs):
        buckets.setdefault(_invariant_key(g), []).append(i)
    out = []
    for members in buckets.values():
        if len(members) < 2:
            continue
        by_hash: dict[str, list[int]] = {}
        for i in members:
            by_hash.setdefault(canonical_hash(graphs[i]), []).append(i)
        out += [m for m in by_hash.values() if len(m) > 1]
    return sorted(out)


def isomorphism_violations(graphs: list[ArchGraph], classes: list[list[int]] | None = None) -> list[tuple[str, ...]]:
    """Invariant (a): the families of every isomorphism class that spans two or more (empty: holds)."""
    classes = isomorphic_classes(graphs) if classes is None else classes
    out = []
    for members in classes:
        fams = tuple(sorted({graphs[i].family for i in members}))
        if len(fams) > 1:
            out.append(fams)
    return out


def unite_families(graphs: list[ArchGraph], classes: list[list[int]] | None = None) -> int:
    """Give every graph of an isomorphism class the families of all of them (`meta["families"]`: its own
    first, then the others' in class order), so that relevance follows structure, not node numbering (real
    2.3 on: isomorphic canonical graphs that dedup kept apart, e.g. BERT's and I-BERT's, would otherwise share
    a design but not its families). Returns how many graphs gained a family."""
    classes = isomorphic_classes(graphs) if classes is None else classes
    gained = 0
    for members in classes:
        union = list(dict.fromkeys(f for i in members for f in graphs[i].families))
        for i in members:
            own = graphs[i].families
            if len(own) < len(union):
                graphs[i].meta["families"] = [*own, *(f for f in union if f not in own)]
                gained += 1
    return gained


def family_set_violations(graphs: list[ArchGraph], classes: list[list[int]] | None = None) -> list[tuple[str, ...]]:
    """The invariant that replaces (a) where graphs carry several families (real 2.3 on): isomorphic graphs
    have one primary family and one set of families. Per class that breaks it, its names (empty: holds)."""
    classes = isomorphic_classes(graphs) if classes is None else classes
    return [tuple(graphs[i].name for i in members) for members in classes
            if len({graphs[i].family for i in members}) > 1 or len({frozenset(graphs[i].families) for i in members}) > 1]
