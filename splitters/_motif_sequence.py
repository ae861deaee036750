"""Compiled (numba) encoding of the `motif` splitter: the sequence of eq. 2 and what the
segmentation (`_motif_segments`) reads of it.

`seq_arrays` gives, for the nodes in topological order, every step's labels as dense ids and
their prefix hashes (repeated stretches are found by hash), the cut width before each position
and the edges by position. See `_motif_windows` for the overview of the kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._motif_windows import _argsort2, _mix


@njit(cache=True)
def _label_hashes(ops, src, dst, levels, children, consts):
    """The uint64 labels of eq. 2 of every node (by node id) for steps 0..levels-1."""
    salt_op, salt_par, salt_child, salt_agg, salt_cagg = consts[0], consts[1], consts[2], consts[3], consts[4]
    k_self = consts[5]
    n = ops.shape[0]
    E = src.shape[0]
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
    return hashes


@njit(cache=True)
def _dense_and_prefix(hashes, order, base, base_inv):
    """Per step, in the order `order`: dense label ids ranked by hash value and prefix hashes
    S[i] = sum_{j<i} x_j B^-j; and Bpow [n+1]: B^i (all mod 2^64)."""
    levels, n = hashes.shape
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
    return dense, S, Bpow


@njit(cache=True)
def _cut_widths(src, dst, pos, n):
    """cost [n+1]: producers before position t with a consumer at or after t (0 < t < n)."""
    last = np.full(n, -1, dtype=np.int64)
    for j in range(src.shape[0]):
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
    return cost


@njit(cache=True)
def _edges_by_position(src, dst, pos, n):
    """The edges as (producer, consumer) positions sorted by (consumer, producer): two stable
    counting sorts."""
    E = src.shape[0]
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
    return es, ed


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
    n = ops.shape[0]
    hashes = _label_hashes(ops, src, dst, steps + 1, children, consts)
    pos = np.empty(n, dtype=np.int64)
    for i in range(n):
        pos[order[i]] = i
    dense, S, Bpow = _dense_and_prefix(hashes, order, consts[6], consts[7])
    cost = _cut_widths(src, dst, pos, n)
    es, ed = _edges_by_position(src, dst, pos, n)
    ops_o = np.empty(n, dtype=np.int64)
    for i in range(n):
        ops_o[i] = ops[order[i]]
    return dense, S, Bpow, cost, es, ed, ops_o
