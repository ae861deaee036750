"""The per-family macro average: a second view of Table 1 beside its mean over queries.

A row's cell in the tables is the mean over queries, which weighs each family by its number of
queries (on `real` unseen a few large families hold most of them). The macro average is the mean
over families of the mean over that family's queries (per seed, then mean ± std over seeds), so a
method that is good on the large families only ranks lower here. It is a view, not a verdict: it
carries no significance test. Each query's family comes from the dataset (`clusters.query_groups`).
"""

from __future__ import annotations

import math

import numpy as np

from narbench.leaderboard.clusters import ClusterError, first_appearance_ids, query_groups
from narbench.leaderboard.records import Key, Record

#: the columns of the macro view (the tables' headline metrics)
MACRO_COLUMNS = ("ndcg@20", "mrr@20", "map_capped@20")


def family_macro(scores: np.ndarray, families) -> float:
    """Mean over families of the mean of `scores` over each family's queries (NaN without queries)."""
    scores = np.asarray(scores, dtype=np.float64)
    if not len(scores):
        return math.nan
    ids = first_appearance_ids(list(families))
    if len(ids) != len(scores):
        raise ValueError(f"{len(ids)} families for {len(scores)} queries")
    return float((np.bincount(ids, weights=scores) / np.bincount(ids)).mean())


def row_macro(runs: dict[int, Record], metrics=MACRO_COLUMNS) -> dict[str, tuple[float, float]]:
    """metric -> (mean, sample std) over a row's seeds of its per-family macro average (std NaN for
    one seed); metrics without per-query scores are left out. ClusterError when a run's families are
    not found."""
    out: dict[str, tuple[float, float]] = {}
    for m in metrics:
        vals = [family_macro(rec.per_query[m], query_groups(rec).families)
                for _, rec in sorted(runs.items()) if m in rec.per_query]
        if vals:
            out[m] = (float(np.mean(vals)), float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan)
    return out


def add_macro(tables, selected: dict[Key, dict[int, Record]]) -> None:
    """Give every row of Table 1 its `macro` cells (`row_macro`, once per configuration); a row whose
    dataset's families are not found keeps none (the view shows a dash)."""
    done: dict[Key, dict[str, tuple[float, float]]] = {}
    for t in tables:
        if t.number != 1:
            continue
        for b in t.blocks:
            for r in b.rows:
                if r.key not in done:
                    try:
                        done[r.key] = row_macro(selected.get(r.key, {}))
                    except ClusterError:
                        done[r.key] = {}
                r.macro = dict(done[r.key])
