"""Scoring with ranx: MRR, MAP and NDCG at 20, 50 and 100 (the paper's nine numbers).

Relevance: a corpus item is relevant to a query when it has the query's label (the family).
The metrics are ranx's own. One addition is derived from ranx's per-query output, not
re-implemented: ranx's AP@k divides by *all* relevant items |R| (the TREC convention), which
caps MAP@k at k/|R| when a query has thousands of relevant items (as on `nas`); the paper's
MAP values imply the other common convention, dividing by min(k, |R|). `map_capped@k`
rescales ranx's per-query AP@k by |R| / min(k, |R|) to give that convention.
"""

from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np

KS = (20, 50, 100)
METRICS = tuple(f"{m}@{k}" for m in ("mrr", "map", "ndcg") for k in KS)


def score_rankings(
    query_labels: np.ndarray,
    corpus_labels: np.ndarray,
    ranked: np.ndarray,
    *,
    ks: tuple[int, ...] = KS,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Score rankings (`ranked[i]` = corpus indices for query i, best first) with ranx.

    Returns (mean metrics, per-query metrics). Keys: `mrr@k`, `map@k`, `ndcg@k` and
    `map_capped@k`. Queries whose label has no corpus item are an error (nothing to find).
    """
    from ranx import Qrels, Run, evaluate

    query_labels = np.asarray(query_labels)
    corpus_labels = np.asarray(corpus_labels)
    ranked = np.asarray(ranked)
    if ranked.shape[0] != len(query_labels):
        raise ValueError(f"{ranked.shape[0]} rankings for {len(query_labels)} queries")
    members: dict = defaultdict(list)
    for j, lab in enumerate(corpus_labels.tolist()):
        members[lab].append(str(j))
    missing = sorted({str(lab) for lab in query_labels.tolist() if lab not in members})
    if missing:
        raise ValueError(f"queries with labels that have no relevant corpus item: {', '.join(missing[:5])}")
    # Relevance judgments are shared per label: one dict object per label, reused by queries.
    judged = {lab: dict.fromkeys(docs, 1) for lab, docs in members.items()}
    qids = [str(i) for i in range(len(query_labels))]
    qrels = Qrels({q: judged[lab] for q, lab in zip(qids, query_labels.tolist())})
    depth = ranked.shape[1]
    # Strictly decreasing scores make ranx rank exactly in the given order.
    rank_scores = [float(depth - r) for r in range(depth)]
    run = Run({q: dict(zip(map(str, row), rank_scores)) for q, row in zip(qids, ranked.tolist())})
    names = [f"{m}@{k}" for m in ("mrr", "map", "ndcg") for k in ks]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate(qrels, run, names, return_mean=False, make_comparable=False)
    # ranx orders queries by id as strings; read its per-query scores back by id.
    per_query = {name: np.array([run.scores[name][q] for q in qids], dtype=np.float64) for name in names}
    n_rel = np.array([len(members[lab]) for lab in query_labels.tolist()], dtype=np.float64)
    for k in ks:
        per_query[f"map_capped@{k}"] = per_query[f"map@{k}"] * n_rel / np.minimum(k, n_rel)
    means = {name: float(np.mean(vals)) for name, vals in per_query.items()}
    return means, per_query
