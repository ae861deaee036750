"""The reference `motif` splitter (`motif_reference`), first part: eq. 2 encoding, `_Seq`, anchors.

Verbatim from narbench e73164b like `motif_reference`, which documents the algorithm; split off
it only to keep each file short.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.splitters._segments import checked_order, positions


_U64 = np.uint64
_M1, _M2 = _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB)
_SALT_OP, _SALT_PAR, _SALT_CHILD = _U64(0x9E3779B97F4A7C15), _U64(0xD6E8FEB86659FD93), _U64(0xA0761D6478BD642F)
_SALT_AGG, _SALT_CAGG, _K_SELF = _U64(0xE7037ED1A0B428DB), _U64(0x8EBC6AF09C88C6E3), _U64(0x589965CC75374CC3)
_BASE = 0x1D8E4E27C47D124F  # odd: invertible mod 2^64
_BASE_INV = pow(_BASE, -1, 1 << 64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wrapping arithmetic, no Python hash involved)."""
    x = np.array(x, dtype=_U64, copy=True)
    x ^= x >> _U64(30)
    x *= _M1
    x ^= x >> _U64(27)
    x *= _M2
    x ^= x >> _U64(31)
    return x


def encode_nodes(graph: ArchGraph, steps: int = 2, children: bool = False) -> np.ndarray:
    """Eq. 2: the step-`steps` neighbour-pattern label (uint64) of every node, by node id."""
    return encode_levels(graph, steps, children)[-1]


def encode_levels(graph: ArchGraph, steps: int = 2, children: bool = False) -> list[np.ndarray]:
    """The labels of every step 0..`steps` of eq. 2 (uint64 per node, by node id)."""
    n = graph.num_nodes
    src, dst = graph.edges
    h = _mix(graph.ops.astype(_U64) ^ _SALT_OP)
    levels = [h]
    for _ in range(int(steps)):
        par = np.zeros(n, dtype=_U64)
        np.add.at(par, dst, _mix(h ^ _SALT_PAR)[src])  # multiset of parents: commutative sum
        new = _mix(h * _K_SELF + _mix(par + _SALT_AGG))
        if children:
            chi = np.zeros(n, dtype=_U64)
            np.add.at(chi, src, _mix(h ^ _SALT_CHILD)[dst])
            new = _mix(new ^ _mix(chi + _SALT_CAGG))
        h = new
        levels.append(h)
    return levels


def encode_sequence(
    graph: ArchGraph, steps: int = 2, children: bool = False, order: np.ndarray | None = None
) -> np.ndarray:
    """``C^s``: dense label ids (ranked by hash value) of the nodes in topological order."""
    if order is None:
        order = checked_order(graph)
    _, dense = np.unique(encode_nodes(graph, steps, children)[order], return_inverse=True)
    return dense.reshape(-1).astype(np.int64)


class _Seq:
    """The encoded sequence of one graph with the O(1) queries the segmentation needs."""

    def __init__(self, graph: ArchGraph, order: np.ndarray, steps: int, children: bool) -> None:
        n = self.n = graph.num_nodes
        self.steps = int(steps)
        self._hashes = [h[order] for h in encode_levels(graph, steps, children)]
        self._levels: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # prefix hash: S[i] = sum_{j<i} x_j B^-j, hash(l, r) = (S[r] - S[l]) B^l (mod 2^64)
        inv_pow = np.full(n, _BASE_INV, dtype=_U64)
        inv_pow[0] = 1
        self._inv_pow = np.cumprod(inv_pow, dtype=_U64)  # wraps mod 2^64
        bpow = np.full(n + 1, _BASE, dtype=_U64)
        bpow[0] = 1
        self.Bpow = np.cumprod(bpow, dtype=_U64)
        pos = positions(order)
        src, dst = graph.edges
        ps, pd = pos[src], pos[dst]
        # cut width: cost[t] = producers before t with a consumer at or after t (0 < t < n)
        last = np.full(n, -1, dtype=np.int64)
        np.maximum.at(last, ps, pd)
        has = last > np.arange(n)
        diff = np.zeros(n + 2, dtype=np.int64)
        np.add.at(diff, np.flatnonzero(has) + 1, 1)
        np.add.at(diff, last[has] + 1, -1)
        self.cost = np.cumsum(diff)[: n + 1]
        # edges by (consumer position, producer position) for window subgraph signatures
        e = np.lexsort((ps, pd))
        self.es, self.ed = ps[e], pd[e]
        self.ops = graph.ops[order]
        self._keys: dict[tuple[int, int], bytes] = {}

    def level(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(dense label ids ranked by hash, prefix hashes S) of the step-k sequence."""
        lv = self._levels.get(k)
        if lv is None:
            x = self._hashes[k]
            _, dense = np.unique(x, return_inverse=True)
            S = np.zeros(self.n + 1, dtype=_U64)
            S[1:] = np.cumsum(x * self._inv_pow, dtype=_U64)
            lv = self._levels[k] = (dense.reshape(-1).astype(np.int64), S)
        return lv

    def seg_hash(self, S: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Content hashes of the stretches lo..hi-1 (arrays) of the sequence with prefixes S."""
        return (S[hi] - S[lo]) * self.Bpow[lo]

    def key(self, lo: int, hi: int) -> bytes:
        """The subgraph of positions lo..hi-1: op sequence and internal edges, relative."""
        k = self._keys.get((lo, hi))
        if k is None:
            a, z = np.searchsorted(self.ed, [lo, hi])
            es, ed = self.es[a:z], self.ed[a:z]
            inside = es >= lo
            k = (
                np.array([hi - lo, int(inside.sum())], dtype=np.int64).tobytes()
                + self.ops[lo:hi].tobytes()
                + (es[inside] - lo).tobytes()
                + (ed[inside] - lo).tobytes()
            )
            self._keys[(lo, hi)] = k
        return k


@dataclass(frozen=True)
class _Motif:
    label: int
    occurrences: np.ndarray  # positions of the anchor label
    members: np.ndarray  # starts of D's copies between anchors (anchor-relative)
    length: int
    copies: int  # copies counted, including one before the first / after the last anchor


def _best_anchor(seq: _Seq, a: int, b: int, level: int) -> _Motif | None:
    dense, S = seq.level(level)
    d = dense[a:b]
    idx = np.argsort(d, kind="stable")
    labs = d[idx]
    idx = idx + a
    same = labs[1:] == labs[:-1]
    if not same.any():
        return None
    st, en, lb = idx[:-1][same], idx[1:][same], labs[1:][same]
    ln = en - st
    hh = seq.seg_hash(S, st, en)
    o = np.lexsort((hh, ln, lb))  # stable: within a group, positions ascend
    st, ln, lb, hh = st[o], ln[o], lb[o], hh[o]
    first = np.ones(st.shape[0], dtype=bool)
    first[1:] = (lb[1:] != lb[:-1]) | (ln[1:] != ln[:-1]) | (hh[1:] != hh[:-1])
    gid = np.cumsum(first) - 1
    g0 = np.flatnonzero(first)
    m = np.bincount(gid)
    g_len, g_lab, g_hash = ln[g0], lb[g0], hh[g0]
    # the stretches before the first / from the last occurrence count as copies when they
    # end / start with one (else a label occurring once per block would lose a whole block
    # at each end against one occurring twice per block)
    run = np.flatnonzero(np.concatenate([[True], labs[1:] != labs[:-1]]))
    run_lab, first_occ = labs[run], idx[run]
    last_occ = idx[np.concatenate([run[1:] - 1, [labs.shape[0] - 1]])]
    r = np.searchsorted(run_lab, g_lab)
    lo, hi = first_occ[r] - g_len, last_occ[r] + g_len
    ok_head, ok_tail = lo >= a, hi <= b
    ok_head[ok_head] = seq.seg_hash(S, lo[ok_head], first_occ[r][ok_head]) == g_hash[ok_head]
    ok_tail[ok_tail] = seq.seg_hash(S, last_occ[r][ok_tail], hi[ok_tail]) == g_hash[ok_tail]
    m = m + ok_head + ok_tail
    contrib = np.where(m >= 2, (m - 1) * g_len - m, 0)
    ulab, inv = np.unique(g_lab, return_inverse=True)
    score = np.zeros(ulab.shape[0], dtype=np.int64)
    np.add.at(score, inv.reshape(-1), contrib)
    best = int(np.argmax(score))  # ties: the smallest label id (hash order), numbering-free
    if score[best] <= 0:
        return None
    label = int(ulab[best])
    groups = np.flatnonzero(g_lab == label)
    # D: the group saving most; ties: the one that appears first
    gsel = groups[np.lexsort((st[g0[groups]], -contrib[groups]))[0]]
    return _Motif(
        label=label,
        occurrences=idx[labs == label],
        members=st[gid == gsel],
        length=int(g_len[gsel]),
        copies=int(m[gsel]),
    )
