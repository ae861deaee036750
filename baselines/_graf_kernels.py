"""Compiled loop of the `graf` floor (numba): every node's depth and height in many DAGs in one pass."""

from __future__ import annotations

import numpy as np
from numba import njit

from narbench.baselines._graphstats_kernels import adjacency


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
        indeg, _, ptr, succ = adjacency(src, dst, e0, e1, n)
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
