"""Compiled loop of `narbench.train.propagate` (numba): a CSR matrix times a dense one."""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def csr_matmul(rowptr, col, val, x, out):
    """out[i] = sum of val[p] * x[col[p]] over the entries p of row i, in stored order.

    Each product is rounded to x's type and the products are added left to right from zero: what a
    sequential scatter-add of the products into zeros computes, bit for bit (no fused multiply-add:
    numba does not contract without fastmath)."""
    n, d = out.shape
    for i in range(n):
        for k in range(d):
            out[i, k] = 0
        for p in range(rowptr[i], rowptr[i + 1]):
            j = col[p]
            v = val[p]
            for k in range(d):
                out[i, k] += v * x[j, k]
    return out


@njit(cache=True)
def csr_matmul_bias(rowptr, col, val, x, bias, out):
    """`csr_matmul`, then bias[k] added to every row's column k (the layer's `out + bias`, fused)."""
    csr_matmul(rowptr, col, val, x, out)
    n, d = out.shape
    for i in range(n):
        for k in range(d):
            out[i, k] += bias[k]
    return out
