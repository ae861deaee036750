"""Graphs that several families share (`real` 2.3 on): a canonical graph that specs of several families
(and model identities) gave keeps them all (`ArchGraph.families`, `meta["identities"]`), so a split and the
datasheet must treat such a graph as belonging to each.

- `identity_groups`: the unit `unseen` keeps whole: model identities joined by a graph they share
  (connected components), so no model has a variant on each side;
- `whole_group_split`: `group_split` by (primary) family, then every group it left on both sides (a
  group spanning families is chosen per family) moved whole to the corpus;
- `straddling`: the invariant that replaces "no identity on both sides": no identity of any graph on both;
- `shared_counts`: how many graphs carry several families, by the taxonomy's near-duplicate reason group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from narbench.data.dataset import Split, group_split
from narbench.data.graph import ArchGraph
from narbench.datasets.near_duplicates import family_pair

#: the reason group of a family pair the near-duplicate table does not list
UNLISTED = "(no reason listed)"


def model_group(graph: ArchGraph) -> str:
    """The model a graph derives from: its taxonomy identity (`meta["identity"]`, real 2.0), else
    `<family>/<model name>` (model type for transformers; real 1.0).

    Taken from the build's provenance (`meta["model"]`, the name the zoo registers; variants
    and task heads keep their model's name), never from the graph itself. One name in two zoos
    (timm's and torchvision's `vgg16`) is one model: the family is shared and so is the group.
    """
    identity = graph.meta.get("identity")
    if identity:
        return str(identity)
    return f"{graph.family}/{graph.meta.get('model', graph.name)}"


def has_families(graphs: Sequence[ArchGraph]) -> bool:
    """Whether the graphs record every family of their specs (a dataset derived with `keep_families`)."""
    return bool(graphs) and all("families" in g.meta for g in graphs)


def identities_of(graph: ArchGraph) -> tuple[str, ...]:
    """Every model identity of a graph, its own (`model_group`) first."""
    own = model_group(graph)
    return (own, *(str(i) for i in graph.meta.get("identities") or () if str(i) != own))


def identity_groups(graphs: Sequence[ArchGraph]) -> list[str]:
    """Per graph its group: the connected component of model identities that share a graph, named by its
    smallest identity (a graph of one identity that shares nothing: that identity, as in `real` 2.2)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    ids = [identities_of(g) for g in graphs]
    for own, *others in ids:
        for other in others:
            a, b = find(own), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [find(i[0]) for i in ids]


def whole_group_split(labels: Sequence[str], groups: Sequence[str], *, test_size: float = 0.1, seed: int = 0,
                      name: str = "unseen", group_rule: str = "group") -> Split:
    """`group_split` (per label, whole groups), then every group with graphs on both sides moved to the corpus:
    a group spanning labels is chosen label by label, and one side each would put one model on both. Moving to
    the corpus takes queries away but never a query's relevant corpus graphs."""
    base = group_split(list(labels), list(groups), test_size=test_size, seed=seed, name=name, group_rule=group_rule)
    grp = np.asarray(groups, dtype=object)
    both = set(grp[base.train].tolist()) & set(grp[base.test].tolist())
    moved = np.isin(grp[base.test], list(both)) if both else np.zeros(len(base.test), dtype=bool)
    train = np.sort(np.concatenate([base.train, base.test[moved]])).astype(np.int64)
    rule = (base.rule + "; a group whose families chose different sides goes to the corpus whole "
            f"({int(moved.sum())} graphs of {len(both)} groups)")
    return Split(train=train, test=base.test[~moved], seed=seed, test_size=test_size, name=name, rule=rule)


def straddling(graphs: Sequence[ArchGraph], split: Split) -> list[str]:
    """Identities with a graph on each side of `split`, counting every identity of a shared graph (empty: holds)."""
    def side(idx: np.ndarray) -> set[str]:
        return {i for k in idx.tolist() for i in identities_of(graphs[k])}

    return sorted(side(split.train) & side(split.test))


def shared_counts(graphs: Sequence[ArchGraph], reasons: dict[tuple[str, str], str]) -> dict[str, object]:
    """How many graphs carry several families and why: `graphs` (that many), `families` (per count of families),
    `visible_only_so` (families no graph has as its primary one: dedup would have removed them), and
    `by_group`: graphs per near-duplicate reason group of a (primary, other) family pair (`reasons`: family pair
    -> group, the taxonomy's `taxonomy-near-duplicates.csv`; a graph counts once per group it has)."""
    shared = [g for g in graphs if len(g.families) > 1]
    primary = {g.family for g in graphs}
    by_group: Counter = Counter()
    for g in shared:
        by_group.update({reasons.get(family_pair(g.family, f)) or UNLISTED for f in g.families[1:]})
    return {"graphs": len(shared), "families": dict(sorted(Counter(len(g.families) for g in shared).items())),
            "visible_only_so": sorted({f for g in shared for f in g.families} - primary),
            "by_group": dict(sorted(by_group.items(), key=lambda kv: (-kv[1], kv[0])))}
