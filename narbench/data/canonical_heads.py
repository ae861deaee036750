"""The output head run on selected positions is the head (canonical 2.14 `head-selection`).

A language model written for generation often runs its head on the last position only when no targets are given:
nanoGPT's and llama2.c's `self.lm_head(x[:, [-1], :])`, which autograd records as an index (`gather`) between the
final norm and the head. The network is the same as the one that runs the head on every position (the training
forward, transformers' causal LMs): the selection is a shortcut of the inference call, not of the design. So a
`gather` whose only input is a norm and whose only reader is a `linear` that nothing reads (the graph's output) is
elided. A selection read by anything else (an activation or a pooler's layers before a classifier) is left; the graph
records no outputs, so a selection also returned as a pooled feature (CLIP's text towers with a projection) reads as
a head on the last position too. Chosen on the validation sets (`wildval19`: nanoGPT met `clip`, llama2.c `smollm3`), data in
`narbench/data/canonical-rules.csv`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from narbench.data.canonical_spelling import NORMS, _splice


def head_selections(g: Any) -> int:
    """On a `RewriteGraph`: each `gather` between a norm and an output `linear` (one nothing reads) is elided, the
    head reading the norm; the number elided."""
    n = 0
    for v in [v for v in g.order if g.alive(v) and g.op[v] == "gather" and len(g.preds[v]) == len(g.succs[v]) == 1]:
        (p,), (c,) = g.preds[v], g.succs[v]
        if g.op[p] in NORMS and g.op[c] == "linear" and not g.succs[c] and list(g.preds[c]) == [v]:
            _splice(g, v)
            n += 1
    return n


def may_select_head(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `head_selections` can fire on a canonical graph (a cheap check): a `gather` read by a `linear`."""
    if "gather" not in ops:
        return False
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    return any(ops[s] == "gather" and ops[d] == "linear" for s, d in zip(src.tolist(), dst.tolist()))
