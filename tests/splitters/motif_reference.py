"""The `motif` splitter as it was in pure Python/numpy (narbench e73164b), kept verbatim as the
reference that the compiled splitter (`narbench.splitters.motif` + its `_motif_*` kernels) must
equal cut for cut (tests/splitters/test_motif.py). Only the imports, the class name and the split
into two modules differ: the encoding, `_Seq` and `_best_anchor` are in `motif_reference_seq`.

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

from narbench.data.graph import ArchGraph
from narbench.train.splitter import SplitterConfig

from narbench.splitters._segments import SegmentSplitter
from tests.splitters.motif_reference_seq import _best_anchor, _Seq, encode_sequence

__all__ = ["ReferenceMotifSplitter"]


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
