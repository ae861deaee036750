"""The validation queries the out-of-family score is fitted on (`narbench.search_engine.outside_fit`): a copy of the
index's corpus less the `novel` split's validation families, whole models of the other families (`unseen`'s rule) and
one source's graphs of families two sources implement, searched in that copy; and outside models given beside them."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass
class Validation:
    """What a score is fitted on: the copy of the corpus it searches, and the held-out queries."""

    corpus: Any  # a `GraphDataset` of the corpus less the queries
    queries: list
    labels: np.ndarray  # 1: its family is held out; 0: only its model, or its source, is
    groups: list[str]  # each query's family (cross-validation keeps families whole)
    kinds: np.ndarray  # each query's hold-out: "family", "model", "source" or "outside" (a `wildval` model)


def validation_queries(ds, graphs: list, *, seed: int = 0, in_family: float = 0.1,
                       outside: tuple[list, list[tuple[str, ...]]] | None = None) -> Validation | None:
    """The validation queries of an index of `graphs`: the graphs of `ds`'s `novel` validation families (all of
    them left out of the corpus), whole models of the other families (`group_split`, `in_family` of each
    family's graphs) and, where families have graphs from two sources, one source's graphs of some of them
    (`cross_source_split`; none when no family has two); never one of `unseen`'s test queries; and `outside`'s
    graphs and expected families (a `wildval` model: kind `outside`, a positive when none of its expected families is in the corpus
    copy). None without a `novel` split or when the positives or the held-out models are empty."""
    from narbench.data.dataset import GraphDataset, Split, group_split

    split = ds.splits.get("novel")
    if split is None or "validation" not in split.subsets:
        return None
    held = {ds.graphs[i].family for i in split.test[split.subsets["validation"]].tolist()}
    fam = [g.family for g in graphs]
    every = [set(g.families) for g in graphs]  # real 2.3: a shared graph keeps several; before, its one
    avoid = set(ds.splits["unseen"].test.tolist()) if "unseen" in ds.splits else set()
    rest = [i for i in range(len(graphs)) if not every[i] & held and i not in avoid]
    models = group_split([fam[i] for i in rest], [model_of(graphs[i]) for i in rest], test_size=in_family,
                         seed=seed, name="in-family")
    negative = [rest[j] for j in models.test.tolist()]
    taken = set(negative)
    sources = _held_sources([i for i in rest if i not in taken], graphs, seed)
    out = taken | set(sources)  # and every graph keeping a held-out family, query or not
    kept = [g for i, g in enumerate(graphs) if i not in out and not every[i] & held]
    present = {f for g in kept for f in g.families}
    # a graph of a held-out family that also keeps a family of the corpus has a family that fits: not a positive
    positive = [i for i, f in enumerate(fam) if f in held and i not in avoid and not every[i] & present]
    sources = [i for i in sources if every[i] & present]  # its family is still in the corpus (from another source)
    if not positive or not negative:
        return None
    n = len(kept)
    corpus = GraphDataset(ds.name, ds.version, list(ds.vocab), kept, ds.sha256,
                          Split(train=np.arange(n, dtype=np.int64), test=np.zeros(0, dtype=np.int64), seed=seed,
                                test_size=0.0), meta=ds.meta,
                          outside_sets=ds.outside_sets)  # an index that reads them (graf-lda's `outside`): its copy too
    queries = positive + negative + sources
    kinds = np.array(["family"] * len(positive) + ["model"] * len(negative) + ["source"] * len(sources), dtype=object)
    labels = (kinds == "family").astype(np.int64)
    outside_graphs, outside_families = outside if outside is not None else ([], [])
    fits = np.array([bool(set(f) & present) for f in outside_families], dtype=bool)
    return Validation(corpus, [graphs[i] for i in queries] + list(outside_graphs),
                      np.concatenate([labels, (~fits).astype(np.int64)]),
                      [fam[i] for i in queries] + [f[0] if f else g.name for g, f in zip(outside_graphs, outside_families)],
                      np.concatenate([kinds, np.array(["outside"] * len(outside_graphs), dtype=object)]))


def _held_sources(candidates: list[int], graphs: list, seed: int) -> list[int]:
    """Of `candidates` (indices into `graphs`), those `cross_source_split` holds out: one source's graphs of
    some of the families implemented by two sources or more; none when no family is."""
    from narbench.eval.holdout import cross_source_split

    labels = np.array([graphs[i].family for i in candidates], dtype=object)
    sources = np.array([graphs[i].source for i in candidates], dtype=object)
    try:
        _, held = cross_source_split(labels, sources, seed=seed)
    except ValueError:  # no family has graphs from two sources (nas, one zoo)
        return []
    return [candidates[j] for j in held.tolist()]


def model_of(graph) -> str:
    """The model a graph derives from, as `unseen` groups it (the taxonomy's identity where recorded)."""
    from narbench.search_engine.weak import model_group

    return str(graph.meta.get("identity") or model_group(graph))
