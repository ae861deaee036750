"""Weak hits: a cosine means something only against the index's own distribution (each encoder has
its own scale), so an index records `weak_below` (`weak_threshold`): the cosine that 95% of its
graphs reach to their nearest graph of *another model* when their own model is left out, as a
search for a model in no zoo is. A hit below it is closer to no design than nearly every
architecture of the index is to its nearest other model: `narbench search` marks it weak.
"""

from __future__ import annotations

import numpy as np

from narbench.data.graph import ArchGraph

#: A hit is weak below the cosine this share of the index's graphs reach to their nearest other model.
WEAK_QUANTILE = 0.05
#: At most this many graphs (seeded sample) are searched for the threshold (an estimate of a quantile).
WEAK_SAMPLE = 2000


def model_group(graph: ArchGraph) -> str:
    """The model a graph derives from, the rule of the `unseen` split (`narbench.datasets.real.
    model_group`) for any dataset: `<family>/<meta["model"]>` (the zoo's model name, which
    variants and task heads keep), else `<family>/<name>`."""
    return f"{graph.family}/{graph.meta.get('model', graph.name)}"


def weak_threshold(embeddings: np.ndarray, groups: list[str], *, quantile: float = WEAK_QUANTILE,
                   sample: int = WEAK_SAMPLE, seed: int = 0) -> float | None:
    """The `quantile` of the cosine from an index graph to its nearest graph of another model
    (leave-one-model-out), over a seeded sample of `sample` graphs; None with a single model.

    On principle, not tuned on any query: it says how close the architectures of the index are
    to their nearest *other* model, which is what a search for a new model can hope for.
    """
    emb = np.asarray(embeddings, dtype=np.float32)
    codes = np.unique(np.asarray(groups, dtype=object), return_inverse=True)[1].reshape(-1)
    n = len(emb)
    rows = np.arange(n) if n <= sample else np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    best, step = [], max(1, 2**24 // max(n, 1))  # blocks of <= 64 MB of similarities
    for lo in range(0, len(rows), step):
        block = rows[lo : lo + step]
        sims = emb[block] @ emb.T
        sims[codes[block][:, None] == codes[None, :]] = -np.inf
        best.append(sims.max(axis=1))
    best = np.concatenate(best) if best else np.zeros(0)
    best = best[np.isfinite(best)]
    return round(float(np.quantile(best, quantile)), 4) if len(best) else None
