"""The validation split: training graphs held out as validation queries, the rest their pool.

What chooses among variants without looking at the test queries (`best-floor`, `graf-lda`,
the learning curves of `narbench run --curve`): the held-out graphs query the pool, retrieval is
judged on the family, as a run is. Families with at least two training graphs are split
stratified by family (scikit-learn `train_test_split`, `VALIDATION_FRACTION` held out,
`VALIDATION_SEED`), the rule of the datasets' own standard split.

`cross_source_split` carves a validation split of another kind (issue 38): among the families
that more than one source (zoo, package) implements, a seeded choice of families has the graphs
of one source held out as queries, the family's graphs from other sources staying in the pool
as the relevant ones. It asks what `crossimpl` asks (does a design written by one codebase find
its kind written by another?) without touching `crossimpl`.
"""

from __future__ import annotations

import numpy as np

#: share of the training graphs (of families with at least two) held out as validation queries
VALIDATION_FRACTION = 0.1
#: seed of the validation split (fixed: it does not depend on the run's seed except through its training graphs)
VALIDATION_SEED = 0


def validation_split(labels: np.ndarray, fraction: float = VALIDATION_FRACTION,
                     seed: int = VALIDATION_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(pool, validation) indices into `labels`: a stratified hold-out of families with >= 2 members.

    Families with one member stay in the pool; a held-out member whose family has nothing left
    in the pool goes back to it. At least one member per splittable family is held out when the
    fraction is too small for scikit-learn's stratification. ValueError when no family has two members.
    """
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels)
    idx = np.arange(len(labels))
    uniq, counts = np.unique(labels, return_counts=True)
    splittable = np.isin(labels, uniq[counts >= 2])
    n_classes, n_split = int((counts >= 2).sum()), int(splittable.sum())
    if n_classes == 0:
        raise ValueError("no family has two training graphs; nothing to validate on")
    n_val = min(max(int(round(fraction * n_split)), n_classes), n_split - n_classes)
    if n_val < n_classes:  # every splittable family has exactly two members and there are too few: one each
        rng = np.random.default_rng(seed)
        val = np.array([rng.choice(np.flatnonzero(labels == lab)) for lab in uniq[counts >= 2]], dtype=np.int64)
    else:
        _, val = train_test_split(idx[splittable], test_size=n_val, stratify=labels[splittable], random_state=seed)
    val = np.sort(np.asarray(val, dtype=np.int64))
    pool = np.setdiff1d(idx, val)
    keep = np.isin(labels[val], labels[pool])
    return np.sort(np.concatenate([pool, val[~keep]])), val[keep]


#: Held-out rules of a validation split: stratified by family, or one source of some families.
HOLDOUT_RULES = ("family", "cross-source")


def smallest_sources(labels, sources) -> dict:
    """{family: indices of its smallest source's graphs (ties: the first name)} for every family of `labels`
    that two or more `sources` implement, families in order of their names: the graphs a cross-source hold-out
    queries with (`cross_source_split`, and benchmarks/search/choose_index.py's `source` side)."""
    by_family: dict = {}
    for i, (lab, src) in enumerate(zip(np.asarray(labels).tolist(), np.asarray(sources).astype(str).tolist())):
        by_family.setdefault(lab, {}).setdefault(src, []).append(i)
    out = {}
    for lab in sorted((lab for lab, srcs in by_family.items() if len(srcs) >= 2), key=str):
        srcs = by_family[lab]
        out[lab] = srcs[min(srcs, key=lambda s: (len(srcs[s]), s))]
    return out


def cross_source_split(labels: np.ndarray, sources: np.ndarray, fraction: float = VALIDATION_FRACTION,
                       seed: int = VALIDATION_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(pool, validation) indices: for families implemented by at least two sources, chosen in a
    seeded order until about `fraction` of all graphs are held out (at least one family), the
    graphs of the family's smallest source (ties: the first name) are validation queries; their
    family's graphs from the other sources stay in the pool. ValueError when no family has two sources."""
    labels = np.asarray(labels)
    held = smallest_sources(labels, sources)
    if not held:
        raise ValueError("no family has training graphs from two sources; nothing to validate across sources on")
    eligible = list(held)
    order = np.random.default_rng(seed).permutation(len(eligible))
    target = max(1, int(round(fraction * len(labels))))
    val: list[int] = []
    for j in order.tolist():
        val.extend(held[eligible[j]])
        if len(val) >= target:
            break
    val_arr = np.sort(np.asarray(val, dtype=np.int64))
    return np.setdiff1d(np.arange(len(labels)), val_arr), val_arr
