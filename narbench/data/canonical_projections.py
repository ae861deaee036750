"""A product of one tensor with a weight the graph does not see is a Linear (canonical 2.13 `weight-product`).

Keras 3's `EinsumDense` on the torch backend (`torch.einsum` of the activations with its kernel) and a hand-written
`x @ self.w` of a 3-D tensor record a batched product with one data input: the weight is a parameter, a leaf of
autograd's record, not a node. Canonically such a product was a `matmul` (a product of two tensors) where the same
projection written as `nn.Linear`, or as `MmBackward0` of a 2-D tensor, is a `linear`. Read by what it computes, it is
a Linear without bias; the Linears then reading one tensor are one projection (2.2's `one-projection`, over those
tensors only). A product whose one input is a `slice` is left: the selections of one tensor are one node, so a product
of two selections (`a(x) @ b(x).T`, Mamba-2's `C @ B.T`, a gated delta rule's `q @ k.T`) reads one input too.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


def not_a_selection(g: Any, v: int, source: int) -> bool:
    """2.13's choice of products: the one input `source` of matmul `v` is not a `slice`."""
    return g.op[source] != "slice"


def weight_products(g: Any, renamed: Callable[[Any, int, int], bool] = not_a_selection) -> int:
    """On a `RewriteGraph`: each `matmul` `v` reading one tensor `source` for which `renamed(g, v, source)` holds (2.13:
    one that is not a selection) becomes a `linear`, then one projection over the tensors read. The number renamed.
    `renamed` lets the validation study of candidate passes (`benchmarks.search.rules_next`) try other choices."""
    read = []
    for v in g.order:
        if g.alive(v) and g.op[v] == "matmul" and len(g.preds[v]) == 1 and renamed(g, v, next(iter(g.preds[v]))):
            g.op[v] = "linear"
            read.extend(g.preds[v])
    if read:
        g.merge_projections(sources=read)
    return len(read)


def may_weight_product(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `weight_products` can fire on a canonical graph (a cheap check): a `matmul` with one input."""
    if "matmul" not in ops:
        return False
    dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)[1]
    fed = np.bincount(dst, minlength=len(ops))
    return any(fed[i] == 1 for i, op in enumerate(ops) if op == "matmul")
