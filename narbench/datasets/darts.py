"""The DARTS cell search space of the NAS dataset: genotypes, networks, the edit distance.

The definitions `narbench.datasets.nas` builds its clusters from (appendix A.4 of the NAR paper):

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
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

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
