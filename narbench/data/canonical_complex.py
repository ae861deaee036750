"""2.10's rule on raw graphs: rotary position embedding written as a complex product (`complex-rotation`).

RoPE rotates each pair of a head's channels by an angle of the position. Meta's LLaMA code (and many written after
it, and transformers' Llama 4) writes the rotation as a product of complex numbers: `xc = view_as_complex(x.reshape(
..., -1, 2))`, `view_as_real(xc * freqs_cis)` with `freqs_cis = torch.polar(1, angles)`. Autograd records
`ViewAsComplexBackward0 -> MulBackward0 -> ViewAsRealBackward0`; the views are layout and a product with a tensor the
graph does not see is a scaling, so every canonical version before 2.10 elides the rotation: a LLaMA written this way
is a decoder with no position encoding at all (`wildval4`'s stackformer Llama 2 and Gemma and `wildval10`'s axiomlm
Llama 3 and Mistral settings were 55-node graphs nearest to `ctrl`, at cosine 0.656).

The same rotation written with real numbers, `x * cos + rotate_half(x) * sin`, canonicalises to `add(x, concat(x))`
(2.5's `rope-pairs` writes the per-half spelling so too). This rule writes the complex triple as the raw nodes that
canonicalise to that form: the product becomes a concatenation of `x` and the return to real numbers a sum of `x` and
that concatenation. Only a product of one data input (the complex view of `x`) read by a return to real numbers alone
is rewritten: a complex product of two data tensors (a learned complex filter of an FFT, GFNet's) is not a rotation.

It reads raw op names, so it acts where a graph is canonicalised from its raw names (a model searched, a set
extracted); a graph stored canonical under an earlier version has lost the triple and reaches 2.10 unchanged
(`narbench.data.canonical.UPGRADES`: 2.10's pass over canonical graphs is `no_pass`). `real` 2.3 holds 28 such
graphs (transformers' `llama4`, no rotation in them): docs/search.md says so.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from narbench.data.rawname import split_name

TO_COMPLEX, PRODUCT, TO_REAL = "ViewAsComplexBackward0", "MulBackward0", "ViewAsRealBackward0"
#: The raw names the rotation is written with: those of `x * cos + rotate_half(x) * sin` once its scalings are elided.
CONCAT, SUM = "CatBackward0", "AddBackward0"


def _base(raw: str) -> str:
    return split_name(raw)[0]


def complex_rotations(ops: Sequence[str], edges: np.ndarray) -> tuple[list[str], np.ndarray, int]:
    """`ops` and `edges` (2 x E) with each complex rotation written as rotate-half's raw nodes; the number rewritten.

    A triple `c: ViewAsComplex(x) -> m: Mul(c) -> r: ViewAsReal(m)` (m reads c alone and is read by r alone) becomes
    `c` (a view, elided as before), `m: Cat(c)` and `r: Add(c, m)`: the same nodes, one edge more."""
    ops = list(ops)
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    if TO_COMPLEX not in {_base(o) for o in ops}:
        return ops, edges, 0
    preds: dict[int, list[int]] = {}
    succs: dict[int, list[int]] = {}
    for s, d in edges.T.tolist():
        preds.setdefault(d, []).append(s)
        succs.setdefault(s, []).append(d)
    added = []
    for m, op in enumerate(ops):
        if _base(op) != PRODUCT or len(set(preds.get(m, ()))) != 1:
            continue
        (c,) = set(preds[m])
        readers = set(succs.get(m, ()))
        if _base(ops[c]) != TO_COMPLEX or len(readers) != 1:
            continue
        (r,) = readers
        if _base(ops[r]) != TO_REAL:
            continue
        ops[m], ops[r] = CONCAT, SUM
        added.append((c, r))
    if not added:
        return ops, edges, 0
    return ops, np.concatenate([edges, np.asarray(added, dtype=np.int64).T], axis=1), len(added)

