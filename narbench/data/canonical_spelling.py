"""2.5's pass over canonical graphs (`narbench.data.canonical.UPGRADES`): two designs each written one way, the rows
`rope-pairs` and `table-lookup` of `canonical-rules.csv`. Both were chosen on `wildval` (a validation set,
docs/wildval.md), where each was the spelling that kept models from their family.

`rope-pairs` (`rope_pairs`). RoPE rotates each pair of a head's channels by an angle of the position. transformers
writes it rotate-half, `x * cos + rotate_half(x) * sin`, whose canonical graph is `add(x, concat(x))` (the halves'
concatenation; the products with constants are elided). Meta's and torchtune's code pairs interleaved channels and
writes the rotation per half, `stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin])`: two sums reading x alone (its
selections are one node), concatenated, `concat(add(x), add(x))`. Which channels pair up is not in the graph (GPT-J's
interleaved `rotate_every_two` already reads as rotate-half), so the two are one design written two ways; the pass
writes the second as the first. In `wildval`, torchtune's LLaMA 3.2 and Gemma 2 retrieved GLM models, whose partial
rotary has a similar shape; their own families stood at ranks 153 and 62.

`table-lookup` (`table_lookup`). A `gather` with no data input, a learned table indexed by integer ids the graph does
not see (`W_E[tokens]`, a relative-position table indexed by a buffer), is an `embedding`: what `nn.Embedding`
computes (T5 holds its relative-position table as one). In `wildval`, transformer-lens indexes its token table, and
its GPT-2, GPT-Neo and Pythia retrieved Whisper and Longformer.

Each rewrite is idempotent, so a graph already under 2.5 comes back as it is.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def rope_pairs(g: Any) -> int:
    """`concat(add(x), add(x))` on a `RewriteGraph`, each sum reading x alone and read by the concatenation alone,
    becomes `add(x, concat(x))`: the first sum becomes the concatenation of x, the second the sum of x and it, and
    takes the old concatenation's consumers. The number of rotations rewritten."""
    done, pos = 0, None
    for c in list(g.order):
        if not g.alive(c) or g.op[c] != "concat" or len(g.preds[c]) != 2:
            continue
        pos = pos or {v: i for i, v in enumerate(g.order)}
        a1, a2 = sorted(g.preds[c], key=pos.__getitem__)
        if g.op[a1] != "add" or g.op[a2] != "add" or g.succs[a1] != {c} or g.succs[a2] != {c}:
            continue
        if len(g.preds[a1]) != 1 or list(g.preds[a1]) != list(g.preds[a2]):
            continue
        (x,) = g.preds[a1]
        g.op[a1], g.succs[a1] = "concat", {a2}
        g.preds[a2], g.succs[a2] = {x: None, a1: None}, set(g.succs[c])
        for k in g.succs[c]:
            g.preds[k] = {(a2 if q == c else q): None for q in g.preds[k]}
        del g.op[c], g.preds[c], g.succs[c]
        done += 1
    return done


def table_lookup(g: Any) -> int:
    """`gather` nodes with no input on a `RewriteGraph` become `embedding`; the number renamed."""
    done = 0
    for v in g.order:
        if g.alive(v) and g.op[v] == "gather" and not g.preds[v]:
            g.op[v] = "embedding"
            done += 1
    return done


def spell_25(g: Any) -> int:
    """2.5's pass: `rope_pairs` then `table_lookup`; the number of rewrites."""
    return rope_pairs(g) + table_lookup(g)


def may_spell_25(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `spell_25` can fire on a canonical graph (a cheap check, so that a graph where it cannot is not
    rebuilt): a `concat` fed by two `add`s, or a `gather` fed by nothing."""
    if "gather" not in ops and ("concat" not in ops or "add" not in ops):
        return False
    names = np.asarray(ops, dtype=object)
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    fed = np.bincount(dst, minlength=len(ops))
    if ((names == "gather") & (fed == 0)).any():
        return True
    pairs = np.bincount(dst[(names[dst] == "concat") & (names[src] == "add")], minlength=len(ops))
    return bool((pairs >= 2).any())
