"""A scan written by hand reads as a scan written with tensor ops (canonical 2.15 `buffer-writes`, `product-sums`).

A selective scan or a recurrence written as a Python loop (a Mamba from scratch) records two spellings that the
corpus's implementations (transformers' Mamba, RecurrentGemma, RWKV) write otherwise, for the same computation:
- its outputs written into a preallocated buffer one step at a time, `y[:, t] = h`, where the corpus stacks or
  concatenates the steps: autograd records a chain of index writes (`scatter`), each read only by the next, which is
  one assembly of the values written: one `concat` (`buffer-writes`);
- its readout as an elementwise product summed over a dimension, `(h * C).sum(-1)`, where the corpus writes the
  contraction `h @ C`: a `sum` whose one input is a product of two tensors read by the sum alone is a `matmul`
  (`product-sums`), whatever the operands (a split-attention's weighted sum of branches is a contraction too).
A single index write (a cache slot, a token written once) and a product read by anything besides the sum stay as
they are. Chosen on the validation sets (`wildval21`'s Mamba from scratch met `recurrent_gemma`; step for step the
same graph as transformers' Mamba but for these spellings), decided on `wildval` 1-22 pooled with `wildval22` built
after the candidates as their carry set; data in `narbench/data/canonical-rules.csv`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def _write_chain(g: Any, end: int) -> list[int]:
    """The scatters ending at `end`, each read only by the next, last first."""
    chain, cur = [end], end
    while True:
        prev = [p for p in g.preds[cur] if g.op[p] == "scatter" and g.succs[p] == {cur}]
        if len(prev) != 1:
            return chain
        cur = prev[0]
        chain.append(cur)


def buffer_writes(g: Any) -> int:
    """On a `RewriteGraph`: each chain of two or more `scatter`s, each read only by the next, is one `concat` of the
    values written, at the last write's place; the number of chains."""
    n = 0
    for v in list(g.order):
        if not g.alive(v) or g.op[v] != "scatter":
            continue
        readers = g.succs[v]
        if len(readers) == 1 and g.op[next(iter(readers))] == "scatter":
            continue  # not the chain's last write
        chain = _write_chain(g, v)
        if len(chain) >= 2:
            g.merge(chain, v, "concat")
            n += 1
    return n


def product_sums(g: Any) -> int:
    """On a `RewriteGraph`: each `sum` whose one input is a `mul` of two tensors read by the sum alone is one `matmul`
    (the product and the sum merged at the sum's place); the number merged."""
    n = 0
    for v in list(g.order):
        if not g.alive(v) or g.op[v] != "sum" or len(g.preds[v]) != 1:
            continue
        (m,) = g.preds[v]
        if g.op[m] == "mul" and len(g.preds[m]) == 2 and g.succs[m] == {v}:
            g.merge([m, v], v, "matmul")
            n += 1
    return n


def scans(g: Any) -> int:
    """Canonical 2.15's pass: `buffer_writes`, then `product_sums`; the rewrites made."""
    return buffer_writes(g) + product_sums(g)


def may_scan(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `scans` can fire on a canonical graph (a cheap check): a scatter read by a scatter, or a mul by a sum."""
    if "scatter" not in ops and "sum" not in ops:
        return False
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    return any((ops[s], ops[d]) in (("scatter", "scatter"), ("mul", "sum")) for s, d in zip(src.tolist(), dst.tolist()))
