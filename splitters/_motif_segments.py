"""Compiled (numba) steps 1-2 and 5-6 of the `motif` splitter.

Anchors (step 1: `_best_anchor`), phase offsets (step 2, then `_motif_phases.best_phase`),
recursion (step 5) and step choice (step 6): `segment_bounds`, on the arrays `_motif_sequence`
computes (eq. 2 labels, prefix hashes, cut widths, edges by position). See `_motif_windows` for
the overview.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._motif_phases import best_phase, saving
from ._motif_windows import _argsort2, _lower_bound


# -- steps 1-2 and 5-6: anchors, phases, recursion, step choice ---------------------------------
@njit(cache=True)
def _seg_hash(S, Bpow, lo, hi):
    return (S[hi] - S[lo]) * Bpow[lo]


@njit(cache=True)
def _by_label(d):
    """Positions 0..N-1 of `d` ordered by label, ascending within a label (a stable counting
    sort of `d`; labels < N)."""
    N = d.shape[0]
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
    return idx


@njit(cache=True)
def _stretches(S, Bpow, labs, idx):
    """The stretches between consecutive occurrences of one label (`labs`, `idx`: occurrences
    sorted by label, then position): (starts, lengths, labels, content hashes), by label."""
    N = labs.shape[0]
    M = 0
    for i in range(N - 1):
        if labs[i + 1] == labs[i]:
            M += 1
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
    return st, ln, lb, hh


@njit(cache=True)
def _sort_stretches(st, ln, lb, hh):
    """In place, `np.lexsort((hh, ln, lb))`, stable: the stretches already come by label, so
    each label's stretches are sorted by (ln, hh), stably."""
    M = st.shape[0]
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


@njit(cache=True)
def _stretch_groups(ln, lb, hh):
    """Groups of equal (label, length, hash) among the sorted stretches: (group of each
    stretch, first stretch of each group, stretches per group)."""
    M = ln.shape[0]
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
    return gid, g0, m


@njit(cache=True)
def _label_runs(labs, idx):
    """Runs of equal labels in the sorted occurrences: (label, first occurrence, last
    occurrence) of each."""
    N = labs.shape[0]
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
    return run_lab, first_occ, last_occ


@njit(cache=True)
def _group_savings(S, Bpow, a, b, ln, lb, hh, g0, m, run_lab, first_occ, last_occ):
    """What each group saves, (copies - 1) * length - copies, counting as copies also the equal
    stretches just before the label's first and just after its last occurrence (inside a..b);
    `m` (stretches per group) is raised to those copies in place."""
    G = g0.shape[0]
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
    return contrib


@njit(cache=True)
def _best_group(st, lb, g0, contrib):
    """(label, score, group) of the best anchor: the first label with the highest score (the sum
    of its groups' savings; groups are sorted by label), and its group saving most (ties: the
    one that appears first)."""
    G = g0.shape[0]
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
    gsel = best_g0
    for g in range(best_g0 + 1, best_g1):
        if contrib[g] > contrib[gsel] or (contrib[g] == contrib[gsel] and st[g0[g]] < st[g0[gsel]]):
            gsel = g
    return best_lab, best_score, gsel


@njit(cache=True)
def _best_anchor(dense, S, Bpow, a, b):
    """`motif._best_anchor`: (found, occurrences, members, length, copies) of the best anchor
    label of positions a..b-1 (the label saving the most; its group saving the most)."""
    empty = np.zeros(0, dtype=np.int64)
    d = dense[a:b]
    idx = _by_label(d)  # occurrences by label, positions ascending
    labs = d[idx]
    idx = idx + a
    st, ln, lb, hh = _stretches(S, Bpow, labs, idx)
    if st.shape[0] == 0:
        return False, empty, empty, 0, 0
    _sort_stretches(st, ln, lb, hh)
    gid, g0, m = _stretch_groups(ln, lb, hh)
    run_lab, first_occ, last_occ = _label_runs(labs, idx)
    contrib = _group_savings(S, Bpow, a, b, ln, lb, hh, g0, m, run_lab, first_occ, last_occ)
    best_lab, best_score, gsel = _best_group(st, lb, g0, contrib)
    if best_score <= 0:
        return False, empty, empty, 0, 0
    occurrences = idx[labs == best_lab]  # ascending positions of the label
    members = st[gid == gsel]  # the group's stretch starts, in group order
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
