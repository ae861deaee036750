"""Where the first hit goes wrong on code from another source (issue 59, validation only)

    python -m benchmarks.search.source_confusions [--dataset real] [--out DIR]

On `choose_index`'s `source` side drawn from `standard`'s whole training split (`source_folds(train=...)`: for each
family two sources implement, its smallest source's graphs query the rest; every other training graph is the pool),
each of two fixed indexes (`wl`, and the shipped `graf-lda/roles+wl/roles@0.2`) is fitted on each fold's pool as
`choose_index` fits, and every query's first hit is read. By construction a query's own family is in the pool only
from another source, so a wrong first hit from the query's own source is the index preferring how a design is
written to what it is. Reported: per query family its first hits right, the commonest wrong (family, source) pairs,
how many wrong first hits share the query's source, and the share of same-source graphs in the first ten. No test
graph of any split, no `crossimpl` query and no wild-set model is read; it chooses nothing.
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from benchmarks.timing import line, report, study_parser


def candidates():
    from benchmarks.search.choose_index import LDA, Candidate

    return [Candidate("wl", "wl", {"dim": 256}),
            Candidate("graf-lda/roles+wl/roles@0.2", "graf-lda",
                      {**LDA, "wl_alphabet": "roles", "fuse_wl": 0.2, "fuse_wl_alphabet": "roles"})]


def first_hits(ds, fold, cand) -> list[dict]:
    """One row per query of `fold`: its family and source, the first ten hits' families and sources."""
    from benchmarks.search.index_sides import side_dataset, side_indexes
    from benchmarks.search.index_quality import ranked_pool
    from narbench.eval.relevance import families_of, relevance_labels
    from narbench.search_engine.index_build import IndexConfig, fit_encoder, index_params

    sub = side_dataset(ds, fold)
    pool, val = fold.positions()
    graphs, labels = sub.core_graphs, relevance_labels(sub.core_graphs)
    own = index_params(IndexConfig(encoder=cand.encoder, params=cand.params))[0]
    fitted = fit_encoder(IndexConfig(encoder=cand.encoder, dataset=ds.name, params=own, progress=False), sub, train=pool)
    (_, index, _), = side_indexes(fitted, [cand], sub, ds.name)
    rows = []
    for qi, hits in zip(val.tolist(), ranked_pool(index, graphs, pool, val, 10).tolist()):
        rows.append({"family": str(graphs[qi].family), "families": set(families_of(labels[qi])),
                     "source": graphs[qi].source,
                     "hits": [(set(families_of(labels[pool[j]])), graphs[pool[j]].source) for j in hits]})
    return rows


def summary_of(rows: list[dict]) -> dict:
    right = [bool(r["families"] & r["hits"][0][0]) for r in rows]
    wrong = [r for r, ok in zip(rows, right) if not ok]
    per_family: dict[str, list[int]] = {}
    for r, ok in zip(rows, right):
        per_family.setdefault(r["family"], [0, 0])
        per_family[r["family"]][0] += ok
        per_family[r["family"]][1] += 1
    pairs = Counter((r["family"], "/".join(sorted(r["hits"][0][0])), "same" if r["hits"][0][1] == r["source"]
                     else "other") for r in wrong)
    return {"queries": len(rows), "first_right": int(sum(right)), "wrong": len(wrong),
            "wrong_same_source": int(sum(r["hits"][0][1] == r["source"] for r in wrong)),
            "top10_same_source_share": round(float(np.mean([[s == r["source"] for _, s in r["hits"]] for r in rows])), 4),
            "per_family": {f: f"{a}/{b}" for f, (a, b) in sorted(per_family.items())},
            "commonest_wrong": [{"query_family": f, "hit_families": h, "hit_source": s, "queries": n}
                                for (f, h, s), n in pairs.most_common(15)]}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.search.index_sides import source_folds
    from narbench.data.dataset import load_dataset

    args = study_parser(__doc__).parse_args(argv)
    from narbench.search_engine.index_build import newest_corpus

    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    folds = source_folds(ds, 0, train=ds.get_split("standard").train)
    out = {"dataset": f"{ds.name} {ds.version}", "sha256": ds.sha256, "candidates": {}}
    for cand in candidates():
        rows = [r for fold in folds for r in first_hits(ds, fold, cand)]
        out["candidates"][cand.label] = s = summary_of(rows)
        line("measured", candidate=cand.label, queries=s["queries"], first_right=s["first_right"],
             wrong_same_source=f"{s['wrong_same_source']}/{s['wrong']}", top10_same_source=s["top10_same_source_share"])
    report(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
