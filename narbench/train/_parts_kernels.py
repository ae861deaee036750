"""Compiled loops of `narbench.train.parts` (numba): adjacency, induced edges, neighbourhoods."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def csr(n, src, dst):
    """(nbr_ptr, nbr, in_ptr, in_edge): neighbours of u (either direction, edge order, out-edges
    before in-edges as `concat([dst, src])` lists them) and the ids of the edges into v, ascending."""
    E = src.shape[0]
    deg = np.zeros(n + 1, dtype=np.int64)
    indeg = np.zeros(n + 1, dtype=np.int64)
    for j in range(E):
        deg[src[j] + 1] += 1
        deg[dst[j] + 1] += 1
        indeg[dst[j] + 1] += 1
    for i in range(n):
        deg[i + 1] += deg[i]
        indeg[i + 1] += indeg[i]
    nbr = np.empty(2 * E, dtype=np.int64)
    in_edge = np.empty(E, dtype=np.int64)
    fill = deg[:-1].copy()
    fill_in = indeg[:-1].copy()
    for j in range(E):
        nbr[fill[src[j]]] = dst[j]
        fill[src[j]] += 1
    for j in range(E):
        nbr[fill[dst[j]]] = src[j]
        fill[dst[j]] += 1
        in_edge[fill_in[dst[j]]] = j
        fill_in[dst[j]] += 1
    return deg, nbr, indeg, in_edge


@njit(cache=True)
def induced_edges(n, src, offsets, nodes, in_ptr, in_edge):
    """Per part: the edges with both ends in it, in edge-id order, as local (src, dst) indices.
    Returns (edge_offsets [P+1], local src, local dst)."""
    P = offsets.shape[0] - 1
    stamp = np.full(n, -1, dtype=np.int64)
    local = np.empty(n, dtype=np.int64)
    edge_offsets = np.zeros(P + 1, dtype=np.int64)
    cap = 16
    for p in range(P):
        for i in range(offsets[p], offsets[p + 1]):
            cap += in_ptr[nodes[i] + 1] - in_ptr[nodes[i]]
    eid = np.empty(cap, dtype=np.int64)
    lsrc = np.empty(cap, dtype=np.int64)
    ldst = np.empty(cap, dtype=np.int64)
    m = 0
    for p in range(P):
        a, b = offsets[p], offsets[p + 1]
        for i in range(a, b):
            stamp[nodes[i]] = p
            local[nodes[i]] = i - a
        start = m
        for i in range(a, b):
            v = nodes[i]
            for q in range(in_ptr[v], in_ptr[v + 1]):
                j = in_edge[q]
                u = src[j]
                if stamp[u] == p:
                    eid[m] = j
                    lsrc[m] = local[u]
                    ldst[m] = i - a
                    m += 1
        if m - start > 1:
            o = np.argsort(eid[start:m], kind="mergesort") + start
            eid[start:m] = eid[o]
            lsrc[start:m] = lsrc[o]
            ldst[start:m] = ldst[o]
        edge_offsets[p + 1] = m
    return edge_offsets, lsrc[:m].copy(), ldst[:m].copy()


@njit(cache=True)
def neighbourhoods(n, offsets, nodes, nbr_ptr, nbr, hops):
    """Each node set plus everything within `hops` edges (either direction), each sorted."""
    P = offsets.shape[0] - 1
    stamp = np.full(n, -1, dtype=np.int64)
    out_off = np.zeros(P + 1, dtype=np.int64)
    out = np.empty(max(16, 2 * nodes.shape[0]), dtype=np.int64)
    m = 0
    frontier = np.empty(n, dtype=np.int64)
    for p in range(P):
        start = m
        nf = 0
        for i in range(offsets[p], offsets[p + 1]):
            v = nodes[i]
            if stamp[v] != p:
                stamp[v] = p
                if m >= out.shape[0]:
                    grown = np.empty(2 * out.shape[0], dtype=np.int64)
                    grown[:m] = out[:m]
                    out = grown
                out[m] = v
                m += 1
                frontier[nf] = v
                nf += 1
        for _ in range(hops):
            lo = m
            for f in range(nf):
                u = frontier[f]
                for q in range(nbr_ptr[u], nbr_ptr[u + 1]):
                    w = nbr[q]
                    if stamp[w] != p:
                        stamp[w] = p
                        if m >= out.shape[0]:
                            grown = np.empty(2 * out.shape[0], dtype=np.int64)
                            grown[:m] = out[:m]
                            out = grown
                        out[m] = w
                        m += 1
            nf = m - lo
            frontier[:nf] = out[lo:m]
        out[start:m] = np.sort(out[start:m])
        out_off[p + 1] = m
    return out_off, out[:m].copy()
