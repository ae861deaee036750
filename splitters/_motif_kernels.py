"""Compiled (numba) inner loops of the `motif` splitter: steps 3-4 of its segmentation.

`narbench.splitters.motif` documents the algorithm; this module runs, for one phase, the
peeling (`MotifSplitter._refine`, up to three rounds), the merging (`_merge`) and the saving
(`_saving`), and around them steps 1-2 and 5-6 (anchors, phases, recursion, step choice) and
the encoded sequence itself, exactly as the pure Python splitter did (kept verbatim in
tests/motif_reference.py; tests compare the two cut for cut): same cuts, same tie-breaks.

Segments are compared as subgraphs: the key of positions lo..hi-1 is the byte string of the
int64 values (hi - lo, number of internal edges, the ops of lo..hi-1, the internal edges'
producers - lo, their consumers - lo), edges in (consumer, producer) order (`_Seq.key` of the
reference, tests/motif_reference.py). Here every window gets an integer *class id*
instead (`_window_id`): windows with equal keys get equal ids (a content hash, then an exact
comparison of ops and edges). Where the reference orders classes by their key bytes (the last
tie-break of `_refine`'s class order) `_key_less` compares the same byte strings.

A *table* holds the class ids of one call in plain arrays (numba's typed containers cost much
more to compile): window -> id and content hash -> first id (open addressing), the next id with
the same hash and a window of each id. A call whose table fills up is redone with a bigger one.
Entry points: `seq_arrays` (the encoded sequence), `segment_bounds` (steps 1-6), `best_phase`
and `saving`.
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


@njit(cache=True)
def _refine(table, es, ed, ops, n, bounds, seed, seed_count, seed_len, max_classes, scratch):
    """`MotifSplitter._refine` with the seed {seed: (seed_count, seed_len)}. `scratch`: an int64
    buffer of at least 2 * (n + 1) entries (peeled cuts)."""
    S = bounds.shape[0] - 1
    keys = _ids(table, es, ed, ops, n, bounds)
    K = _classes(table)
    count = np.zeros(K, dtype=np.int64)
    length = np.zeros(K, dtype=np.int64)
    for i in range(S):
        count[keys[i]] += 1
        length[keys[i]] = bounds[i + 1] - bounds[i]
    count[seed] = max(count[seed], seed_count)
    length[seed] = seed_len
    # classes: count >= 2 and length >= 2, by (-(count-1)*length, -length, key bytes)
    listed = np.zeros(K, dtype=np.bool_)
    cand = np.empty(S + 1, dtype=np.int64)
    nc = 0
    for i in range(S + 1):
        k = keys[i] if i < S else seed
        if not listed[k]:
            listed[k] = True
            if count[k] >= 2 and length[k] >= 2:
                cand[nc] = k
                nc += 1
    arr = cand[:nc].copy()
    prim = np.empty(nc, dtype=np.int64)
    for i in range(nc):
        k = arr[i]
        prim[i] = -(count[k] - 1) * length[k] * (n + 2) - length[k]
    order = _argsort2(prim, np.zeros(nc, dtype=np.uint64))
    arr = arr[order]
    prim = prim[order]
    # ties in (prim): insertion sort by key bytes within each run
    i = 0
    while i < nc:
        j = i + 1
        while j < nc and prim[j] == prim[i]:
            j += 1
        for u in range(i + 1, j):
            v = u
            while v > i and _key_less(table, es, ed, ops, arr[v], arr[v - 1]):
                arr[v], arr[v - 1] = arr[v - 1], arr[v]
                v -= 1
        i = j
    ncls = min(nc, max_classes)
    classes = arr[:ncls]
    out = np.empty(bounds.shape[0] + 16, dtype=np.int64)
    no = 0
    out[no] = bounds[0]
    no += 1
    head = scratch[: n + 1]
    tail = scratch[n + 1 :]
    peel = np.empty(ncls, dtype=np.int64)
    for i in range(S):
        s, e = bounds[i], bounds[i + 1]
        ck = count[keys[i]]
        seglen = e - s
        npeel = 0
        for c in classes:
            if count[c] > ck and length[c] < seglen:
                peel[npeel] = c
                npeel += 1
        nh = 0
        nt = 0
        moved = npeel > 0
        while moved:
            moved = False
            for q in range(npeel):
                c = peel[q]
                L = length[c]
                if e - s > L and _window_id(table, es, ed, ops, n, s, s + L) == c:
                    s += L
                    head[nh] = s
                    nh += 1
                    moved = True
                    break
                if e - s > L and _window_id(table, es, ed, ops, n, e - L, e) == c:
                    tail[nt] = e
                    nt += 1
                    e -= L
                    moved = True
                    break
        if no + nh + nt + 1 > out.shape[0]:
            grown = np.empty(2 * out.shape[0] + nh + nt + 1, dtype=np.int64)
            grown[:no] = out[:no]
            out = grown
        for q in range(nh):
            out[no] = head[q]
            no += 1
        out[no] = e
        no += 1
        for q in range(nt - 1, -1, -1):
            out[no] = tail[q]
            no += 1
    res = out[:no].copy()
    fk = _ids(table, es, ed, ops, n, res)
    final = np.zeros(_classes(table), dtype=np.int64)
    for k in fk:
        final[k] += 1
    rep = np.empty(fk.shape[0], dtype=np.bool_)
    for i in range(fk.shape[0]):
        rep[i] = final[fk[i]] >= 2
    return res, rep


@njit(cache=True)
def _same_bounds(x, y):
    if x.shape[0] != y.shape[0]:
        return False
    for i in range(x.shape[0]):
        if x[i] != y[i]:
            return False
    return True


@njit(cache=True)
def _refine_all(table, es, ed, ops, n, bounds, seed, seed_count, seed_len, max_classes, scratch):
    rep = np.zeros(0, dtype=np.bool_)
    for _ in range(3):  # a class found by peeling can peel again (stem + first variant)
        prev = bounds
        bounds, rep = _refine(table, es, ed, ops, n, bounds, seed, seed_count, seed_len, max_classes, scratch)
        if _same_bounds(bounds, prev):
            break
    return bounds, rep


@njit(cache=True)
def _merge(table, es, ed, ops, n, cost, bounds, rounds):
    """`MotifSplitter._merge`."""
    for _ in range(rounds):
        S = bounds.shape[0] - 1
        keys = _ids(table, es, ed, ops, n, bounds)
        K = _classes(table)
        count = np.zeros(K, dtype=np.int64)
        for k in keys:
            count[k] += 1
        # adjacent pairs (X, Y), numbered in order of first appearance (a small hash map)
        cap = 16
        while cap < 2 * (S + 1):
            cap *= 2
        mask = cap - 1
        slot_key = np.full(cap, -1, dtype=np.int64)
        slot_val = np.empty(cap, dtype=np.int64)
        npairs = 0
        pair_x = np.empty(max(S, 1), dtype=np.int64)
        pair_y = np.empty(max(S, 1), dtype=np.int64)
        pair_n = np.zeros(max(S, 1), dtype=np.int64)
        pair_w = np.zeros(max(S, 1), dtype=np.int64)  # sum of cut widths before X
        pair_of = np.full(max(S - 1, 0), -1, dtype=np.int64)
        for i in range(S - 1):
            x, y = keys[i], keys[i + 1]
            if x != y and count[x] >= 2 and count[y] >= 2:
                code = x * K + y
                q = np.int64(_mix(code) & np.uint64(mask))
                while slot_key[q] != -1 and slot_key[q] != code:
                    q = (q + 1) & mask
                if slot_key[q] == -1:
                    slot_key[q], slot_val[q] = code, npairs
                    pair_x[npairs], pair_y[npairs] = x, y
                    npairs += 1
                p = slot_val[q]
                pair_n[p] += 1
                pair_w[p] += cost[bounds[i]]
                pair_of[i] = p
        best = -1
        best_n = 0
        best_w = 0.0
        for p in range(npairs):
            m = pair_n[p]
            if m < max(2, max(count[pair_x[p]], count[pair_y[p]]) - 1):
                continue
            w = float(pair_w[p]) / m
            if best < 0 or m > best_n or (m == best_n and w < best_w):
                best, best_n, best_w = p, m, w
        if best < 0:
            break
        keep = np.ones(bounds.shape[0], dtype=np.bool_)
        kept = bounds.shape[0]
        for i in range(S - 1):
            if pair_of[i] == best:
                keep[i + 1] = False  # the cut inside each XY
                kept -= 1
        merged = np.empty(kept, dtype=np.int64)
        k = 0
        for i in range(bounds.shape[0]):
            if keep[i]:
                merged[k] = bounds[i]
                k += 1
        bounds = merged
    return bounds


@njit(cache=True)
def _phase(table, es, ed, ops, n, cost, a, b, cuts, ref, L, copies, max_classes, scratch):
    """One phase of `MotifSplitter._segment`: (bounds, repeated flags, nodes covered by repeats)."""
    bounds = np.empty(cuts.shape[0] + 2, dtype=np.int64)
    bounds[0] = a
    bounds[1:-1] = cuts
    bounds[-1] = b
    seed = _window_id(table, es, ed, ops, n, ref, ref + L)
    bounds, rep = _refine_all(table, es, ed, ops, n, bounds, seed, copies, L, max_classes, scratch)
    merged = _merge(table, es, ed, ops, n, cost, bounds, 4)
    if not _same_bounds(merged, bounds):
        bounds, rep = _refine_all(table, es, ed, ops, n, merged, seed, copies, L, max_classes, scratch)
    covered = 0
    for i in range(rep.shape[0]):
        if rep[i]:
            covered += bounds[i + 1] - bounds[i]
    return bounds, rep, covered


@njit(cache=True)
def _best_phase(table, es, ed, ops, cost, a, b, members, occurrences, tied, L, copies, max_classes):
    n = ops.shape[0]
    scratch = np.empty(2 * (n + 1), dtype=np.int64)
    best_bounds = np.zeros(0, dtype=np.int64)
    best_rep = np.zeros(0, dtype=np.bool_)
    best_cov = -1
    at = np.empty(members.shape[0], dtype=np.int64)
    cuts = np.empty(occurrences.shape[0], dtype=np.int64)
    for delta in tied:
        nat = 0
        width = np.int64(0)
        for t in members:
            if a < t + delta < b:
                at[nat] = t + delta
                width = cost[t + delta] if nat == 0 else max(width, cost[t + delta])  # cut width at D's copies
                nat += 1
        if nat == 0:
            continue
        # an anchor occurrence cutting more tensors than D's boundaries is inside a variant block
        nc = 0
        for t in occurrences:  # ascending
            c = t + delta
            if a < c < b and cost[c] <= width and (nc == 0 or cuts[nc - 1] != c):
                cuts[nc] = c
                nc += 1
        bounds, rep, covered = _phase(table, es, ed, ops, n, cost, a, b, cuts[:nc].copy(), at[0], L, copies,
                                      max_classes, scratch)
        if best_cov < 0 or covered > best_cov:
            best_bounds, best_rep, best_cov = bounds, rep, covered
    return best_bounds, best_rep


@njit(cache=True)
def best_phase(es, ed, ops, cost, a, b, members, occurrences, tied, L, copies, max_classes):
    """The phase loop of `MotifSplitter._segment` over the tied offsets `tied` (in order):
    (bounds, repeated flags) of the phase covering the most nodes by repeats (the first on
    ties), or empty arrays when no offset leaves a copy of D inside a..b."""
    span = b - a
    while True:
        table = new_table(span)
        bounds, rep = _best_phase(table, es, ed, ops, cost, a, b, members, occurrences, tied, L, copies,
                                  max_classes)
        if not _overflowed(table):
            return bounds, rep
        span *= 4


@njit(cache=True)
def saving(es, ed, ops, bounds):
    """`MotifSplitter._saving`: description length saved, segments compared as subgraphs."""
    n = ops.shape[0]
    span = n
    while True:
        table = new_table(span)
        keys = _ids(table, es, ed, ops, n, bounds)
        if not _overflowed(table):
            break
        span *= 4
    K = _classes(table)
    count = np.zeros(K, dtype=np.int64)
    length = np.zeros(K, dtype=np.int64)
    for i in range(keys.shape[0]):
        count[keys[i]] += 1
        length[keys[i]] = bounds[i + 1] - bounds[i]
    total = 0
    for k in range(K):
        c = count[k]
        if c >= 2:
            total += (c - 1) * length[k] - c
    return total


# -- steps 1-2 and 5-6: anchors, phases, recursion, step choice ---------------------------------
@njit(cache=True)
def _seg_hash(S, Bpow, lo, hi):
    return (S[hi] - S[lo]) * Bpow[lo]


@njit(cache=True)
def _best_anchor(dense, S, Bpow, a, b):
    """`motif._best_anchor`: (found, occurrences, members, length, copies) of the best anchor
    label of positions a..b-1 (the label saving the most; its group saving the most)."""
    empty = np.zeros(0, dtype=np.int64)
    d = dense[a:b]
    N = d.shape[0]
    # occurrences by label, positions ascending (a stable sort of d: counting sort, labels < n)
    K = 0
    for i in range(N):
        K = max(K, d[i] + 1)
    start = np.zeros(K + 1, dtype=np.int64)
    for i in range(N):
        start[d[i] + 1] += 1
    for k in range(K):
        start[k + 1] += start[k]
    idx = np.empty(N, dtype=np.int64)
    fill = start[:-1].copy()
    for i in range(N):
        idx[fill[d[i]]] = i
        fill[d[i]] += 1
    labs = d[idx]
    idx = idx + a
    M = 0
    for i in range(N - 1):
        if labs[i + 1] == labs[i]:
            M += 1
    if M == 0:
        return False, empty, empty, 0, 0
    st = np.empty(M, dtype=np.int64)
    ln = np.empty(M, dtype=np.int64)
    lb = np.empty(M, dtype=np.int64)
    hh = np.empty(M, dtype=np.uint64)
    j = 0
    for i in range(N - 1):
        if labs[i + 1] == labs[i]:
            st[j] = idx[i]
            ln[j] = idx[i + 1] - idx[i]
            lb[j] = labs[i + 1]
            hh[j] = _seg_hash(S, Bpow, idx[i], idx[i + 1])
            j += 1
    # np.lexsort((hh, ln, lb)), stable: the stretches already come by label, so sort each
    # label's stretches by (ln, hh), stably
    i = 0
    while i < M:
        e = i + 1
        while e < M and lb[e] == lb[i]:
            e += 1
        if e - i > 1:
            if e - i <= 16:  # insertion sort (stable)
                for u in range(i + 1, e):
                    v = u
                    while v > i and (ln[v] < ln[v - 1] or (ln[v] == ln[v - 1] and hh[v] < hh[v - 1])):
                        st[v], st[v - 1] = st[v - 1], st[v]
                        ln[v], ln[v - 1] = ln[v - 1], ln[v]
                        hh[v], hh[v - 1] = hh[v - 1], hh[v]
                        v -= 1
            else:
                o = _argsort2(ln[i:e], hh[i:e])
                st[i:e] = st[i:e][o]
                ln[i:e] = ln[i:e][o]
                hh[i:e] = hh[i:e][o]
        i = e
    gid = np.empty(M, dtype=np.int64)
    G = 0
    for i in range(M):
        if i == 0 or lb[i] != lb[i - 1] or ln[i] != ln[i - 1] or hh[i] != hh[i - 1]:
            G += 1
        gid[i] = G - 1
    g0 = np.empty(G, dtype=np.int64)
    m = np.zeros(G, dtype=np.int64)
    for i in range(M):
        if m[gid[i]] == 0:
            g0[gid[i]] = i
        m[gid[i]] += 1
    # runs of equal labels in the sorted occurrences: first / last occurrence per label
    R = 1
    for i in range(1, N):
        if labs[i] != labs[i - 1]:
            R += 1
    run_lab = np.empty(R, dtype=np.int64)
    first_occ = np.empty(R, dtype=np.int64)
    last_occ = np.empty(R, dtype=np.int64)
    r = 0
    run_lab[0], first_occ[0] = labs[0], idx[0]
    for i in range(1, N):
        if labs[i] != labs[i - 1]:
            last_occ[r] = idx[i - 1]
            r += 1
            run_lab[r], first_occ[r] = labs[i], idx[i]
    last_occ[R - 1] = idx[N - 1]
    contrib = np.zeros(G, dtype=np.int64)
    for g in range(G):
        L = ln[g0[g]]
        h = hh[g0[g]]
        rr = _lower_bound(run_lab, lb[g0[g]])
        lo, hi = first_occ[rr] - L, last_occ[rr] + L
        if lo >= a and _seg_hash(S, Bpow, lo, first_occ[rr]) == h:
            m[g] += 1
        if hi <= b and _seg_hash(S, Bpow, last_occ[rr], hi) == h:
            m[g] += 1
        if m[g] >= 2:
            contrib[g] = (m[g] - 1) * L - m[g]
    # score per label (groups are sorted by label): the first label with the highest score
    best_lab = -1
    best_score = 0
    best_g0 = 0
    best_g1 = 0
    g = 0
    while g < G:
        e = g
        score = 0
        while e < G and lb[g0[e]] == lb[g0[g]]:
            score += contrib[e]
            e += 1
        if best_lab < 0 or score > best_score:
            best_lab, best_score, best_g0, best_g1 = lb[g0[g]], score, g, e
        g = e
    if best_score <= 0:
        return False, empty, empty, 0, 0
    # D: the group of that label saving most; ties: the one that appears first
    gsel = best_g0
    for g in range(best_g0 + 1, best_g1):
        if contrib[g] > contrib[gsel] or (contrib[g] == contrib[gsel] and st[g0[g]] < st[g0[gsel]]):
            gsel = g
    n_occ = 0
    for i in range(N):
        if labs[i] == best_lab:
            n_occ += 1
    occurrences = np.empty(n_occ, dtype=np.int64)
    k = 0
    for i in range(N):
        if labs[i] == best_lab:
            occurrences[k] = idx[i]
            k += 1
    cnt = 0
    for i in range(M):
        if gid[i] == gsel:
            cnt += 1
    members = np.empty(cnt, dtype=np.int64)
    k = 0
    for i in range(M):
        if gid[i] == gsel:
            members[k] = st[i]
            k += 1
    return True, occurrences, members, ln[g0[gsel]], m[gsel]


@njit(cache=True)
def _pair(a, b):
    out = np.empty(2, dtype=np.int64)
    out[0] = a
    out[1] = b
    return out


@njit(cache=True)
def _segment_one(dense, S, Bpow, cost, es, ed, ops, a, b, max_phases, max_classes):
    """One level of `MotifSplitter._segment` for positions a..b-1, without the recursion:
    (found, bounds, repeated flags, L)."""
    found, occurrences, members, L, copies = _best_anchor(dense, S, Bpow, a, b)
    no = np.zeros(0, dtype=np.bool_)
    if not found:
        return False, _pair(a, b), no, 0
    n = ops.shape[0]
    # step 2: offsets -(L-1)..0 by the mean cut width at D's copies; the tied ones, nearest 0 first
    mean = np.empty(L, dtype=np.float64)
    any_finite = False
    for j in range(L):
        delta = j - (L - 1)
        cnt = 0
        tot = 0
        for t0 in members:
            t = t0 + delta
            if t > a and t < b:
                cnt += 1
                tot += cost[min(max(t, 0), n)]
        if cnt > 0:
            mean[j] = tot / cnt
            any_finite = True
        else:
            mean[j] = np.inf
    if not any_finite:
        return False, _pair(a, b), no, 0
    limit = mean.min() + 1e-9
    nt = 0
    tied = np.empty(min(L, max_phases), dtype=np.int64)
    for j in range(L - 1, -1, -1):
        if mean[j] <= limit and nt < max_phases:
            tied[nt] = j - (L - 1)
            nt += 1
    bounds, rep = best_phase(es, ed, ops, cost, a, b, members, occurrences, tied[:nt].copy(), L, copies, max_classes)
    if bounds.shape[0] == 0:
        return False, _pair(a, b), no, 0
    return True, bounds, rep, L


@njit(cache=True)
def _push(stack, top, kind, s, e, depth):
    if top >= stack.shape[0]:
        grown = np.empty((2 * stack.shape[0], 4), dtype=np.int64)
        grown[:top] = stack[:top]
        stack = grown
    stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = kind, s, e, depth
    return stack, top + 1


@njit(cache=True)
def _segment(dense, S, Bpow, cost, es, ed, ops, a, b, max_depth, max_phases, max_classes):
    """`MotifSplitter._segment` from depth 0: bounds [a, ..., b] of positions a..b-1.

    The recursion (step 5: non-repeated stretches with room for two blocks are segmented
    again, up to `max_depth` levels) runs on an explicit stack, left to right."""
    out = np.empty(b - a + 2, dtype=np.int64)  # bounds are distinct positions a..b
    no = 0
    out[no] = a
    no += 1
    stack = np.empty((16, 4), dtype=np.int64)  # (segment it: 1 / emit its end: 0, start, end, depth)
    stack, top = _push(stack, 0, 1, a, b, 0)
    while top > 0:
        top -= 1
        kind, s, e, depth = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if kind == 0:
            out[no] = e
            no += 1
            continue
        found, bounds, rep, L = _segment_one(dense, S, Bpow, cost, es, ed, ops, s, e, max_phases, max_classes)
        if not found:
            out[no] = e
            no += 1
            continue
        if depth >= max_depth:
            for q in range(1, bounds.shape[0]):
                out[no] = bounds[q]
                no += 1
            continue
        for i in range(bounds.shape[0] - 2, -1, -1):  # pushed right to left: popped left to right
            s2, e2 = bounds[i], bounds[i + 1]
            if not rep[i] and e2 - s2 >= max(2 * L, 7):  # room for two copies of another block
                stack, top = _push(stack, top, 1, s2, e2, depth + 1)
            else:
                stack, top = _push(stack, top, 0, s2, e2, depth + 1)
    return out[:no].copy()


@njit(cache=True)
def segment_bounds(dense, S, Bpow, cost, es, ed, ops, max_depth, max_phases, max_classes):
    """`MotifSplitter.segment_bounds` (step 6): the segmentation of every step s..0 (rows of
    `dense`, `S`, largest step last), the one saving the most winning; ties keep the larger step."""
    n = ops.shape[0]
    best = _pair(0, n)
    best_score = 0
    first = True
    for level in range(dense.shape[0] - 1, -1, -1):
        bounds = _segment(dense[level], S[level], Bpow, cost, es, ed, ops, 0, n, max_depth, max_phases, max_classes)
        score = saving(es, ed, ops, bounds)
        if first or score > best_score:
            best, best_score, first = bounds, score, False
    return best


# -- the encoded sequence (eq. 2) and what the segmentation queries ------------------------------
@njit(cache=True)
def seq_arrays(ops, src, dst, order, steps, children, consts):
    """Everything the segmentation reads, for nodes listed in `order` (positions):

    dense [steps+1, n]: per step, the labels of eq. 2 as dense ids ranked by hash value
        (`motif.encode_sequence` of each step); S [steps+1, n+1]: prefix hashes of each step's
        label sequence, S[i] = sum_{j<i} x_j B^-j (mod 2^64); Bpow [n+1]: B^i; cost [n+1]: cut
        width before each position; es, ed: edges as (producer, consumer) positions sorted by
        (consumer, producer); ops of the positions.
    `consts`: uint64 (salt op, salt parent, salt child, salt aggregate, salt child aggregate,
    self factor, B, B^-1), as `motif.encode_levels` uses them.
    """
    salt_op, salt_par, salt_child, salt_agg, salt_cagg = consts[0], consts[1], consts[2], consts[3], consts[4]
    k_self, base, base_inv = consts[5], consts[6], consts[7]
    n = ops.shape[0]
    E = src.shape[0]
    levels = steps + 1
    hashes = np.empty((levels, n), dtype=np.uint64)
    for i in range(n):
        hashes[0, i] = _mix(np.uint64(ops[i]) ^ salt_op)
    par = np.empty(n, dtype=np.uint64)
    chi = np.empty(n, dtype=np.uint64)
    for lv in range(1, levels):
        h = hashes[lv - 1]
        par[:] = 0
        for j in range(E):  # multiset of parents: commutative sum
            par[dst[j]] += _mix(h[src[j]] ^ salt_par)
        if children:
            chi[:] = 0
            for j in range(E):
                chi[src[j]] += _mix(h[dst[j]] ^ salt_child)
        for i in range(n):
            new = _mix(h[i] * k_self + _mix(par[i] + salt_agg))
            if children:
                new = _mix(new ^ _mix(chi[i] + salt_cagg))
            hashes[lv, i] = new
    pos = np.empty(n, dtype=np.int64)
    for i in range(n):
        pos[order[i]] = i
    inv_pow = np.empty(n, dtype=np.uint64)
    Bpow = np.empty(n + 1, dtype=np.uint64)
    Bpow[0] = 1
    for i in range(n):
        inv_pow[i] = np.uint64(1) if i == 0 else inv_pow[i - 1] * base_inv
        Bpow[i + 1] = Bpow[i] * base
    dense = np.empty((levels, n), dtype=np.int64)
    S = np.empty((levels, n + 1), dtype=np.uint64)
    x = np.empty(n, dtype=np.uint64)
    for lv in range(levels):
        for i in range(n):
            x[i] = hashes[lv, order[i]]
        srt = _argsort2(np.zeros(n, dtype=np.int64), x)
        rank = -1
        for q in range(n):
            if q == 0 or x[srt[q]] != x[srt[q - 1]]:
                rank += 1
            dense[lv, srt[q]] = rank
        S[lv, 0] = 0
        for i in range(n):
            S[lv, i + 1] = S[lv, i] + x[i] * inv_pow[i]
    # cut width: cost[t] = producers before t with a consumer at or after t (0 < t < n)
    last = np.full(n, -1, dtype=np.int64)
    for j in range(E):
        ps, pd = pos[src[j]], pos[dst[j]]
        if pd > last[ps]:
            last[ps] = pd
    diff = np.zeros(n + 2, dtype=np.int64)
    for i in range(n):
        if last[i] > i:
            diff[i + 1] += 1
            diff[last[i] + 1] -= 1
    cost = np.empty(n + 1, dtype=np.int64)
    acc = 0
    for i in range(n + 1):
        acc += diff[i]
        cost[i] = acc
    # edges by (consumer position, producer position): two stable counting sorts
    cnt = np.zeros(n + 1, dtype=np.int64)
    for j in range(E):
        cnt[pos[src[j]] + 1] += 1
    for i in range(n):
        cnt[i + 1] += cnt[i]
    by_ps = np.empty(E, dtype=np.int64)
    for j in range(E):
        p = pos[src[j]]
        by_ps[cnt[p]] = j
        cnt[p] += 1
    cnt[:] = 0
    for j in range(E):
        cnt[pos[dst[j]] + 1] += 1
    for i in range(n):
        cnt[i + 1] += cnt[i]
    es = np.empty(E, dtype=np.int64)
    ed = np.empty(E, dtype=np.int64)
    for q in range(E):
        j = by_ps[q]
        p = pos[dst[j]]
        es[cnt[p]] = pos[src[j]]
        ed[cnt[p]] = p
        cnt[p] += 1
    ops_o = np.empty(n, dtype=np.int64)
    for i in range(n):
        ops_o[i] = ops[order[i]]
    return dense, S, Bpow, cost, es, ed, ops_o
