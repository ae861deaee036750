"""Compiled (numba) steps 2-4 of the `motif` splitter for one level: phases, peeling, merging.

Runs, for each tied phase offset, the peeling (`MotifSplitter._refine`, up to three rounds) and
the merging (`_merge`) on window class ids (`_motif_windows`), and keeps the phase covering the
most nodes by repeats (`best_phase`); `saving` scores a segmentation (step 6). See
`_motif_windows` for the overview of the kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._motif_windows import _argsort2, _classes, _ids, _key_less, _mix, _overflowed, _window_id, new_table


@njit(cache=True)
def _class_stats(keys, bounds, K, seed, seed_count, seed_len):
    """Per class id: (segments of it, its length), with the seed class raised to `seed_count`
    segments of `seed_len`."""
    count = np.zeros(K, dtype=np.int64)
    length = np.zeros(K, dtype=np.int64)
    for i in range(keys.shape[0]):
        count[keys[i]] += 1
        length[keys[i]] = bounds[i + 1] - bounds[i]
    count[seed] = max(count[seed], seed_count)
    length[seed] = seed_len
    return count, length


@njit(cache=True)
def _peeling_classes(table, es, ed, ops, n, keys, seed, count, length, max_classes):
    """The classes that may be peeled, at most `max_classes`: count >= 2 and length >= 2, by
    (-(count-1)*length, -length, key bytes), listed in order of first appearance (seed last)."""
    S = keys.shape[0]
    listed = np.zeros(count.shape[0], dtype=np.bool_)
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
    return arr[: min(nc, max_classes)]


@njit(cache=True)
def _peel(table, es, ed, ops, n, s, e, peel, npeel, length, head, tail):
    """Peel copies of the classes `peel[:npeel]` off both ends of segment s..e-1, first class
    first, while one fits: (s, e, cuts pushed to `head`, cuts pushed to `tail`)."""
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
    return s, e, nh, nt


@njit(cache=True)
def _repeated(table, es, ed, ops, n, bounds):
    """Per segment of `bounds`: whether its class occurs at least twice."""
    fk = _ids(table, es, ed, ops, n, bounds)
    final = np.zeros(_classes(table), dtype=np.int64)
    for k in fk:
        final[k] += 1
    rep = np.empty(fk.shape[0], dtype=np.bool_)
    for i in range(fk.shape[0]):
        rep[i] = final[fk[i]] >= 2
    return rep


@njit(cache=True)
def _refine(table, es, ed, ops, n, bounds, seed, seed_count, seed_len, max_classes, scratch):
    """`MotifSplitter._refine` with the seed {seed: (seed_count, seed_len)}. `scratch`: an int64
    buffer of at least 2 * (n + 1) entries (peeled cuts)."""
    S = bounds.shape[0] - 1
    keys = _ids(table, es, ed, ops, n, bounds)
    count, length = _class_stats(keys, bounds, _classes(table), seed, seed_count, seed_len)
    classes = _peeling_classes(table, es, ed, ops, n, keys, seed, count, length, max_classes)
    out = np.empty(bounds.shape[0] + 16, dtype=np.int64)
    no = 0
    out[no] = bounds[0]
    no += 1
    head = scratch[: n + 1]
    tail = scratch[n + 1 :]
    peel = np.empty(classes.shape[0], dtype=np.int64)
    for i in range(S):
        s, e = bounds[i], bounds[i + 1]
        ck = count[keys[i]]
        seglen = e - s
        npeel = 0
        for c in classes:
            if count[c] > ck and length[c] < seglen:
                peel[npeel] = c
                npeel += 1
        s, e, nh, nt = _peel(table, es, ed, ops, n, s, e, peel, npeel, length, head, tail)
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
    return res, _repeated(table, es, ed, ops, n, res)


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
