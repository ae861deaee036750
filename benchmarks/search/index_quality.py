"""Validation figures of a search index (issue 59): what `choose_index` and the `source` studies score.

The validation queries of a side search its pool in an index's rows (cosine, the benchmark's tie-break) and are
scored as a run scores (`score_rankings`: MAP@20 = `map_capped@20`, NDCG@20, MRR@20) and as search is judged
(family of the first hit, family precision@10), per query and averaged over queries or per family first.
"""

from __future__ import annotations

import numpy as np

QUALITY = ("map_capped@20", "ndcg@20", "mrr@20", "family@1", "p@10")
#: rule 2's figures (their mean is a side's search score), each averaged per family first
SEARCH = ("family@1", "p@10")
#: the suffix of a figure averaged per family first (every query family counts once)
BY_FAMILY = "/family"


def summarise(each: dict[str, np.ndarray], families: list[str]) -> dict[str, float]:
    """{figure: mean over queries, figure + BY_FAMILY: mean over the query families of each family's mean}."""
    fam = np.asarray(families)
    names = sorted(set(families))
    out = {m: float(v.mean()) for m, v in each.items()}
    out.update({m + BY_FAMILY: float(np.mean([v[fam == f].mean() for f in names])) for m, v in each.items()})
    return out


def search_score(row: dict[str, float]) -> float:
    """Rule 2's figure of one side: the mean of `SEARCH`'s figures, each averaged per family first."""
    return float(np.mean([row[m + BY_FAMILY] for m in SEARCH]))


def ranked_pool(index, graphs: list, pool: np.ndarray, val: np.ndarray, k: int, scores: bool = False):
    """[len(val), k]: the validation queries `val` searching the pool `pool` (positions into `graphs`) in the
    index's rows (cosine, the benchmark's tie-break); each row the first k hits as positions into `pool`; with
    `scores`, (those, their cosines)."""
    import torch

    from narbench.eval.retrieval import tiebreak_keys, top_k_cosine

    emb = index.embeddings
    q = torch.from_numpy(emb[[index.row_of(graphs[i].name) for i in val]])
    c = torch.from_numpy(emb[[index.row_of(graphs[i].name) for i in pool]])
    rows, cos = top_k_cosine(q, c, k, tiebreak=tiebreak_keys([graphs[i] for i in pool]))
    return (rows.numpy(), cos.numpy()) if scores else rows.numpy()


def per_query(index, graphs: list, pool: np.ndarray, val: np.ndarray, order: str = "cosine",
              kinds: float | None = None) -> dict[str, np.ndarray]:
    """The validation queries `val` searching the pool `pool` (`ranked_pool`), the hits in `order` (cosine, or family
    first as search orders them: `narbench.search_engine.order`, with the op-kind overlap at weight `kinds`, default
    search's): each of `QUALITY`'s figures per query (arrays over `val`)."""
    from narbench.eval.metrics import score_rankings
    from narbench.eval.relevance import families_of, relevance_labels
    from narbench.search_engine.order import KINDS, depth, kind_overlap, reorder, weighs_kinds

    kinds = KINDS if kinds is None else kinds
    weighed = weighs_kinds(order, kinds)  # only the vote reads the overlaps
    ranked, cos = ranked_pool(index, graphs, pool, val, depth(100, order), scores=True)
    labels = relevance_labels(graphs)  # real 2.3: a graph's every family (relevant: sharing one)
    lab_q, lab_c = labels[val], labels[pool]
    fams_q = [set(families_of(lab)) for lab in lab_q.tolist()]
    fams_c = [set(families_of(lab)) for lab in lab_c.tolist()]
    kinds_of = [set(graphs[i].ops.tolist()) for i in pool] if weighed else None
    ranked = np.array([reorder(row, fams_c.__getitem__, order, scores.tolist(),
                               [kind_overlap(graphs[q].ops.tolist(), kinds_of[j]) for j in row] if weighed else None,
                               kinds)
                       for q, row, scores in zip(val.tolist(), ranked.tolist(), cos)])
    _, each = score_rankings(lab_q, lab_c, ranked, ks=(20,))
    hits = np.array([[bool(fams_q[i] & fams_c[j]) for j in row[:10]] for i, row in enumerate(ranked.tolist())])
    return {**{m: np.asarray(each[m], dtype=np.float64) for m in QUALITY[:3]}, "family@1": hits[:, 0].astype(float),
            "p@10": hits.mean(axis=1)}


def outside_per_query(index, graphs: list, queries_emb: np.ndarray, expected: list[tuple[str, ...]],
                      order: str = "cosine") -> dict[str, np.ndarray]:
    """Models from outside the corpus (`wildval`), embedded as the index embeds a query (`queries_emb`), searching
    every row of the index (`graphs`: the index's graphs, for the tie-break), the hits in `order` (as `per_query`):
    family@1 and family precision@10 per query (a hit is right when one of its families is one the model expects;
    the other figures NaN)."""
    import torch

    from narbench.eval.retrieval import tiebreak_keys, top_k_cosine
    from narbench.search_engine.index_file import row_families
    from narbench.search_engine.order import depth, reorder

    by_name = {g.name: g for g in graphs}
    top = top_k_cosine(torch.from_numpy(np.asarray(queries_emb, dtype=np.float32)),
                       torch.from_numpy(np.asarray(index.embeddings, dtype=np.float32)), depth(10, order),
                       tiebreak=tiebreak_keys([by_name[n] for n in index.names]))[0].numpy().tolist()
    top = [reorder(row, lambda r: row_families(index, r), order) for row in top]
    hits = np.array([[bool(set(row_families(index, r)) & set(want)) for r in row[:10]]
                     for row, want in zip(top, expected)])
    nan = np.full(len(expected), np.nan)
    return {**{m: nan for m in QUALITY[:3]}, "family@1": hits[:, 0].astype(float), "p@10": hits.mean(axis=1)}
