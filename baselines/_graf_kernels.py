"""Compiled loop of the `graf` floor (numba): every node's depth and height in many DAGs in one pass."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def depth_height(node_off, edge_off, src, dst):
    """(depth, height), int64 per node of all graphs, in the order of `node_off`.

    Graph g has nodes 0..n_g-1 (`node_off[g+1] - node_off[g]` of them) and the edges
    `src[edge_off[g]:edge_off[g+1]]` -> `dst[...]` in local ids. A node's depth is the longest path
    (in edges) from any source to it, its height the longest path from it to any sink, both found
    in Kahn's order. Nodes on a cycle (never in a well-formed graph) keep 0.
    """
    G = node_off.shape[0] - 1
    depth = np.zeros(node_off[G], dtype=np.int64)
    height = np.zeros(node_off[G], dtype=np.int64)
    for g in range(G):
        base = node_off[g]
        n = node_off[g + 1] - base
        e0, e1 = edge_off[g], edge_off[g + 1]
        m = e1 - e0
        indeg = np.zeros(n, dtype=np.int64)
        outdeg = np.zeros(n, dtype=np.int64)
        for j in range(e0, e1):
            outdeg[src[j]] += 1
            indeg[dst[j]] += 1
        ptr = np.zeros(n + 1, dtype=np.int64)
        for u in range(n):
            ptr[u + 1] = ptr[u] + outdeg[u]
        succ = np.empty(m, dtype=np.int64)
        fill = ptr[:-1].copy()
        for j in range(e0, e1):
            succ[fill[src[j]]] = dst[j]
            fill[src[j]] += 1
        left = indeg.copy()
        order = np.empty(n, dtype=np.int64)
        head, tail = 0, 0
        for u in range(n):
            if indeg[u] == 0:
                order[tail] = u
                tail += 1
        while head < tail:
            u = order[head]
            head += 1
            for k in range(ptr[u], ptr[u + 1]):
                v = succ[k]
                if depth[base + u] + 1 > depth[base + v]:
                    depth[base + v] = depth[base + u] + 1
                left[v] -= 1
                if left[v] == 0:
                    order[tail] = v
                    tail += 1
        for i in range(tail - 1, -1, -1):  # reverse Kahn order: every successor is done first
            u = order[i]
            for k in range(ptr[u], ptr[u + 1]):
                v = succ[k]
                if height[base + v] + 1 > height[base + u]:
                    height[base + u] = height[base + v] + 1
    return depth, height
