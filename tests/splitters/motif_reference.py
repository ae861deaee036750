"""The `motif` splitter as it was in pure Python/numpy (narbench e73164b), kept verbatim as the
reference that the compiled splitter (`narbench.splitters.motif` + `_motif_kernels`) must equal
cut for cut (tests/test_splitters.py). Only the imports and the class name differ.

`motif`: the paper's motif sampling (section 3.2, eq. 2) and macro graph (section 3.3).

**Node encoding (eq. 2).** Step 0 labels every node with its op type. At step ``k`` a node's
new label is an id for the pattern (its step ``k-1`` label, the multiset of its parents'
step ``k-1`` labels[, the multiset of its children's]), so after ``s`` steps a label encodes
the node's order-``s`` upstream neighbourhood. Ids are 64-bit hashes of the pattern built
from a fixed integer mixer (splitmix64) with a commutative sum over the multiset: they are
deterministic, do not depend on node numbering, Python's hash seed or the other graphs, and
are comparable across graphs. Listing the nodes in the fixed topological order
(`ArchGraph.topological_order`) gives the encoded sequence ``C^s``.

**Motif discovery (repeated subsequences of C^s).** Near-linear anchor segmentation:

1. *Anchor.* For every label occurring at least twice, cutting ``C^s`` before each of its
   occurrences gives the stretches between consecutive occurrences (plus, when it starts /
   ends with a copy, the stretch before the first / from the last occurrence). Stretches are
   grouped by content (length + polynomial prefix hash, O(1) each) and a label is scored by
   the description length it saves, ``sum over groups with m >= 2 copies of (m-1)*len - m``
   (one stored copy instead of ``m``, one reference per copy). This prefers the label that
   occurs once per repeated block: twice per block saves the same symbols but pays twice the
   references; once per two blocks saves less. All labels together have ``n`` occurrences,
   so scoring all of them is one sort, O(n log n). The best label's largest-saving group is
   the motif ``D`` (length ``L``).
2. *Phase.* The anchor fixes the period, not where a block begins. All cuts are shifted by
   one offset in ``-(L-1)..0`` that minimises the mean *cut width* at ``D``'s copies: the
   number of tensors alive across the cut (nodes before it with a consumer after it). Blocks
   start where the fewest tensors are alive (after a residual add: 1; between DARTS cells: 2).
   Anchor occurrences whose cut is wider than ``D``'s widest are dropped (they sit inside a
   variant block, e.g. a projection conv that looks like a first conv). Ties are broken by
   the number of nodes in repeated segments after steps 3-4, then by the offset nearest 0.
3. *Peeling.* A repeated class is a subgraph (op sequence + internal edges, ignoring the
   context that the labels carry) that at least two segments have. A segment longer than a
   class with more copies than its own gets copies of that class split off its front and
   back while they match: the first block after the stem (same subgraph, other labels), a
   block that lost its anchor next to a variant block, the stem before a first variant.
4. *Merging.* Adjacent classes X != Y that nearly always come as XY are one unit (an anchor
   occurring twice per block gives half blocks A B A B; context at the ends can make that
   finer split save slightly more than the whole block).
5. *Recursion.* A non-repeated stretch with room for two blocks (``>= 2L`` nodes) is
   segmented again by steps 1-4 (up to `depth` levels): a second kind of repeated block,
   e.g. the transformer blocks after a CNN backbone.
6. *Step choice.* Steps 1-5 run with the anchors taken from each encoding step ``s, s-1,
   ..., 0`` and the segmentation saving the most with segments compared as subgraphs (the
   score of step 1 with subgraph keys instead of label content) wins; ties keep the larger
   step. This matters for networks with few copies, where context leaves no label repeat
   of a whole block at step ``s`` (a 4-cell DARTS network: cells 0 and 1 read the stem).

Every position is in exactly one segment, so every node is covered; what no repeat explains
(stem, head, variant blocks) stays a part of its own. Parts and the macro graph are built
from the segments by `narbench.splitters._segments.segments_to_partition` (parts overlap by
the edges entering them; macro edges follow the data flow), and
`MotifSplitter.split_with_keys` adds an exact signature per part for embedding caches.
Cost: O((n + E) log n) numpy work plus O(n / L) Python steps per phase tried (at most
`max_phases`) and step; without any repeat (best saving <= 0) the graph is one part.

The sequence, hence the motifs, depends on `ArchGraph.topological_order`, which breaks ties by
node id: graphs should be numbered in execution order (as tracers and the NAS generator do).
With arbitrary numbering the order inside each block can differ from block to block and
fewer repeats are found.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from narbench.graph import ArchGraph
from narbench.splitter import SplitterConfig

from narbench.splitters._segments import SegmentSplitter, checked_order, positions

__all__ = ["ReferenceMotifSplitter"]

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


class ReferenceMotifSplitter(SegmentSplitter):
    """Motif sampling (eq. 2) + repeated-subsequence segmentation; see the module docstring.

    Defaults. ``steps=2``: labels see two hops upstream, enough to tell a block's first conv
    from its inner convs and the two residual adds of a transformer block apart, while a
    difference (the stem feeding the first block, a projection block) changes the labels of
    only the nodes within two hops downstream of it. On the synthetic ResNet, ResNet with
    projection blocks, transformer (coarse and autograd-style) and DARTS graphs of the tests,
    steps 2 and 3 (with or without children) give exactly one part per block; with steps 1
    the transformer needs merging (step 4) and projection blocks lose their extra conv+bn.
    ``children=False``: a parent-only label depends on upstream context alone, so every copy
    of a stacked block keeps identical labels up to the last one (the head never leaks into
    it) and the sequence reads like the forward pass; with children, the last copy is also
    perturbed by the head, so motif ends blur on both sides. The paper's toy example
    (Figure 2) also takes parents as neighbours.
    """

    name = "motif-reference"

    @dataclass(frozen=True)
    class Config(SplitterConfig):
        steps: int = 2  # s in eq. 2: labels encode the order-s upstream neighbourhood
        children: bool = False  # also encode children's labels (see the class docstring)
        depth: int = 2  # recursion levels for a second kind of motif in non-repeated stretches
        max_phases: int = 8  # tied phase offsets evaluated (step 2)

        def __post_init__(self) -> None:
            for name in ("steps", "depth"):
                v = getattr(self, name)
                if int(v) != v or v < 0:
                    raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
            if int(self.max_phases) != self.max_phases or self.max_phases < 1:
                raise ValueError(f"max_phases must be a positive integer, got {self.max_phases!r}")

    def encode(self, graph: ArchGraph, order: np.ndarray | None = None) -> np.ndarray:
        """``C^s`` of `graph`: dense labels of its nodes in topological order."""
        return encode_sequence(graph, self.config.steps, self.config.children, order)

    def segment_bounds(self, graph: ArchGraph, order: np.ndarray) -> np.ndarray:
        n = graph.num_nodes
        if n <= 1:
            return np.array([0, n], dtype=np.int64)
        seq = _Seq(graph, order, self.config.steps, self.config.children)
        # Context (the stem feeding the first block, the cells feeding the next ones) changes
        # the labels of the first copies of a block; with few copies the repeats at step s can
        # be sub-blocks. Every step s..0 is tried and the segmentation whose segments repeat
        # best as subgraphs (context-free) wins; ties keep the larger step.
        best: tuple[int, list[int]] | None = None
        for level in range(seq.steps, -1, -1):
            bounds = self._segment(seq, 0, n, 0, level)
            score = self._saving(seq, bounds)
            if best is None or score > best[0]:
                best = (score, bounds)
        assert best is not None
        return np.asarray(best[1], dtype=np.int64)

    @staticmethod
    def _saving(seq: _Seq, bounds: list[int]) -> int:
        """Description length saved by the segmentation, segments compared as subgraphs."""
        count = Counter(seq.key(s, e) for s, e in zip(bounds[:-1], bounds[1:]))
        lengths = {seq.key(s, e): e - s for s, e in zip(bounds[:-1], bounds[1:])}
        return sum((c - 1) * lengths[k] - c for k, c in count.items() if c >= 2)

    # -- the segmentation ----------------------------------------------------------------------

    def _segment(self, seq: _Seq, a: int, b: int, depth: int, level: int) -> list[int]:
        """Bounds [a, ..., b] of the segmentation of positions a..b-1 (anchors at step `level`)."""
        motif = _best_anchor(seq, a, b, level)
        if motif is None:
            return [a, b]
        L = motif.length
        deltas = np.arange(-(L - 1), 1, dtype=np.int64)
        t = motif.members[:, None] + deltas[None, :]
        valid = (t > a) & (t < b)
        cnt = valid.sum(axis=0)
        tot = np.where(valid, seq.cost[np.clip(t, 0, seq.n)], 0).sum(axis=0)
        mean = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.inf)
        if not np.isfinite(mean).any():
            return [a, b]
        tied = deltas[mean <= mean.min() + 1e-9][::-1][: self.config.max_phases]  # nearest 0 first
        best: tuple[int, list[int], list[bool]] | None = None
        for delta in tied.tolist():
            at = motif.members + delta
            at = at[(at > a) & (at < b)]
            if at.size == 0:
                continue
            width = int(seq.cost[at].max())  # cut width at D's copies
            cuts = motif.occurrences + delta
            cuts = cuts[(cuts > a) & (cuts < b)]
            # an anchor occurrence cutting more tensors than D's boundaries is inside a
            # variant block (e.g. a projection conv that looks like a block's first conv)
            cuts = np.unique(cuts[seq.cost[cuts] <= width]).tolist()
            ref = int(at[0])  # a copy of D at this phase (D's copies lie inside a..b)
            seed = {seq.key(ref, ref + L): (motif.copies, L)}
            bounds, rep = self._refine_all(seq, [a, *cuts, b], seed)
            merged = self._merge(seq, bounds)
            if merged != bounds:
                bounds, rep = self._refine_all(seq, merged, seed)
            covered = sum(e - s for s, e, r in zip(bounds[:-1], bounds[1:], rep) if r)
            if best is None or covered > best[0]:
                best = (covered, bounds, rep)
        if best is None:
            return [a, b]
        _, bounds, rep = best
        if depth >= self.config.depth:
            return bounds
        out = [a]
        for s, e, r in zip(bounds[:-1], bounds[1:], rep):
            if not r and e - s >= max(2 * L, 7):  # room for two copies of another block
                out.extend(self._segment(seq, s, e, depth + 1, level)[1:])
            else:
                out.append(e)
        return out

    @classmethod
    def _refine_all(cls, seq: _Seq, bounds: list[int], seed: dict[bytes, tuple[int, int]]) -> tuple[list[int], list[bool]]:
        rep: list[bool] = []
        for _ in range(3):  # a class found by peeling can peel again (stem + first variant)
            prev = bounds
            bounds, rep = cls._refine(seq, bounds, seed)
            if bounds == prev:
                break
        return bounds, rep

    @staticmethod
    def _merge(seq: _Seq, bounds: list[int], rounds: int = 4) -> list[int]:
        """Join adjacent segments X, Y (X != Y) that always come together into one unit.

        An anchor can occur twice per block (e.g. both LayerNorms of a transformer block look
        alike within s hops), giving half blocks A B A B ...; context at the ends can make that
        finer segmentation save slightly more than the whole block. If nearly every copy of X is
        followed by Y (pair count >= max(#X, #Y) - 1 and >= 2), the unit is XY. Among AB and BA,
        the pair with more copies wins, then the narrower cut before X, then the first seen.
        """
        for _ in range(rounds):
            segs = list(zip(bounds[:-1], bounds[1:]))
            keys = [seq.key(s, e) for s, e in segs]
            count = Counter(keys)
            pairs: dict[tuple[bytes, bytes], list[int]] = {}
            for i in range(len(keys) - 1):
                x, y = keys[i], keys[i + 1]
                if x != y and count[x] >= 2 and count[y] >= 2:
                    pairs.setdefault((x, y), []).append(i)
            best = None
            for rank, ((x, y), at) in enumerate(pairs.items()):
                if len(at) < max(2, max(count[x], count[y]) - 1):
                    continue
                width = float(np.mean([seq.cost[segs[i][0]] for i in at]))
                cand = (-len(at), width, rank, at)
                if best is None or cand[:3] < best[:3]:
                    best = cand
            if best is None:
                break
            drop = {segs[i][1] for i in best[3]}  # the cut inside each XY
            bounds = [t for t in bounds if t not in drop]
        return bounds

    @staticmethod
    def _refine(
        seq: _Seq, bounds: list[int], seed: dict[bytes, tuple[int, int]], max_classes: int = 8
    ) -> tuple[list[int], list[bool]]:
        """Peel copies of repeated segments off the ends of the others; flag repeated segments.

        A *repeated class* is a subgraph (op sequence + internal edges, `_Seq.key`) that at least
        two segments have. A segment longer than a class that has more copies than its own has
        copies of that class split off its front and back while they match (the first block after
        the stem differs from the others only in context: its labels differ, its subgraph does
        not; a variant block that lost the anchor of the next block comes with that block).
        A segment is flagged repeated if at least two final segments have its subgraph.
        """
        segs = list(zip(bounds[:-1], bounds[1:]))
        keys = [seq.key(s, e) for s, e in segs]
        count = Counter(keys)
        length = dict(zip(keys, (e - s for s, e in segs)))
        for k, (c, n) in seed.items():  # D counts as often as the anchor found it
            count[k] = max(count[k], c)
            length[k] = n
        classes = sorted(
            (k for k, c in count.items() if c >= 2 and length[k] >= 2),
            key=lambda k: (-(count[k] - 1) * length[k], -length[k], k),
        )[:max_classes]
        out = [bounds[0]]
        for (s, e), k in zip(segs, keys):
            peel = [c for c in classes if count[c] > count[k] and length[c] < e - s]
            head: list[int] = []
            tail: list[int] = []
            moved = bool(peel)
            while moved:
                moved = False
                for c in peel:
                    L = length[c]
                    if e - s > L and seq.key(s, s + L) == c:
                        s += L
                        head.append(s)
                        moved = True
                        break
                    if e - s > L and seq.key(e - L, e) == c:
                        tail.append(e)
                        e -= L
                        moved = True
                        break
            out.extend(head)
            out.append(e)  # what is left in the middle
            out.extend(reversed(tail))
        final = Counter(seq.key(s, e) for s, e in zip(out[:-1], out[1:]))
        rep = [final[seq.key(s, e)] >= 2 for s, e in zip(out[:-1], out[1:])]
        return out, rep
