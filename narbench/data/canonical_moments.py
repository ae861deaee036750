"""A layer norm written distributed over its centring, `x * r - mean(x) * r` with `r` a negative power of x's
variance: the form Keras 3's `LayerNormalization` takes on the torch backend (`ops.moments` writes the variance as
E[x^2] - E[x]^2, then `outputs = x * inv + (-mean * inv + beta)`), which 2.3's norm algebra
(`narbench.data.canonical_algebra`) does not read, because its factor `r` and its mean each have two readers.

The statistic's side is evaluated by 2.3's algebra (`_Cone`), the mean read twice allowed: the two products and
their sum are `(x - mean x) * v(x)^e`, the monomial of `layernorm`. A subtraction reads as an `add` and the mean's
negation as a scaling (elided), so `x * r + mean(x) * r` reads the same; nobody normalises so.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from narbench.data.canonical_algebra import ONE, POWERS, _Cone, norm_of, product


class _MeanReadTwice(_Cone):
    """2.3's evaluation, where the mean `m` of x, read by the subtracted product too, is x's bare second moment."""

    def __init__(self, g: Any, m: int) -> None:
        super().__init__(g)
        self.m = m

    def shared(self, u: int, op: str, ins: list[int]) -> dict:
        if u != self.m:
            return super().shared(u, op, ins)
        if u not in self.members:
            self.members.append(u)
        return {("s", ("x", ins[0]), True): ONE}


def _mean_of(g: Any, m: int, x: int) -> bool:
    return g.op[m] == "mean" and g.inputs(m) == [x]


def _distributed(g: Any, a: int) -> list[int] | None:
    """The nodes of the distributed layer norm that the sum `a` ends, or None."""
    ins = g.inputs(a)
    if g.op[a] != "add" or len(ins) != 2:
        return None
    p, q = ins
    if not all(g.op[u] == "mul" and len(g.inputs(u)) == 2 and g.only_consumer(u, a) for u in (p, q)):
        return None
    shared = set(g.inputs(p)) & set(g.inputs(q))
    if len(shared) != 1:
        return None
    (r,) = shared
    if g.succs[r] != {p, q} or g.op[r] not in POWERS or len(g.inputs(r)) != 1:
        return None
    (x,), (m,) = [u for u in g.inputs(p) if u != r], [u for u in g.inputs(q) if u != r]
    if not _mean_of(g, m, x):
        x, m = m, x
        if not _mean_of(g, m, x):
            return None
    cone = _MeanReadTwice(g, m)
    mono = cone.compute(r, g.op[r], g.inputs(r))  # r is read by both products: evaluated as their common factor
    if mono is None or norm_of(product({("c", ("x", x)): ONE}, mono)) != "layernorm":
        return None
    members = {*cone.members, m, r, p, q, a}
    if not all(g.succs[u] <= members for u in members if u != a):
        return None
    return sorted(members)


def distributed_layernorm(g: Any) -> int:
    """On a `RewriteGraph`: each layer norm written `x * r - mean(x) * r` (r a negative power of x's variance, in any
    spelling 2.3's algebra reads) becomes one `layernorm` of x, in the sum's place. The number folded."""
    folded = 0
    for a in list(g.order):
        if g.alive(a):
            members = _distributed(g, a)
            if members:
                g.merge(members, a, "layernorm")
                folded += 1
    return folded


def may_fold_distributed(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `distributed_layernorm` can fire on a canonical graph (a cheap check): a `mean` and a root or power."""
    return "mean" in ops and any(o in ops for o in POWERS)
