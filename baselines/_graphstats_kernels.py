"""Compiled loop of the `graphstats` floor (numba): structure statistics of many DAGs in one pass."""

from __future__ import annotations

import numpy as np
from numba import njit

#: Names of the columns `structure_stats` returns, in order (documented in docs/encoders.md).
STRUCTURE_COLUMNS = (
    "nodes", "edges", "mean_in_degree", "max_in_degree", "max_out_degree", "std_in_degree", "std_out_degree",
    "sources", "sinks", "depth", "depth_per_node", "max_width", "mean_sink_distance", "skip_edge_share",
    "merge_node_share", "branch_node_share",
)


@njit(cache=True)
def adjacency(src, dst, e0, e1, n):
    """(in-degrees, out-degrees, ptr, succ) of the n-node graph of edges `src[e0:e1]` -> `dst[e0:e1]`
    (local ids): node u's successors are `succ[ptr[u]:ptr[u+1]]`, in edge order."""
    indeg = np.zeros(n, dtype=np.int64)
    outdeg = np.zeros(n, dtype=np.int64)
    for j in range(e0, e1):
        outdeg[src[j]] += 1
        indeg[dst[j]] += 1
    ptr = np.zeros(n + 1, dtype=np.int64)
    for u in range(n):
        ptr[u + 1] = ptr[u] + outdeg[u]
    succ = np.empty(e1 - e0, dtype=np.int64)
    fill = ptr[:-1].copy()
    for j in range(e0, e1):
        succ[fill[src[j]]] = dst[j]
        fill[src[j]] += 1
    return indeg, outdeg, ptr, succ


@njit(cache=True)
def structure_stats(node_off, edge_off, src, dst):
    """Raw (untransformed) statistics per graph, float64 [G, len(STRUCTURE_COLUMNS)].

    Graph g has nodes 0..n_g-1 (`node_off[g+1] - node_off[g]` of them) and the edges
    `src[edge_off[g]:edge_off[g+1]]` -> `dst[...]` in local ids. Depth is the longest path (in
    edges) from any source, found in Kahn's order; the sink distance is the shortest path from any
    source; a skip edge joins nodes whose depths differ by more than one; width is the most nodes
    at one depth. Nodes on a cycle (never in a well-formed graph) keep depth 0.
    """
    G = node_off.shape[0] - 1
    out = np.zeros((G, 16), dtype=np.float64)
    for g in range(G):
        n = node_off[g + 1] - node_off[g]
        e0, e1 = edge_off[g], edge_off[g + 1]
        m = e1 - e0
        indeg, outdeg, ptr, succ = adjacency(src, dst, e0, e1, n)
        depth = np.zeros(n, dtype=np.int64)
        dist = np.full(n, -1, dtype=np.int64)  # shortest path from any source
        left = indeg.copy()
        queue = np.empty(n, dtype=np.int64)
        head, tail = 0, 0
        for u in range(n):
            if indeg[u] == 0:
                queue[tail] = u
                tail += 1
                dist[u] = 0
        while head < tail:
            u = queue[head]
            head += 1
            for k in range(ptr[u], ptr[u + 1]):
                v = succ[k]
                if depth[u] + 1 > depth[v]:
                    depth[v] = depth[u] + 1
                if dist[u] >= 0 and (dist[v] < 0 or dist[u] + 1 < dist[v]):
                    dist[v] = dist[u] + 1
                left[v] -= 1
                if left[v] == 0:
                    queue[tail] = v
                    tail += 1
        max_depth = 0
        for u in range(n):
            if depth[u] > max_depth:
                max_depth = depth[u]
        width = np.zeros(max_depth + 1, dtype=np.int64)
        for u in range(n):
            width[depth[u]] += 1
        skip = 0
        for j in range(e0, e1):
            if depth[dst[j]] - depth[src[j]] > 1:
                skip += 1
        sources, sinks, merges, branches, sink_dist = 0, 0, 0, 0, 0.0
        max_in, max_out, sq_in, sq_out = 0, 0, 0.0, 0.0
        mean_deg = m / n if n else 0.0
        for u in range(n):
            sources += indeg[u] == 0
            merges += indeg[u] > 1
            branches += outdeg[u] > 1
            if outdeg[u] == 0:
                sinks += 1
                sink_dist += max(dist[u], 0)
            max_in = max(max_in, indeg[u])
            max_out = max(max_out, outdeg[u])
            sq_in += (indeg[u] - mean_deg) ** 2
            sq_out += (outdeg[u] - mean_deg) ** 2
        row = out[g]
        row[0] = n
        row[1] = m
        row[2] = mean_deg
        row[3] = max_in
        row[4] = max_out
        row[5] = np.sqrt(sq_in / n) if n else 0.0
        row[6] = np.sqrt(sq_out / n) if n else 0.0
        row[7] = sources
        row[8] = sinks
        row[9] = max_depth
        row[10] = max_depth / n if n else 0.0
        row[11] = width.max() if n else 0
        row[12] = sink_dist / sinks if sinks else 0.0
        row[13] = skip / m if m else 0.0
        row[14] = merges / n if n else 0.0
        row[15] = branches / n if n else 0.0
    return out
