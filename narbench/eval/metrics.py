"""Scoring with ranx: MRR, MAP and NDCG at 20, 50 and 100 (the paper's nine numbers).

Relevance: a corpus item is relevant to a query when it shares a family with it (`narbench.eval.relevance`:
with one family per graph, when it has the query's family; `real` 2.3's graphs may have several).
The metrics are ranx's own. One addition is derived from ranx's per-query output, not
re-implemented: ranx's AP@k divides by *all* relevant items |R| (the TREC convention), which
caps MAP@k at k/|R| when a query has thousands of relevant items (as on `nas`); the paper's
MAP values imply the other common convention, dividing by min(k, |R|). `map_capped@k`
rescales ranx's per-query AP@k by |R| / min(k, |R|) to give that convention.

The paper's convention (the authors' evaluator, `TerryPei/NNRetrieval`, evaluation/eval.py and
evaluation/evaluator.py, function `evaluator`; docs/protocol.md) is also computed from the same
rankings, so their numbers can be compared like with like (`PAPER_CONVENTION`):

- MRR@k: the same definition as ranx's (`mrr@k`).
- MAP@k: eval.py divides the AP sum by min(k, |R|) (= `map_capped@k`); evaluator.py divides it
  by max(1, |R|) (= ranx's `map@k`). No new metric is needed for either.
- NDCG@k: both scripts divide DCG@k by the ideal DCG of *all* |R| relevant items, not cut at k
  (floored at 0.3), so a query with |R| > k cannot reach 1. `ndcg_paper@k` rescales ranx's
  per-query NDCG@k (whose ideal is cut at min(k, |R|)) by IDCG(min(k, |R|)) / max(0.3, IDCG(|R|)),
  IDCG(n) = sum_{i=1..n} 1/log2(i+1) (binary relevance).

How ranx is called. `ranx.evaluate` on `Qrels`/`Run` objects builds nested string-keyed
dictionaries (on `nas`, 3,000 queries x ~2,700 relevant documents: 8M entries), which costs
far more than the metrics. `score_rankings` hands ranx's metric functions
(`ranx.metrics.reciprocal_rank`, `average_precision`, `ndcg`) the typed lists those objects are
converted to, built directly with numpy: per query, a float64 array of (document id,
relevance) rows for the qrels and of (document id, score) rows in rank order for the run. The
document id is the corpus index (ranx would use a hash of the id string; only equality of ids
matters to the metrics). The per-query values are the ones `ranx.evaluate` gives for the same
rankings (tests/test_metrics.py compares both paths).

ranx's metric functions are numba functions compiled on first use and cached on disk
(`cache=True`; `narbench.core.jit` puts the cache under narbench's cache dir when ranx's package
directory is not writable), so the compilation is paid once per machine, not once per run.
"""

from __future__ import annotations

import warnings

import numpy as np

KS = (20, 50, 100)
METRICS = tuple(f"{m}@{k}" for m in ("mrr", "map", "ndcg") for k in KS)
#: the NDCG of the authors' evaluator (ideal DCG over all relevant items, not cut at k)
PAPER_NDCG = tuple(f"ndcg_paper@{k}" for k in KS)
#: the authors' evaluator's metrics (paper convention) -> the narbench metric that computes each,
#: `{k}` standing for the cut-off; see the module docstring and docs/protocol.md
PAPER_CONVENTION = {
    "MRR (eval.py and evaluator.py)": "mrr@{k}",
    "MAP (eval.py: / min(k, |R|))": "map_capped@{k}",
    "MAP (evaluator.py: / |R|)": "map@{k}",
    "NDCG (eval.py and evaluator.py: ideal over all |R|)": "ndcg_paper@{k}",
}
#: the authors' evaluator floors the ideal DCG at this value (it matters only when |R| = 0)
PAPER_IDCG_FLOOR = 0.3
_RANX = {"mrr": "reciprocal_rank", "map": "average_precision", "ndcg": "ndcg"}


def ranx_inputs(query_labels: np.ndarray, corpus_labels: np.ndarray, ranked: np.ndarray):
    """(qrels, run, n_rel): ranx's typed-list inputs for the rankings, plus |R| per query.

    qrels[i]: float64 rows (corpus index, 1.0) of the corpus items relevant to query i (sharing a
    family with it, `narbench.eval.relevance`: a label is a family or a tuple of families), in
    corpus order, shared per label; run[i]: rows (corpus index, depth - rank) in rank order. A
    corpus index listed twice in a ranking keeps its last rank, as a Run dictionary built from the
    row would.
    """
    from numba.typed import List as TypedList

    from narbench.eval.relevance import Relevance

    query_labels = query_labels.tolist() if isinstance(query_labels, np.ndarray) else list(query_labels)
    ranked = np.asarray(ranked)
    relevant = Relevance(corpus_labels)
    docs = [relevant(lab) for lab in query_labels]
    missing = sorted({str(lab) for lab, d in zip(query_labels, docs) if not len(d)})
    if missing:
        raise ValueError(f"queries with labels that have no relevant corpus item: {', '.join(missing[:5])}")
    judged: dict[int, np.ndarray] = {}  # per relevant list (shared per label), its qrels rows
    for d in docs:
        if id(d) not in judged:
            judged[id(d)] = np.ascontiguousarray(np.stack([d.astype(np.float64), np.ones(d.shape[0])], axis=1))
    qrels = TypedList([judged[id(d)] for d in docs])
    depth = ranked.shape[1] if ranked.ndim == 2 else 0
    scores = np.arange(depth, 0, -1, dtype=np.float64)
    rows = np.empty((ranked.shape[0], depth, 2), dtype=np.float64)
    rows[:, :, 0] = ranked
    rows[:, :, 1] = scores
    run = TypedList()
    srt = np.sort(ranked, axis=1)
    dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1) if depth > 1 else np.zeros(ranked.shape[0], bool)
    for i in range(ranked.shape[0]):
        if dup[i]:
            row = ranked[i]
            rev_u, rev_first = np.unique(row[::-1], return_index=True)
            last = np.sort(depth - 1 - rev_first)  # last occurrence of each item, in rank order
            run.append(np.ascontiguousarray(np.stack([row[last].astype(np.float64), scores[last]], axis=1)))
        else:
            run.append(rows[i])
    n_rel = np.array([len(d) for d in docs], dtype=np.float64)
    return qrels, run, n_rel


def score_rankings(
    query_labels: np.ndarray,
    corpus_labels: np.ndarray,
    ranked: np.ndarray,
    *,
    ks: tuple[int, ...] = KS,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Score rankings (`ranked[i]` = corpus indices for query i, best first) with ranx.

    Returns (mean metrics, per-query metrics). Keys: `mrr@k`, `map@k`, `ndcg@k`,
    `map_capped@k` and `ndcg_paper@k`. Queries whose label has no corpus item are an error
    (nothing to find).
    """
    ranked = np.asarray(ranked)
    if ranked.shape[0] != len(query_labels):
        raise ValueError(f"{ranked.shape[0]} rankings for {len(query_labels)} queries")
    from narbench.core.jit import setup_numba_cache

    setup_numba_cache()
    import ranx.metrics

    qrels, run, n_rel = ranx_inputs(query_labels, corpus_labels, ranked)
    per_query = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in ("mrr", "map", "ndcg"):
            fn = getattr(ranx.metrics, _RANX[m])
            for k in ks:
                per_query[f"{m}@{k}"] = np.asarray(fn(qrels, run, k), dtype=np.float64)
    for k in ks:
        per_query[f"map_capped@{k}"] = per_query[f"map@{k}"] * n_rel / np.minimum(k, n_rel)
    for k in ks:
        per_query[f"ndcg_paper@{k}"] = per_query[f"ndcg@{k}"] * uncut_ideal_ratio(n_rel, k)
    means = {name: float(np.mean(vals)) for name, vals in per_query.items()}
    return means, per_query


def ideal_dcg(n_rel: np.ndarray) -> np.ndarray:
    """IDCG(n) = sum_{i=1..n} 1 / log2(i + 1) per entry of `n_rel` (binary relevance, n >= 0)."""
    n_rel = np.asarray(n_rel, dtype=np.int64)
    top = int(n_rel.max(initial=0))
    cum = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, top + 2, dtype=np.float64)))])
    return cum[n_rel]


def uncut_ideal_ratio(n_rel: np.ndarray, k: int) -> np.ndarray:
    """IDCG(min(k, |R|)) / max(0.3, IDCG(|R|)): turns NDCG@k (ideal cut at k) into the authors'
    NDCG@k (ideal over all |R|, floored at 0.3); 1 where |R| <= k."""
    n_rel = np.asarray(n_rel, dtype=np.int64)
    return ideal_dcg(np.minimum(k, n_rel)) / np.maximum(PAPER_IDCG_FLOOR, ideal_dcg(n_rel))
