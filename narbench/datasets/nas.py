"""The NAS dataset: 30,000 DARTS-space networks in 10 edit-distance clusters.

This follows section 4.1, section 4.7 and appendix A.4 of the NAR paper. The exact procedure:

**Search space (appendix A.4).** A *genotype* is one DARTS cell: 4 ADD nodes ``ADD_0..ADD_3``;
``ADD_i`` takes exactly 2 *distinct* inputs chosen among ``{c_{k-2}, c_{k-1}, ADD_0..ADD_{i-1}}``
and every input edge carries an operation, one of the 7 candidates ``skip_connect``,
``max_pool_3x3``, ``avg_pool_3x3``, ``sep_conv_3x3``, ``sep_conv_5x5``, ``dil_conv_3x3``,
``dil_conv_5x5``. A genotype is 8 ``(input, op)`` pairs, pairs ``2i`` and ``2i+1`` feeding
``ADD_i``; input codes are ``0 = c_{k-2}``, ``1 = c_{k-1}``, ``2 + j = ADD_j``; op codes index the
7 candidates in that order. The *canonical* genotype sorts the two pairs of every ADD by
``(input, op)``, so swapping an ADD's two inputs gives the same genotype.

**Network graph.** Unlike DARTS, operations are nodes (input -> op -> ADD). A network of ``n``
cells is: node 0 a ``stem_conv``; then for each cell ``k = 0..n-1`` 13 nodes in the order
``op(2i), op(2i+1), ADD_i`` for ``i = 0..3`` and a ``concat`` (the cell output ``c_k``, fed by all 4
ADDs); then ``global_avg_pool`` and ``linear``. Cell ``k`` reads ``c_{k-2}`` and ``c_{k-1}``, where
``c_{-2} = c_{-1} =`` the stem (so ``c_0`` reads the stem twice, ``c_1`` reads the stem and ``c_0``).
The same genotype is used in every cell. A network has ``13 n + 3`` nodes and ``20 n + 2`` edges;
the numbering is a topological order and edges are sorted by (consumer, producer). The number of
cells is drawn per network uniformly from ``cells = (5, 8)`` (inclusive), so sizes are similar but
not identical (68..107 nodes).

**Edit distance** (:func:`edit_distance`) between two genotypes (cells): the graph edit distance
under the natural node correspondence (cell inputs <-> cell inputs, ``ADD_i <-> ADD_i``, the
concat to the concat), minimised independently per ADD over the 2 ways of matching its two input
edges. A matched pair costs 0 if input and op agree, 1 if only the op differs (relabel the op
node), 2 if the input differs (delete one edge, insert one) plus 1 more if the op differs too.
Each term is the cost of an actual edit path, so this is an *upper bound* of the true unit-cost
GED between the two cells (the true GED may also permute ADD nodes). It is a metric (a sum of
minimum-matching distances over a weighted Hamming metric), ranges over 0..24, and ignores the
number of cells: it compares cells, the cell count is nuisance variation inside a class.

**Classes (section 4.7).** With ``rng = numpy.random.default_rng(seed)`` (the only source of
randomness; only ``rng.integers`` is used):

1. *Centres.* Draw a pool of ``pool_size = 2048`` random genotypes (each ADD: 2 distinct uniform
   inputs, uniform ops), canonicalise, drop repeats (up to isomorphism, see below), keep pool
   order. Greedy farthest-point selection: the first centre is ``pool[0]``; each next centre is
   the pool genotype maximising the minimum edit distance to the centres chosen so far (ties:
   first in pool order). This yields ``n_classes = 10`` diverse centres.
2. *Samples.* For class ``c`` (classes in order), repeatedly draw batches of candidates: each
   candidate draws a mutation budget ``m`` uniform in ``1..max_distance`` and applies ``m``
   random mutations in sequence to the centre, each with probability 1/2 an *op change* (a
   uniform pair gets a different uniform op) or an *input change* (a uniform pair of
   ``ADD_1..ADD_3`` gets a different uniform input, still distinct from the ADD's other input),
   then is canonicalised and draws a cell count uniform in ``cells``. A candidate is kept, in
   draw order, until ``per_class`` are kept, iff (a) its edit distance ``d`` to its own centre
   is ``<= max_distance`` (default 4), (b) ``d`` is strictly smaller than its distance to every
   other centre, (c) no kept network has the same canonical genotype and cell count, and (d) no
   network kept in *another* class has an isomorphic cell. (c) and (d) compare cells up to
   isomorphism (input swaps and relabelling the 4 ADD nodes, which the plain canonical form does
   not merge), so no two networks in the dataset are isomorphic and isomorphic cells never carry
   two different labels. Mutations may cancel out, so the centre itself (``d = 0``) can be a
   member of its class (with each cell count at most once). All ``n_classes * per_class``
   graphs are distinct (also checked with ``ArchGraph.content_hash``).
3. *Labels.* ``family = coarse = f"cluster-{c}"``: the NAS data has one level of labels, so the
   coarse label equals the fine one. ``name = f"nas-c{c}-{i:04d}"``, ``source = "nas"``, and
   ``meta = {"genotype": [[input, op_name], ... 8 pairs], "cells": n, "edit_distance": d}``.

The header stores every parameter, the centres and the distance statistics (per class: mean,
min and max distance to the own centre, the minimum distance to the nearest other centre and
the minimum margin; pairwise centre distances min/mean/max). Same seed -> identical graphs on
any machine (integer logic only); the default build is pinned by ``NASDataset.expected_sha256``.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from narbench.dataset import DatasetProvider
from narbench.graph import ArchGraph

VOCAB = [
    "stem_conv", "skip_connect", "max_pool_3x3", "avg_pool_3x3", "sep_conv_3x3", "sep_conv_5x5",
    "dil_conv_3x3", "dil_conv_5x5", "add", "concat", "global_avg_pool", "linear",
]
OPS = VOCAB[1:8]  # the 7 candidate operations; op code o has vocab id o + 1
N_OPS = len(OPS)
N_ADD = 4
N_PAIRS = 2 * N_ADD
NODES_PER_CELL = 3 * N_ADD + 1
EDGES_PER_CELL = 5 * N_ADD
STEM, ADD, CONCAT, GAP, LINEAR = 0, 8, 9, 10, 11
POOL_SIZE = 2048

Genotype = tuple[tuple[int, int], ...]

# ---------------------------------------------------------------- genotypes (scalar API)


def canonical(genotype: Sequence[Sequence[int]]) -> Genotype:
    """Sort each ADD's two (input, op) pairs; check the genotype is valid."""
    pairs = [(int(i), int(o)) for i, o in genotype]
    if len(pairs) != N_PAIRS:
        raise ValueError(f"a genotype has {N_PAIRS} (input, op) pairs, got {len(pairs)}")
    out: list[tuple[int, int]] = []
    for a in range(N_ADD):
        p, q = sorted(pairs[2 * a : 2 * a + 2])
        for inp, op in (p, q):
            if not 0 <= inp < a + 2 or not 0 <= op < N_OPS:
                raise ValueError(f"ADD_{a}: invalid pair ({inp}, {op})")
        if p[0] == q[0]:
            raise ValueError(f"ADD_{a}: its two inputs must be distinct, got {p[0]} twice")
        out += [p, q]
    return tuple(out)


def _pair_cost(p: tuple[int, int], q: tuple[int, int]) -> int:
    return 2 * (p[0] != q[0]) + (p[1] != q[1])


def edit_distance(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> int:
    """Upper bound of the graph edit distance between two cells (see the module docstring)."""
    a, b = [tuple(map(int, p)) for p in a], [tuple(map(int, p)) for p in b]
    total = 0
    for i in range(0, N_PAIRS, 2):
        straight = _pair_cost(a[i], b[i]) + _pair_cost(a[i + 1], b[i + 1])
        swapped = _pair_cost(a[i], b[i + 1]) + _pair_cost(a[i + 1], b[i])
        total += min(straight, swapped)
    return total


def genotype_to_meta(genotype: Sequence[Sequence[int]]) -> list[list[Any]]:
    return [[int(i), OPS[int(o)]] for i, o in genotype]


def genotype_from_meta(pairs: Sequence[Sequence[Any]]) -> Genotype:
    return tuple((int(i), OPS.index(o) if isinstance(o, str) else int(o)) for i, o in pairs)


def build_network(genotype: Sequence[Sequence[int]], cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(ops, edges) of a network of `cells` copies of `genotype` (canonicalised first)."""
    g = np.array(canonical(genotype), dtype=np.int64)
    ops, edges = _build_batch(g[None, :, 0], g[None, :, 1], int(cells))
    return ops[0], edges[0]


# ---------------------------------------------------------------- vectorised internals


def _canonicalise(inp: np.ndarray, op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each ADD's pairs by (input, op); arrays (M, 8)."""
    inp, op = inp.reshape(-1, N_ADD, 2).copy(), op.reshape(-1, N_ADD, 2).copy()
    code = inp * N_OPS + op
    swap = code[..., 0] > code[..., 1]
    inp[swap] = inp[swap][:, ::-1]
    op[swap] = op[swap][:, ::-1]
    return inp.reshape(-1, N_PAIRS), op.reshape(-1, N_PAIRS)


def _distances(ai: np.ndarray, ao: np.ndarray, bi: np.ndarray, bo: np.ndarray) -> np.ndarray:
    """Edit distances between every row of a (M, 8) and every row of b (K, 8): (M, K) int64."""
    ai, ao = ai.reshape(-1, 1, N_ADD, 2), ao.reshape(-1, 1, N_ADD, 2)
    bi, bo = bi.reshape(1, -1, N_ADD, 2), bo.reshape(1, -1, N_ADD, 2)

    def cost(x: int, y: int) -> np.ndarray:
        return 2 * (ai[..., x] != bi[..., y]) + (ao[..., x] != bo[..., y])

    straight = cost(0, 0) + cost(1, 1)
    swapped = cost(0, 1) + cost(1, 0)
    return np.minimum(straight, swapped).sum(axis=-1).astype(np.int64)


_PERMS = np.array(list(itertools.permutations(range(N_ADD))), dtype=np.int64)  # (24, 4)


def _iso_keys(inp: np.ndarray, op: np.ndarray) -> np.ndarray:
    """An integer key per genotype that is equal iff the cells are isomorphic.

    Cell isomorphism fixing the two cell inputs = relabelling the ADD nodes + swapping an ADD's
    input edges; the key is the minimum, over the 24 ADD relabellings, of the pair-sorted code.
    """
    m = inp.shape[0]
    best = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    base = 6 * N_OPS  # pair code input * 7 + op < 42
    for perm in _PERMS:  # old ADD j -> new ADD perm[j]
        relabel = np.concatenate([[0, 1], perm + 2])
        ni = relabel[inp].reshape(m, N_ADD, 2)
        no = op.reshape(m, N_ADD, 2)
        order = np.argsort(perm)  # new position a holds old ADD order[a]
        ni, no = ni[:, order], no[:, order]
        code = np.sort(ni * N_OPS + no, axis=-1).reshape(m, N_PAIRS)
        key = np.zeros(m, dtype=np.int64)
        for p in range(N_PAIRS):
            key = key * base + code[:, p]
        best = np.minimum(best, key)
    return best


def _random_genotypes(rng: np.random.Generator, m: int) -> tuple[np.ndarray, np.ndarray]:
    inp = np.empty((m, N_PAIRS), dtype=np.int64)
    for a in range(N_ADD):
        first = rng.integers(0, a + 2, size=m)
        second = rng.integers(0, a + 1, size=m)
        second = second + (second >= first)
        inp[:, 2 * a], inp[:, 2 * a + 1] = first, second
    op = rng.integers(0, N_OPS, size=(m, N_PAIRS))
    return _canonicalise(inp, op)


def _mutate(rng: np.random.Generator, ci: np.ndarray, co: np.ndarray, m: int, max_mut: int):
    """`m` mutants of the centre (ci, co): 1..max_mut random op/input changes each."""
    inp = np.repeat(ci[None], m, axis=0)
    op = np.repeat(co[None], m, axis=0)
    budget = rng.integers(1, max_mut + 1, size=m)
    rows = np.arange(m)
    for step in range(max_mut):
        active = budget > step
        kind = rng.integers(0, 2, size=m)  # 0: op change, 1: input change
        op_pair = rng.integers(0, N_PAIRS, size=m)
        op_shift = rng.integers(1, N_OPS, size=m)
        in_pair = rng.integers(2, N_PAIRS, size=m)  # pairs of ADD_1..ADD_3
        in_draw = rng.integers(0, 1 << 30, size=m)
        # op change: a different op for one pair
        do_op = active & (kind == 0)
        op[rows[do_op], op_pair[do_op]] = (op[rows[do_op], op_pair[do_op]] + op_shift[do_op]) % N_OPS
        # input change: ADD_a has a + 2 candidates, minus its 2 current inputs -> a choices
        do_in = active & (kind == 1)
        r, p = rows[do_in], in_pair[do_in]
        a = p // 2
        cur, other = inp[r, p], inp[r, p ^ 1]
        v = in_draw[do_in] % a
        lo, hi = np.minimum(cur, other), np.maximum(cur, other)
        v = v + (v >= lo)
        v = v + (v >= hi)
        inp[r, p] = v
    return _canonicalise(inp, op)


def _build_batch(inp: np.ndarray, op: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """ops (G, 13n+3) and edges (G, 2, 20n+2) for G genotypes of n cells each."""
    g = inp.shape[0]
    k = np.arange(n)
    base = 1 + NODES_PER_CELL * k
    concat = base + 3 * N_ADD
    prev2 = np.where(k >= 2, concat - 2 * NODES_PER_CELL, 0)
    prev1 = np.where(k >= 1, concat - NODES_PER_CELL, 0)
    adds = base[:, None] + 3 * np.arange(N_ADD)[None] + 2  # (n, 4)
    table = np.concatenate([prev2[:, None], prev1[:, None], adds], axis=1)  # (n, 6) input code -> node
    in_node = table[:, inp].transpose(1, 0, 2)  # (G, n, 8)
    pair = np.arange(N_PAIRS)
    op_node = base[:, None] + 3 * (pair // 2)[None] + pair % 2  # (n, 8)
    add_of_pair = adds[:, pair // 2]  # (n, 8)
    # per cell, per ADD i: in->op(2i), in->op(2i+1), op(2i)->ADD_i, op(2i+1)->ADD_i; then ADDs->concat
    src = np.empty((g, n, EDGES_PER_CELL), dtype=np.int64)
    dst = np.empty((g, n, EDGES_PER_CELL), dtype=np.int64)
    for i in range(N_ADD):
        j = 4 * i
        src[:, :, j : j + 2] = in_node[:, :, 2 * i : 2 * i + 2]
        dst[:, :, j : j + 2] = op_node[None, :, 2 * i : 2 * i + 2]
        src[:, :, j + 2 : j + 4] = op_node[None, :, 2 * i : 2 * i + 2]
        dst[:, :, j + 2 : j + 4] = add_of_pair[None, :, 2 * i : 2 * i + 2]
    src[:, :, 4 * N_ADD :] = adds[None]
    dst[:, :, 4 * N_ADD :] = concat[None, :, None]
    n_nodes = NODES_PER_CELL * n + 3
    tail_src = np.array([n_nodes - 3, n_nodes - 2])
    tail_dst = np.array([n_nodes - 2, n_nodes - 1])
    src = np.concatenate([src.reshape(g, -1), np.broadcast_to(tail_src, (g, 2))], axis=1)
    dst = np.concatenate([dst.reshape(g, -1), np.broadcast_to(tail_dst, (g, 2))], axis=1)
    edges = np.stack([src, dst], axis=1)
    cell_ops = np.empty((g, NODES_PER_CELL), dtype=np.int64)
    for i in range(N_ADD):
        cell_ops[:, 3 * i : 3 * i + 2] = op[:, 2 * i : 2 * i + 2] + 1
        cell_ops[:, 3 * i + 2] = ADD
    cell_ops[:, -1] = CONCAT
    ops = np.concatenate(
        [np.full((g, 1), STEM), np.tile(cell_ops, (1, n)), np.tile([GAP, LINEAR], (g, 1))], axis=1
    )
    return ops, edges


def _select_centres(pool_i: np.ndarray, pool_o: np.ndarray, n_classes: int) -> list[int]:
    chosen = [0]
    mind = _distances(pool_i, pool_o, pool_i[:1], pool_o[:1])[:, 0]
    while len(chosen) < n_classes:
        nxt = int(np.argmax(mind))  # first maximum: ties go to pool order
        if mind[nxt] == 0:
            raise ValueError(f"the pool has fewer than {n_classes} distinct genotypes")
        chosen.append(nxt)
        new = _distances(pool_i, pool_o, pool_i[nxt : nxt + 1], pool_o[nxt : nxt + 1])[:, 0]
        mind = np.minimum(mind, new)
    return chosen


# ---------------------------------------------------------------- the dataset


def generate(
    seed: int = 0,
    n_classes: int = 10,
    per_class: int = 3000,
    cells: tuple[int, int] = (5, 8),
    max_distance: int = 4,
    pool_size: int = POOL_SIZE,
) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
    """Generate the clustered NAS dataset (see the module docstring): (graphs, vocab, header)."""
    lo_cells, hi_cells = int(cells[0]), int(cells[1])
    if not 1 <= lo_cells <= hi_cells:
        raise ValueError(f"cells must be a range (lo, hi) with 1 <= lo <= hi, got {cells}")
    if max_distance < 1:
        raise ValueError("max_distance must be >= 1")
    rng = np.random.default_rng(seed)

    # 1. centres: greedy farthest-point selection over a pool of distinct random cells
    pool_i, pool_o = _random_genotypes(rng, pool_size)
    _, first = np.unique(_iso_keys(pool_i, pool_o), return_index=True)
    keep = np.sort(first)
    pool_i, pool_o = pool_i[keep], pool_o[keep]
    chosen = _select_centres(pool_i, pool_o, n_classes)
    cen_i, cen_o = pool_i[chosen], pool_o[chosen]
    cdist = _distances(cen_i, cen_o, cen_i, cen_o)

    # 2. samples around each centre
    iso_class: dict[int, int] = {}  # iso key -> class that owns it
    samples: list[tuple[int, np.ndarray, np.ndarray, int, int]] = []  # (class, inp, op, cells, d)
    batch = max(64, 2 * per_class)
    for c in range(n_classes):
        seen: set[tuple[int, int]] = set()
        kept = 0
        draws = 0
        while kept < per_class:
            draws += 1
            if draws > 1000:
                raise RuntimeError(f"class {c}: cannot find {per_class} distinct samples")
            mi, mo = _mutate(rng, cen_i[c], cen_o[c], batch, max_distance)
            ncell = rng.integers(lo_cells, hi_cells + 1, size=batch)
            dist = _distances(mi, mo, cen_i, cen_o)
            own = dist[:, c]
            other = np.delete(dist, c, axis=1).min(axis=1) if n_classes > 1 else own + 1
            ok = np.flatnonzero((own <= max_distance) & (own < other))
            keys = _iso_keys(mi[ok], mo[ok])
            for j, key in zip(ok.tolist(), keys.tolist()):
                owner = iso_class.setdefault(key, c)
                if owner != c or (key, int(ncell[j])) in seen:
                    continue
                seen.add((key, int(ncell[j])))
                samples.append((c, mi[j], mo[j], int(ncell[j]), int(own[j])))
                kept += 1
                if kept == per_class:
                    break

    # 3. graphs, built per cell count in one vectorised pass
    graphs: list[ArchGraph | None] = [None] * len(samples)
    s_cells = np.array([s[3] for s in samples])
    s_inp = np.array([s[1] for s in samples]).reshape(-1, N_PAIRS)
    s_op = np.array([s[2] for s in samples]).reshape(-1, N_PAIRS)
    for n in range(lo_cells, hi_cells + 1):
        idx = np.flatnonzero(s_cells == n)
        if idx.size == 0:
            continue
        ops, edges = _build_batch(s_inp[idx], s_op[idx], n)
        for row, gi in enumerate(idx.tolist()):
            c, gi_inp, gi_op, ncell, d = samples[gi]
            graphs[gi] = ArchGraph(
                ops=ops[row],
                edges=edges[row],
                name="",
                family=f"cluster-{c}",
                coarse=f"cluster-{c}",
                source="nas",
                meta={
                    "genotype": genotype_to_meta(zip(gi_inp.tolist(), gi_op.tolist())),
                    "cells": ncell,
                    "edit_distance": d,
                },
            )
    counters = [0] * n_classes
    for g, s in zip(graphs, samples):
        g.name = f"nas-c{s[0]}-{counters[s[0]]:04d}"
        counters[s[0]] += 1
    if len({g.content_hash() for g in graphs}) != len(graphs):  # guaranteed by construction
        raise RuntimeError("duplicate graphs generated")

    # 4. statistics for the header
    s_cls = np.array([s[0] for s in samples])
    all_d = _distances(s_inp, s_op, cen_i, cen_o)
    per_class_stats = []
    for c in range(n_classes):
        dc = all_d[s_cls == c]
        own = dc[:, c]
        other = np.delete(dc, c, axis=1).min(axis=1) if n_classes > 1 else own + 1
        hist = np.bincount(own, minlength=max_distance + 1)
        per_class_stats.append({
            "class": f"cluster-{c}",
            "count": int(dc.shape[0]),
            "own_mean": round(float(own.mean()), 4),
            "own_min": int(own.min()),
            "own_max": int(own.max()),
            "own_histogram": [int(x) for x in hist],
            "nearest_other_min": int(other.min()),
            "nearest_other_mean": round(float(other.mean()), 4),
            "margin_min": int((other - own).min()),
        })
    off = cdist[~np.eye(n_classes, dtype=bool)] if n_classes > 1 else np.zeros(1, dtype=np.int64)
    header = {
        "generator": "narbench.datasets.nas.generate",
        "description": "DARTS-space networks (op nodes on every edge), clustered by cell edit distance "
                       "around farthest-point centres; family == coarse (one label level)",
        "params": {
            "seed": int(seed), "n_classes": int(n_classes), "per_class": int(per_class),
            "cells": [lo_cells, hi_cells], "max_distance": int(max_distance), "pool_size": int(pool_size),
            "rng": "numpy.random.default_rng(seed).integers",
            "mutations": "budget uniform 1..max_distance; each op change or input change with p=1/2",
            "distance": "cell GED upper bound, natural correspondence, min over each ADD's 2 input matchings",
            "dedup": "canonical genotype up to isomorphism + cell count; isomorphic cells never in 2 classes",
        },
        "ops": OPS,
        "input_codes": "0 = c_{k-2}, 1 = c_{k-1}, 2+j = ADD_j",
        "centres": [genotype_to_meta(zip(ci.tolist(), co.tolist())) for ci, co in zip(cen_i, cen_o)],
        "stats": {
            "centre_distance_min": int(off.min()),
            "centre_distance_mean": round(float(off.mean()), 4),
            "centre_distance_max": int(off.max()),
            "centre_distances": cdist.tolist(),
            "per_class": per_class_stats,
        },
    }
    return graphs, list(VOCAB), header


class NASDataset(DatasetProvider):
    """30,000 DARTS-space architectures in 10 edit-distance clusters (`generate(seed=0)`)."""

    name = "nas"
    version = "1.0"
    expected_sha256 = "984cc985b14557f7902c47351830567c9fbaec1d1116b95483bc049c285efbfe"

    def build(self) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
        return generate(seed=0)
