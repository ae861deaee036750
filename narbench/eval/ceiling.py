"""The ceiling: what a graph-only method could reach at best on a split (issue 37, item 4).

The oracle knows every label (the query's family and every corpus graph's) but sees graphs
only up to structure: graphs in one *structure class* are interchangeable to it.

- **Structure classes.** `iso`: isomorphism classes, by `narbench.datasets.taxonomy.canonical_hash`
  (graphs are bucketed by the taxonomy's cheap invariant first, so only graphs that share a bucket
  are hashed). `nd` (near-duplicate, `real` only): connected components of the graph pairs at WL
  cosine >= 0.999 (`taxonomy.near_duplicate_pairs`, the taxonomy's `NEAR_DUPLICATE_WL`, decided
  exactly on integer WL counts), isomorphism classes included. `iso` is the bound (`KINDS`) on
  every method that sees a query only as its graph up to isomorphism (the rule below maximises a
  single query's expected DCG; for RR and AP it is the natural rule, not proven optimal). `nd` is a *reference*, no bound on anything
  (methods resolve finer than WL-0.999, and graf-lda scores above it on real 2.2): the score of a
  method that cannot separate what the taxonomy calls near-duplicates, which says which families
  lose their queries to another family's graphs at that resolution.
- **The rule.** Queries are grouped by structure class (two queries with the same structure get
  the same ranking). For a group, every corpus graph scores the summed relevance of its class
  over the group's queries, as shares: key(class) = sum over the group's queries q of
  |class ∩ family(q)| / |class|. For a group of one query that is the class's share of graphs of
  the query's family. Corpus graphs are ranked by key, highest first; graphs of equal key (one
  class, or classes with equal keys) are in uniformly random order. Ordering by the share
  maximises the expected DCG of a single query (rearrangement inequality; a class is one tied
  block) and is the summed-relevance vote for a group; for RR and AP it is the natural rule, not
  proven optimal. Graphs of key 0 are irrelevant to every query of the group: they fill the
  ranking up to its depth in corpus order (any order scores the same).
- **Two rules.** `label` is the rule above: the query labels of a group choose its ranking, the
  ceiling of any function of the query's structure (exact when every class is pure and no two
  queries of different families share a structure: then it scores 1). `vote` chooses it
  from the corpus instead where the corpus holds the group's structure: the weights are the
  families of the corpus graphs of that class (the query labels where the corpus has no graph of
  it). That is the best a method can do that knows the query only by its structure and learns the
  labels from the corpus: a query whose structure is another family's in the corpus is ranked as
  that family's.
- **The numbers.** The metrics are the project's own (`narbench.eval.metrics.score_rankings`,
  ranx) on the same corpus and queries as `narbench run` (`narbench.harness.runner.select`, the
  `quick` profile: the whole split), averaged over `DRAWS` seeded random tie orders. The exact
  expectation over tie orders is computed in closed form too (`expected_metrics`) and the largest
  gap between the two is reported (`exact_gap`).

`narbench.cli.ceiling` (`python -m narbench.cli.ceiling`) computes the structure classes
(`taxonomy.canonical_hash`, near-duplicate pairs), loads the splits and writes `leaderboard/ceiling.csv` (per dataset, split and
resolution, beside the best committed result of the split) and `leaderboard/ceiling-families.csv`
(per family on `real` unseen; the rows: `narbench.leaderboard.ceiling`); `--splits real:crossimpl`
recomputes only those rows (the others are kept). docs/datasets.md, "The ceiling", reads the tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from narbench.eval.metrics import KS, score_rankings
from narbench.eval.relevance import Relevance

#: seeded random tie orders averaged per split
DRAWS = 20
SEED = 0
#: the ranking depth of `narbench run` (`RunConfig.top_k`)
DEPTH = 100
RESOLUTIONS = ("iso", "nd")
#: what a resolution's rows are: `iso` bounds every method that sees a graph only up to isomorphism; `nd`
#: (WL cosine >= 0.999 tied) bounds nothing (methods resolve finer: graf-lda exceeds it on real 2.2), it is a
#: reference of what WL-resolution features can tell apart
KINDS = {"iso": "bound", "nd": "reference"}
#: `label`: query labels choose a group's ranking (the ceiling); `vote`: corpus labels of the query's structure
RULES = ("label", "vote")
#: the (resolution, rule) rows computed on `real` (`nas`: iso/label only, its graphs are pairwise non-isomorphic)
VARIANTS = (("iso", "label"), ("iso", "vote"), ("nd", "label"), ("nd", "vote"))
#: query subsets of a split reported as rows of their own (`<split>/<subset>`, as the leaderboard names them)
SUBSETS = ("exact", "reimpl")
#: (dataset, split) in the order computed; crossimpl last (its data file may be rebuilt)
SPLITS = (("nas", "standard"), ("real", "standard"), ("real", "unseen"), ("real", "crossimpl"))
#: the metrics of the tables: the leaderboard's nine, MAP in the capped convention (MAPc)
TABLE_METRICS = tuple(f"{m}@{k}" for m in ("ndcg", "mrr", "map_capped") for k in KS)
BEST_METRICS = ("ndcg@20", "mrr@20", "map_capped@20")
#: a family is hopeless on a split when no committed configuration's mean NDCG@20 over its queries reaches this
HOPELESS = 0.02
CEILING_CSV = Path("leaderboard/ceiling.csv")
FAMILIES_CSV = Path("leaderboard/ceiling-families.csv")
RESULTS_DIR = Path("leaderboard/results")


def _renumber(ids: np.ndarray) -> np.ndarray:
    """Ids 0.. in order of first appearance (so the numbering does not depend on hash values)."""
    ids = np.asarray(ids).reshape(-1)
    _, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    return order[inv.reshape(-1)].astype(np.int64)


# ----------------------------------------------------------------------------- the oracle


@dataclass
class Group:
    """The queries of one structure class and the oracle's tie blocks of corpus graphs for them."""

    queries: np.ndarray  # query positions
    blocks: list[np.ndarray]  # corpus positions per tie block, best key first (key > 0 only)
    block_classes: list[np.ndarray]  # corpus class ids per block
    fill: np.ndarray  # corpus positions of key 0, in corpus order, enough to reach the depth


@dataclass
class Ceiling:
    """The oracle's scores on one set of queries: means and per-query values (mean over draws)."""

    means: dict[str, float]
    per_query: dict[str, np.ndarray]
    exact_means: dict[str, float]
    exact_per_query: dict[str, np.ndarray]
    draws: int
    groups: int
    exact_gap: float = field(init=False)

    def __post_init__(self) -> None:
        common = [m for m in self.exact_means if m in self.means]
        self.exact_gap = max((abs(self.means[m] - self.exact_means[m]) for m in common), default=0.0)


class _Corpus:
    """Corpus counts per (class, label): sizes, members, and per label the classes holding its relevant graphs.

    `labels`: encoded label ids; `values`: per id the label it encodes (a family or a tuple of families:
    relevance is a shared family, `narbench.eval.relevance`)."""

    def __init__(self, labels: np.ndarray, classes: np.ndarray, values: list):
        self.labels, self.classes, self.values = labels, classes, values
        self.num_classes = int(classes.max(initial=-1)) + 1
        self.size = np.bincount(classes, minlength=self.num_classes)
        order = np.argsort(classes, kind="stable")
        bounds = np.searchsorted(classes[order], np.arange(self.num_classes + 1))
        self.members = [order[bounds[c]:bounds[c + 1]] for c in range(self.num_classes)]
        self._relevant = Relevance([values[lab] for lab in labels.tolist()])
        self._by_label: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def by_label(self, label: int) -> tuple[np.ndarray, np.ndarray]:
        """(classes, counts): the classes holding corpus graphs relevant to `label`, ascending, and how many each."""
        if label not in self._by_label:
            self._by_label[label] = np.unique(self.classes[self._relevant(self.values[label])], return_counts=True)
        return self._by_label[label]

    def total(self, label: int) -> int:
        """|R|: the corpus graphs relevant to `label`."""
        return int(self.by_label(label)[1].sum())

    def count(self, label: int, classes: np.ndarray) -> int:
        """|union of `classes` ∩ the graphs relevant to label|."""
        cls, cnt = self.by_label(label)
        counts = dict(zip(cls.tolist(), cnt.tolist()))
        return sum(counts.get(c, 0) for c in classes.tolist())


def _values(*arrays: Sequence) -> list:
    """The distinct values of the arrays in the order `_encode` numbers them (value of id i at i)."""
    index: dict[Any, int] = {}
    for a in arrays:
        for v in _items(a):
            index.setdefault(v, len(index))
    return list(index)


def _items(a: Sequence) -> list:
    return a.tolist() if isinstance(a, np.ndarray) else list(a)


def _encode(*arrays: Sequence) -> list[np.ndarray]:
    """The arrays' values as int ids over their union (equal values, equal ids)."""
    index: dict[Any, int] = {}
    return [np.array([index.setdefault(v, len(index)) for v in _items(a)], dtype=np.int64) for a in arrays]


def oracle_groups(query_labels: Sequence, query_classes: Sequence, corpus_labels: Sequence, corpus_classes: Sequence,
                  *, depth: int = DEPTH, rule: str = "label") -> tuple[list[Group], _Corpus, np.ndarray]:
    """The oracle's groups (see the module docstring) and the encoded corpus and query labels.

    Class ids are shared between queries and corpus (equal ids: same structure); labels are any hashables,
    a tuple standing for several families (relevant: a corpus graph sharing one with the query).
    `rule`: `label` weighs the corpus classes by the group's query labels; `vote` by the labels of the
    corpus graphs of the group's own structure where the corpus has that structure (the query labels
    where it has not).
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    q_lab, c_lab = _encode(query_labels, corpus_labels)
    q_cls, c_cls = _encode(query_classes, corpus_classes)
    if len(q_lab) != len(q_cls) or len(c_lab) != len(c_cls):
        raise ValueError("one label and one class per graph")
    corpus = _Corpus(c_lab, c_cls, _values(query_labels, corpus_labels))
    depth = min(depth, len(c_lab))
    groups = []
    q_order = np.argsort(q_cls, kind="stable")
    q_bounds = np.searchsorted(q_cls[q_order], np.unique(q_cls))
    cache: dict[tuple, tuple] = {}  # groups with the same label counts get the same blocks
    for members in np.split(q_order, q_bounds[1:]):
        if len(members) == 0:
            continue
        weights = Counter(q_lab[members].tolist())
        own = int(q_cls[members[0]])
        if rule == "vote" and own < corpus.num_classes and corpus.size[own] > 0:
            weights = Counter(c_lab[corpus.members[own]].tolist())
        signature = tuple(sorted(weights.items()))
        if signature in cache:
            groups.append(Group(np.sort(members), *cache[signature]))
            continue
        num = np.zeros(corpus.num_classes, dtype=np.float64)
        for lab, w in weights.items():
            cls, cnt = corpus.by_label(lab)
            num[cls] += w * cnt  # exact integers
        nz = np.flatnonzero(num > 0)
        key = num[nz] / corpus.size[nz]  # correctly rounded: equal ratios give equal floats
        blocks, block_classes, taken = [], [], 0
        for level in np.unique(key)[::-1]:
            if taken >= depth:
                break
            cls = nz[key == level]
            items = np.sort(np.concatenate([corpus.members[c] for c in cls]))
            blocks.append(items)
            block_classes.append(cls)
            taken += len(items)
        fill = np.zeros(0, dtype=np.int64)
        if taken < depth:
            used = np.zeros(len(c_lab), dtype=bool)
            for c in nz:
                used[corpus.members[c]] = True
            fill = np.flatnonzero(~used)[:depth - taken]
        cache[signature] = (blocks, block_classes, fill)
        groups.append(Group(np.sort(members), blocks, block_classes, fill))
    return groups, corpus, q_lab


def draw_rankings(groups: list[Group], num_queries: int, depth: int, draw: int, seed: int = SEED) -> np.ndarray:
    """The oracle's rankings [num_queries, depth] for one random tie order (`draw`), same for a group's queries."""
    ranked = np.empty((num_queries, depth), dtype=np.int64)
    for gi, g in enumerate(groups):
        rng = np.random.default_rng([seed, draw, gi])
        parts, taken = [], 0
        for items in g.blocks:
            need = depth - taken
            if need <= 0:
                break
            parts.append(rng.permutation(items)[:need])
            taken += len(parts[-1])
        parts.append(g.fill[:max(0, depth - taken)])
        row = np.concatenate(parts)
        if len(row) != depth:
            raise AssertionError(f"group {gi}: {len(row)} ranked, expected {depth}")
        ranked[g.queries] = row
    return ranked


def expected_metrics(blocks: Sequence[tuple[int, int]], n_rel: int, ks: Iterable[int] = KS) -> dict[str, float]:
    """Exact expectation over uniformly random orders inside each block of the ranx metrics of one query.

    `blocks`: (relevant, size) per tie block in rank order (the rest of the ranking irrelevant);
    `n_rel` = |R|. Keys `mrr@k`, `map@k` (ranx: / |R|), `map_capped@k` (/ min(k, |R|)), `ndcg@k`
    (ideal cut at min(k, |R|)). With r relevant among s in a block starting after o positions and
    R relevant before it: E[rel at o+j] = r/s; E[rel * hits up to o+j] = r/s (1 + R + (j-1)(r-1)/(s-1));
    P(first relevant at o+j) = C(s-j, r-1) / C(s, r) when R = 0.
    """
    ks = tuple(ks)
    depth = max(ks)
    e_rel, e_prec_num, p_first = np.zeros(depth), np.zeros(depth), np.zeros(depth)
    offset, before = 0, 0
    for r, s in blocks:
        if offset >= depth:
            break
        if s <= 0:
            continue
        j = np.arange(1, min(s, depth - offset) + 1, dtype=np.float64)
        pos = offset + j.astype(np.int64) - 1
        e_rel[pos] = r / s
        inner = (j - 1) * (r - 1) / (s - 1) if s > 1 else np.zeros_like(j)
        e_prec_num[pos] = (r / s) * (1 + before + inner)
        if before == 0 and r > 0:
            ratios = np.ones_like(j)
            ratios[1:] = np.maximum(s - j[:-1] - r + 1, 0) / (s - j[:-1])
            p_first[pos] = (r / s) * np.cumprod(ratios)
        offset += s
        before += r
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    disc = 1.0 / np.log2(ranks + 1)
    out = {}
    for k in ks:
        ideal = disc[:min(k, n_rel)].sum()
        out[f"mrr@{k}"] = float((p_first[:k] / ranks[:k]).sum())
        ap = float((e_prec_num[:k] / ranks[:k]).sum()) / n_rel if n_rel else 0.0
        out[f"map@{k}"] = ap
        out[f"map_capped@{k}"] = ap * n_rel / min(k, n_rel) if n_rel else 0.0
        out[f"ndcg@{k}"] = float((e_rel[:k] * disc[:k]).sum()) / ideal if ideal else 0.0
    return out


def ceiling(query_labels: Sequence, query_classes: Sequence, corpus_labels: Sequence, corpus_classes: Sequence,
            *, depth: int = DEPTH, draws: int = DRAWS, seed: int = SEED, ks: tuple[int, ...] = KS,
            rule: str = "label") -> Ceiling:
    """The oracle's metrics (ranx, mean over `draws` seeded tie orders) and their exact expectation.

    `query_classes` / `corpus_classes`: structure class per graph, ids shared between the two sides.
    Deterministic for a given seed.
    """
    if draws < 1:
        raise ValueError("draws must be at least 1")
    groups, corpus, q_lab = oracle_groups(query_labels, query_classes, corpus_labels, corpus_classes, depth=depth,
                                          rule=rule)
    depth = min(depth, len(corpus.labels))
    nq = len(q_lab)
    several = any(isinstance(v, tuple) and len(v) > 1 for v in corpus.values)

    def labels_of(ids: np.ndarray):
        """What `score_rankings` compares: the ids (one family per graph, as before) or the family tuples."""
        if not several:
            return ids
        out = np.empty(len(ids), dtype=object)
        for j, i in enumerate(ids.tolist()):
            out[j] = corpus.values[i]
        return out

    sums: dict[str, np.ndarray] = {}
    for d in range(draws):
        ranked = draw_rankings(groups, nq, depth, d, seed)
        _, per_query = score_rankings(labels_of(q_lab), labels_of(corpus.labels), ranked, ks=ks)
        for m, v in per_query.items():
            sums[m] = sums.get(m, 0.0) + v
    per_query = {m: v / draws for m, v in sums.items()}
    exact: dict[str, np.ndarray] = {}
    for g in groups:
        for qi in g.queries.tolist():
            lab = int(q_lab[qi])
            blocks = [(corpus.count(lab, cls), len(items)) for items, cls in zip(g.blocks, g.block_classes)]
            for m, v in expected_metrics(blocks, corpus.total(lab), ks).items():
                exact.setdefault(m, np.zeros(nq))[qi] = v
    return Ceiling({m: float(v.mean()) for m, v in per_query.items()}, per_query,
                   {m: float(v.mean()) for m, v in exact.items()}, exact, draws, len(groups))
