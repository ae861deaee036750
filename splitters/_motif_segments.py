"""Compiled (numba) steps 1-2 and 5-6 of the `motif` splitter and its encoded sequence.

Anchors (step 1), phase offsets (step 2, then `_motif_phases.best_phase`), recursion (step 5)
and step choice (step 6): `segment_bounds`; the arrays they read (eq. 2 labels, prefix hashes,
cut widths, edges by position): `seq_arrays`. See `_motif_windows` for the overview.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._motif_phases import best_phase, saving
from ._motif_windows import _argsort2, _lower_bound, _mix


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
