"""Exact cosine thresholds on integer count rows: which pairs of rows are at cosine >= t, decided the
same on every machine.

Float32 products pick candidates with a margin above their worst-case error; exact integer arithmetic
decides each candidate (`cosine_at_least`). The taxonomy's near-duplicate pairs
(`narbench.datasets.near_duplicates`) and the datasheet's near-duplicate shares are decided this way.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def cosine_at_least(a: np.ndarray, b: np.ndarray, threshold: float) -> np.ndarray:
    """bool [len(a), len(b)]: cosine(a_i, b_j) >= `threshold` (0 < t <= 1, read as its decimal: 0.999 is
    999/1000) for integer count rows, decided exactly, so the same on every machine (a zero row matches nothing).

    Float32 products of the unit rows, whose rounding depends on the CPU's kernels, only pick candidates,
    with a margin of 2(n + 3) units of 2**-24 for n columns, above their worst-case error (n + 6 units, in
    any summation order); exact integer arithmetic then decides each candidate: dot > 0 and
    q^2 dot^2 >= p^2 |a|^2 |b|^2 for t = p/q."""
    rows_a, rows_b = _Rows(a), _Rows(b)
    out = np.zeros((len(rows_a.sq), len(rows_b.sq)), dtype=bool)
    out[_at_least(rows_a, rows_b, _fraction(threshold))] = True
    return out


class _Rows:
    """Integer count rows (sparse) with their exact squared norms and float32 unit rows; sliced without copies."""

    def __init__(self, x: np.ndarray):
        from scipy.sparse import csr_matrix

        x = _integer_rows(x, "cosine_at_least")
        self.csr, self.offset, self.width = csr_matrix(x), 0, x.shape[1]
        if self.csr.nnz and float(np.abs(self.csr.data).max()) ** 2 * x.shape[1] >= 2.0**62:
            raise ValueError("cosine_at_least: counts too large for exact int64 dot products")
        self.sq = np.einsum("ij,ij->i", x, x)
        scale = (1 / np.maximum(np.sqrt(self.sq.astype(np.float64)), 1.0)).astype(np.float32)
        self.unit = x.astype(np.float32) * scale[:, None]  # each entry within 3 units of 2**-24

    def __getitem__(self, rows: slice) -> _Rows:
        start, _, _ = rows.indices(len(self.sq))
        out = object.__new__(_Rows)
        out.csr, out.offset, out.width = self.csr, self.offset + start, self.width
        out.sq, out.unit = self.sq[rows], self.unit[rows]
        return out

    def dots(self, i: np.ndarray, other: _Rows, j: np.ndarray) -> np.ndarray:
        """Exact int64 dot products of this slice's rows `i` with `other`'s rows `j` (|dot| <= |a||b| < 2**62)."""
        prod = self.csr[i + self.offset].multiply(other.csr[j + other.offset])
        return np.asarray(prod.sum(axis=1), dtype=np.int64).reshape(-1)


def _fraction(threshold: float) -> Fraction:
    t = Fraction(repr(threshold)) if isinstance(threshold, float) else Fraction(threshold)
    if not 0 < t <= 1:
        raise ValueError(f"cosine threshold {threshold} is not in (0, 1]")
    return t


def _at_least(a: _Rows, b: _Rows, t: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """The (row of a, row of b) index arrays of the pairs at cosine >= t."""
    if a.width != b.width:
        raise ValueError(f"cosine_at_least: {a.width} columns against {b.width}")
    approx = a.unit @ b.unit.T
    ii, jj = np.nonzero(approx >= float(t) - 2 * (a.width + 3) * 2.0**-24)
    out_i, out_j = [], []
    p2, q2 = t.numerator ** 2, t.denominator ** 2
    for s in range(0, len(ii), 65536):  # bounded memory: candidates' rows are gathered in slices
        i, j = ii[s:s + 65536], jj[s:s + 65536]
        dot = a.dots(i, b, j)
        keep = dot > 0
        lhs = q2 * dot[keep].astype(object) ** 2  # Python ints: no overflow
        rhs = p2 * a.sq[i[keep]].astype(object) * b.sq[j[keep]].astype(object)
        keep[keep] = (lhs >= rhs).astype(bool)
        out_i.append(i[keep])
        out_j.append(j[keep])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(out_i) if out_i else empty), (np.concatenate(out_j) if out_j else empty)


def _integer_rows(x: np.ndarray, what: str) -> np.ndarray:
    """`x` as int64, which must lose nothing (counts, not normalised embeddings)."""
    x = np.asarray(x)
    if x.dtype.kind in "iu":
        return x.astype(np.int64, copy=False)
    xi = np.rint(x).astype(np.int64)
    if not np.array_equal(xi, x):
        raise ValueError(f"{what}: the cosine is decided exactly on integer counts (e.g. wl_counts), not floats")
    return xi


def pairs_at_least(counts: np.ndarray, threshold: float, chunk: int = 1024) -> np.ndarray:
    """All pairs (i < j) of integer count rows with cosine >= `threshold`, int64 [P, 2], decided exactly
    (`cosine_at_least`); `chunk` rows at a time against the rows after them."""
    rows, t = _Rows(counts), _fraction(threshold)
    out = []
    for start in range(0, len(rows.sq), chunk):
        ii, jj = _at_least(rows[start:start + chunk], rows[start:], t)
        keep = jj > ii
        out.append(np.stack([ii[keep] + start, jj[keep] + start], axis=1))
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), np.int64)
