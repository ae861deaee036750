"""Compiled (numba) inner loops of the `motif` splitter: the class ids of windows (segments).

`narbench.splitters.motif` documents the algorithm. Its kernels run it exactly as the pure
Python splitter did (kept verbatim in tests/splitters/motif_reference.py; tests compare the two
cut for cut): same cuts, same tie-breaks. They are four modules, each importing the ones before:

* `_motif_windows` (this module): shared helpers and the table of window class ids;
* `_motif_phases`: steps 3-4 for one phase, the peeling (`MotifSplitter._refine`, up to three
  rounds) and the merging (`_merge`), the phase loop of step 2 (`best_phase`) and the saving
  (`saving`);
* `_motif_segments`: steps 1-2 and 5-6 (anchors, phases, recursion, step choice):
  `segment_bounds`, what `motif` calls;
* `_motif_sequence` (imports `_motif_windows` only): the encoded sequence itself, `seq_arrays`,
  what `motif` calls first.

Segments are compared as subgraphs: the key of positions lo..hi-1 is the byte string of the
int64 values (hi - lo, number of internal edges, the ops of lo..hi-1, the internal edges'
producers - lo, their consumers - lo), edges in (consumer, producer) order (`_Seq.key` of the
reference). Here every window gets an integer *class id* instead (`_window_id`): windows with
equal keys get equal ids (a content hash, then an exact comparison of ops and edges). Where the
reference orders classes by their key bytes (the last tie-break of `_refine`'s class order)
`_key_less` compares the same byte strings.

A *table* holds the class ids of one call in plain arrays (numba's typed containers cost much
more to compile): window -> id and content hash -> first id (open addressing), the next id with
the same hash and a window of each id. A call whose table fills up is redone with a bigger one
(`new_table`, `_overflowed`).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _mix(x):
    x = np.uint64(x)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@njit(cache=True)
def _lower_bound(arr, v):
    """First index i with arr[i] >= v (`np.searchsorted(arr, v)`)."""
    lo, hi = 0, arr.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if arr[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _argsort2(k1, k2):
    """Stable argsort by (k1, k2) (int64, uint64): a bottom-up merge sort."""
    n = k1.shape[0]
    src = np.arange(n)
    dst = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                a, b = src[i], src[j]
                if k1[b] < k1[a] or (k1[b] == k1[a] and k2[b] < k2[a]):
                    dst[k] = b
                    j += 1
                else:
                    dst[k] = a
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    return src


@njit(cache=True)
def new_table(span):
    """An empty table for about `span` positions (grows by retrying: `overflowed`)."""
    cap = 64
    while cap < 8 * (span + 16):
        cap *= 2
    meta = np.zeros(3, dtype=np.int64)  # classes, windows stored, overflow flag
    wkeys = np.full(cap, -1, dtype=np.int64)  # window code lo * (n + 1) + hi, open addressing
    wvals = np.empty(cap, dtype=np.int64)
    hkeys = np.empty(cap, dtype=np.int64)  # content hash -> first class with it
    hvals = np.full(cap, -1, dtype=np.int64)
    nxt = np.empty(cap, dtype=np.int64)  # next class with the same content hash
    rlo = np.empty(cap, dtype=np.int64)  # a window of each class
    rhi = np.empty(cap, dtype=np.int64)
    return meta, wkeys, wvals, hkeys, hvals, nxt, rlo, rhi


@njit(cache=True)
def _classes(table):
    return table[0][0]


@njit(cache=True)
def _overflowed(table):
    return table[0][2] != 0


@njit(cache=True)
def _edge_range(ed, lo, hi):
    return _lower_bound(ed, lo), _lower_bound(ed, hi)


@njit(cache=True)
def _content_hash(es, ed, ops, lo, hi):
    h = _mix(np.uint64(hi - lo) + np.uint64(0x9E3779B97F4A7C15))
    for p in range(lo, hi):
        h = _mix(h ^ np.uint64(ops[p] + 1))
    a, z = _edge_range(ed, lo, hi)
    for j in range(a, z):
        if es[j] >= lo:
            h = _mix(h ^ (np.uint64(es[j] - lo) * np.uint64(0x100000001B3) + np.uint64(ed[j] - lo) + np.uint64(7)))
    return np.int64(h)


@njit(cache=True)
def _same_window(es, ed, ops, lo1, hi1, lo2, hi2):
    """Equal keys: same length, ops and internal edges (relative, in (consumer, producer) order)."""
    if hi1 - lo1 != hi2 - lo2:
        return False
    for p in range(hi1 - lo1):
        if ops[lo1 + p] != ops[lo2 + p]:
            return False
    a1, z1 = _edge_range(ed, lo1, hi1)
    a2, z2 = _edge_range(ed, lo2, hi2)
    i, j = a1, a2
    while True:
        while i < z1 and es[i] < lo1:
            i += 1
        while j < z2 and es[j] < lo2:
            j += 1
        if i >= z1 or j >= z2:
            return i >= z1 and j >= z2
        if es[i] - lo1 != es[j] - lo2 or ed[i] - lo1 != ed[j] - lo2:
            return False
        i += 1
        j += 1


@njit(cache=True)
def _window_id(table, es, ed, ops, n, lo, hi):
    """The class id of window lo..hi-1. When the table is half full it sets the overflow flag
    and returns 0: the caller's result is then void and it retries with a bigger table."""
    meta, wkeys, wvals, hkeys, hvals, nxt, rlo, rhi = table
    mask = wkeys.shape[0] - 1
    w = lo * (n + 1) + hi
    i = np.int64(_mix(w) & np.uint64(mask))
    while wkeys[i] != -1:
        if wkeys[i] == w:
            return wvals[i]
        i = (i + 1) & mask
    if meta[1] >= (mask + 1) // 2:
        meta[2] = 1
        return 0
    h = _content_hash(es, ed, ops, lo, hi)
    j = np.int64(_mix(h) & np.uint64(mask))
    c = np.int64(-1)
    while hvals[j] != -1:
        if hkeys[j] == h:
            c = hvals[j]
            break
        j = (j + 1) & mask
    last = np.int64(-1)
    while c >= 0:
        if _same_window(es, ed, ops, rlo[c], rhi[c], lo, hi):
            break
        last = c
        c = nxt[c]
    if c < 0:  # a new class
        c = meta[0]
        meta[0] += 1
        rlo[c], rhi[c], nxt[c] = lo, hi, -1
        if last >= 0:
            nxt[last] = c
        else:
            hkeys[j], hvals[j] = h, c
    wkeys[i], wvals[i] = w, c
    meta[1] += 1
    return c


@njit(cache=True)
def _key_values(es, ed, ops, lo, hi):
    """The int64 values whose little-endian bytes make the key of positions lo..hi-1."""
    a, z = _edge_range(ed, lo, hi)
    m = 0
    for j in range(a, z):
        if es[j] >= lo:
            m += 1
    out = np.empty(2 + (hi - lo) + 2 * m, dtype=np.int64)
    out[0] = hi - lo
    out[1] = m
    for p in range(lo, hi):
        out[2 + p - lo] = ops[p]
    k = 2 + hi - lo
    for j in range(a, z):
        if es[j] >= lo:
            out[k] = es[j] - lo
            out[k + m] = ed[j] - lo
            k += 1
    return out


@njit(cache=True)
def _key_less(table, es, ed, ops, c1, c2):
    """bytes(key of class c1) < bytes(key of class c2), as Python compares bytes."""
    rlo, rhi = table[6], table[7]
    x = _key_values(es, ed, ops, rlo[c1], rhi[c1])
    y = _key_values(es, ed, ops, rlo[c2], rhi[c2])
    for i in range(min(x.shape[0], y.shape[0])):
        if x[i] != y[i]:
            ux, uy = np.uint64(x[i]), np.uint64(y[i])
            for b in range(8):
                bx = (ux >> np.uint64(8 * b)) & np.uint64(0xFF)
                by = (uy >> np.uint64(8 * b)) & np.uint64(0xFF)
                if bx != by:
                    return bx < by
    return x.shape[0] < y.shape[0]


@njit(cache=True)
def _ids(table, es, ed, ops, n, bounds):
    out = np.empty(bounds.shape[0] - 1, dtype=np.int64)
    for i in range(out.shape[0]):
        out[i] = _window_id(table, es, ed, ops, n, bounds[i], bounds[i + 1])
    return out

