"""Relevance: which corpus items count as relevant to a query.

A corpus item is relevant to a query when they share a family. A label is one family (a string or an
id, every dataset before `real` 2.3) or a tuple of families (`ArchGraph.families`: a canonical graph
that specs of several families share keeps them all, `real` 2.3 on). With one family per graph this
is "the item has the query's family", and the relevant items of a label are listed exactly as before
(ascending corpus index), so every metric of a single-family dataset is bit for bit what it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: the rule, as a result file's dataset record states it where a graph has several families
RULE = "shared family: a corpus item is relevant to a query when they share a family"


def families_of(label: Any) -> tuple:
    """The families a label stands for: a tuple, list or set of families as a tuple, anything else as one."""
    if isinstance(label, (tuple, list, set, frozenset)):
        return tuple(label)
    return (label,)


def relevance_labels(graphs: Sequence, family_ids: np.ndarray | None = None) -> np.ndarray:
    """Per graph what relevance compares: where no graph has several families, `family_ids` (given) or
    the family; else the tuple of its families (an object array, one entry per graph)."""
    if all(len(g.families) == 1 for g in graphs):
        return np.asarray(family_ids) if family_ids is not None else np.array([g.family for g in graphs], dtype=object)
    out = np.empty(len(graphs), dtype=object)
    for i, g in enumerate(graphs):
        out[i] = tuple(g.families)
    return out


def has_several(labels: Sequence) -> bool:
    """Whether any label stands for more than one family."""
    return any(len(families_of(lab)) > 1 for lab in np.asarray(labels, dtype=object).tolist())


class Relevance:
    """The corpus items relevant to a label (sorted corpus indices), computed once per distinct label."""

    def __init__(self, corpus_labels: Sequence):
        labels = corpus_labels.tolist() if isinstance(corpus_labels, np.ndarray) else list(corpus_labels)
        members: dict[Any, list[int]] = {}
        for i, lab in enumerate(labels):
            for fam in families_of(lab):
                members.setdefault(fam, []).append(i)
        self._members = {fam: np.asarray(idx, dtype=np.int64) for fam, idx in members.items()}
        self._cache: dict[tuple, np.ndarray] = {}

    def __call__(self, label: Any) -> np.ndarray:
        """Sorted corpus indices sharing a family with `label` (empty when none does)."""
        fams = families_of(label)
        key = tuple(sorted(set(fams), key=repr))
        hit = self._cache.get(key)
        if hit is None:
            parts = [self._members[f] for f in key if f in self._members]
            hit = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts)) if parts \
                else np.zeros(0, dtype=np.int64)
            self._cache[key] = hit
        return hit

    def key(self, label: Any) -> tuple:
        """What two labels with the same relevant items share (their family set)."""
        return tuple(sorted(set(families_of(label)), key=repr))
