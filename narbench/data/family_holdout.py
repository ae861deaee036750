"""Whole families held out (leave-k-families-out): the families whose graphs become queries with no
member of their family left in the corpus, as a model of a design no zoo holds is.

`real`'s `novel` split (`narbench.datasets.novel`) and an index's out-of-family calibration
(`narbench.search_engine.outside`) take families by this one rule: in the order of
sha256("<seed>:<family>") (fixed on any machine and library version, as `group_split` orders its
groups), skipping families not `eligible` or in `exclude`, until at least `min_families` families
and `min_queries` graphs are held out; k is the count at which both first hold. `max_share` caps k
at that share of the families, so a small corpus keeps most of its designs.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Sequence


def family_order(families: Collection[str], seed: int) -> list[str]:
    """`families` in the order of sha256("<seed>:<family>")."""
    return sorted(set(families), key=lambda f: hashlib.sha256(f"{seed}:{f}".encode()).hexdigest())


def leave_families_out(labels: Sequence[str], *, seed: int, min_families: int, min_queries: int,
                       eligible: Collection[str] | None = None, exclude: Collection[str] = (),
                       max_share: float = 1.0) -> list[str]:
    """The families to hold out of a corpus whose graphs have family `labels`, in the order taken (module
    docstring). Fewer than `min_families` when the eligible families or `max_share` run out first."""
    sizes = Counter(labels)
    skip = set(exclude)
    allowed = set(sizes) if eligible is None else set(eligible) & set(sizes)
    cap = int(max_share * len(sizes))
    taken: list[str] = []
    graphs = 0
    for family in family_order(allowed - skip, seed):
        if len(taken) >= cap or (len(taken) >= min_families and graphs >= min_queries):
            break
        taken.append(family)
        graphs += sizes[family]
    return taken
