"""What a result's per-query scores can be at all: checks that catch a forged file whose means
agree with its per-query scores (`narbench.eval.validation` checks that) but whose scores no ranking
could give.

Two kinds of check, both on the per-query sidecar (`narbench.eval.metrics` defines the metrics):

- **Without the data** (`shape_problem`): MRR@k is 0 or 1/r for a rank r <= k, and the same at
  every cut-off that reaches the first relevant item (0 at those that do not); AP@k (ranx's `map@k`)
  never falls as k grows; MRR@k and NDCG@k are zero together (both say "nothing relevant in the top k").
- **With the split's relevant counts** (`bound_problem`): |R| = the corpus items sharing a family with the
  query (`narbench.eval.relevance`) among the corpus the run scored (`evaluated` picks the queries and the corpus as
  `narbench.harness.runner.select` does). Then `map@k` = (sum of the precisions at relevant ranks)
  / |R| <= min(k, |R|) / |R|; `map_capped@k` = `map@k` * |R| / min(k, |R|); `ndcg_paper@k` =
  `ndcg@k` * IDCG(min(k, |R|)) / max(0.3, IDCG(|R|)). A file claiming MAP@20 = 1.0 on `nas`, whose
  families have thousands of members, fails here.

Every comparison allows the sidecar's rounding (6 decimals, `TOLERANCE`). What no check can catch:
a forged ranking that is possible (scores of a run that was never made but could have been); only
re-running a deterministic encoder shows that (`narbench leaderboard --verify`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from narbench.eval.metrics import KS, uncut_ideal_ratio
from narbench.eval.relevance import Relevance, has_several

#: per-query scores in a sidecar are rounded to 6 decimals (5e-7 off at most); twice that, for a ratio of two
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Evaluated:
    """What a run of one profile and seed scores on one split: |R| per query (in the order the runner
    scores the queries, the sidecar's order) and the size of the corpus."""

    relevant: np.ndarray
    num_corpus: int


def evaluated(families: np.ndarray, split: Any, max_corpus: int | None, max_queries: int | None,
              seed: int, labels: np.ndarray | None = None) -> Evaluated:
    """What a run scores on `split` (a `Split`) of a dataset whose graphs have (primary) `families`, with
    the profile's `max_corpus` / `max_queries` and `seed`: the corpus and queries of
    `narbench.data.dataset.evaluation_sides`, as `narbench.harness.runner.select` takes them. `labels`:
    per graph what relevance compares where a graph has several families (`relevance.relevance_labels`);
    |R| is then the corpus items sharing a family with the query."""
    from narbench.data.dataset import evaluation_sides

    fam = np.asarray(families)
    corpus, queries = evaluation_sides(fam, split, max_corpus, max_queries, seed)
    if labels is not None and has_several(labels):
        relevant_to = Relevance(labels[corpus])
        relevant = np.array([len(relevant_to(lab)) for lab in labels[queries].tolist()], dtype=np.int64)
        return Evaluated(relevant, int(len(corpus)))
    names, counts = np.unique(fam[corpus], return_counts=True)
    relevant = counts[np.searchsorted(names, fam[queries])]
    return Evaluated(relevant.astype(np.int64), int(len(corpus)))


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def shape_problem(per_query: dict[str, np.ndarray], ks: tuple[int, ...] = KS) -> str | None:
    """The first per-query score no ranking can give, whatever the data (one line), or None."""
    for k in ks:
        mrr = per_query[f"mrr@{k}"]
        rank = np.rint(1.0 / np.where(mrr > 0, mrr, 1.0))
        off = (mrr > 0) & ((np.abs(mrr - 1.0 / np.maximum(rank, 1)) > TOLERANCE) | (rank > k))
        if off.any():
            q = _first(off)
            return (f"query {q}'s mrr@{k} is {mrr[q]:.6f}, not 0 nor 1/r for a rank r <= {k} (MRR is the reciprocal "
                    "rank of the first relevant item)")
        zero = (mrr > 0) != (per_query[f"ndcg@{k}"] > 0)
        if zero.any():
            q = _first(zero)
            return (f"query {q} has mrr@{k} {mrr[q]:.6f} but ndcg@{k} {per_query[f'ndcg@{k}'][q]:.6f}: both are 0 "
                    f"exactly when no relevant item is in the top {k}")
    for lo, hi in zip(ks, ks[1:]):
        mrr_lo, mrr_hi = per_query[f"mrr@{lo}"], per_query[f"mrr@{hi}"]
        reached = mrr_hi >= 1.0 / lo - TOLERANCE  # the first relevant item lies within the top `lo`
        off = np.where(reached, np.abs(mrr_lo - mrr_hi) > TOLERANCE, mrr_lo > TOLERANCE)
        if off.any():
            q = _first(off)
            return (f"query {q}'s mrr@{lo} {mrr_lo[q]:.6f} disagrees with its mrr@{hi} {mrr_hi[q]:.6f} (the first "
                    f"relevant item has one rank)")
        fell = per_query[f"map@{hi}"] < per_query[f"map@{lo}"] - TOLERANCE
        if fell.any():
            q = _first(fell)
            return (f"query {q}'s map@{hi} {per_query[f'map@{hi}'][q]:.6f} is below its map@{lo} "
                    f"{per_query[f'map@{lo}'][q]:.6f} (AP@k only gains terms as k grows)")
    return None


def bound_problem(per_query: dict[str, np.ndarray], relevant: np.ndarray, ks: tuple[int, ...] = KS) -> str | None:
    """The first per-query score above what |R| (`relevant`, per query) allows, or a derived metric that
    disagrees with the one it is derived from (one line), or None."""
    r = np.asarray(relevant, dtype=np.float64)
    for k in ks:
        cut = np.minimum(k, r)
        ap = per_query[f"map@{k}"]
        over = ap > cut / r + TOLERANCE
        if over.any():
            q = _first(over)
            return (f"query {q}'s map@{k} is {ap[q]:.6f} but its {int(r[q])} relevant items allow at most "
                    f"{cut[q] / r[q]:.6f} (min({k}, |R|) / |R|): impossible on this split")
        capped = per_query.get(f"map_capped@{k}")
        if capped is not None:
            scale = r / cut
            off = np.abs(capped - ap * scale) > TOLERANCE * (1.0 + scale)
            if off.any():
                q = _first(off)
                return (f"query {q}'s map_capped@{k} is {capped[q]:.6f}, not its map@{k} x |R| / min({k}, |R|) = "
                        f"{ap[q] * scale[q]:.6f} ({int(r[q])} relevant items)")
        paper = per_query.get(f"ndcg_paper@{k}")
        if paper is not None:
            ratio = uncut_ideal_ratio(r.astype(np.int64), k)
            off = np.abs(paper - per_query[f"ndcg@{k}"] * ratio) > 2 * TOLERANCE
            if off.any():
                q = _first(off)
                return (f"query {q}'s ndcg_paper@{k} is {paper[q]:.6f}, not its ndcg@{k} x IDCG(min({k}, |R|)) / "
                        f"IDCG(|R|) = {per_query[f'ndcg@{k}'][q] * ratio[q]:.6f} ({int(r[q])} relevant items)")
    return None
