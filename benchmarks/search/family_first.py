"""Hits ordered family first and by vote (`narbench.search_engine.order`), against cosine alone: validation only
(issue 59)

    python -m benchmarks.search.family_first --out DIR     # the zoo's `standard` and `unseen` sides and `wildval`

Each order (`ORDERS`: cosine, family first, vote) is measured the same way; the vote (the first ten hits vote for
their families, 1/r^2 shared among a hit's families; search's default since 2026-12-01) can change the first hit.

Search ranks an index's graphs by cosine, so the families of its first ten hits interleave. A family-first order
takes the first `POOL` hits by cosine (`narbench.search_engine.order`) and orders them by their family's best hit,
then by cosine: every graph of the nearest graph's families first, then those of the next family met. The first hit
does not change (family@1 is the same); family precision@10 and MAP@20 do. For the shipped index's candidate
(`graf-lda`, the index build's parameters) fitted on each side's pool, as `benchmarks.search.choose_index` fits it,
each side's validation queries search the pool and are scored in each order
(`benchmarks.search.index_quality.per_query`); `wildval`'s fitting models search the shipped index
(`outside_per_query`). No test query of any split,
no `crossimpl` query and no wild-set model is read.

Why (validation only, 2026-11-30): on `wildval` the shipped index's first hit is right for 0.847 of the fitting models
and its precision@10 is 0.714, against a ceiling of 0.951 (families with fewer than ten graphs in the corpus): ten
hits mixing the right family with its neighbours cost more than wrong first hits do.
"""

from __future__ import annotations

import sys

from benchmarks.timing import line, report, study_parser
from narbench.search_engine.order import POOL


#: the orders compared, by their names in `narbench.search_engine.order` and in the results
ORDERS = {"cosine": "cosine", "family": "family-first", "vote": "vote"}


def side_figures(ds, name: str, kinds: list[float] = ()) -> dict:
    """The `standard` or `unseen` validation side: P@10, MAP@20 and family@1 per family, by cosine and family first."""
    from benchmarks.search.choose_index import candidates
    from benchmarks.search.index_quality import BY_FAMILY, per_query, summarise
    from benchmarks.search.index_sides import side_dataset, side_indexes
    from benchmarks.search.robustness import validation_side
    from narbench.search_engine.index_build import IndexConfig, fit_encoder, index_params

    cand = next(c for c in candidates() if c.label == "graf-lda/roles/nuisance")
    side = validation_side(ds, name)
    sub = side_dataset(ds, side)
    graphs = sub.core_graphs
    pool, val = side.positions()
    own = index_params(IndexConfig(encoder=cand.encoder, params=cand.params))[0]
    fitted = fit_encoder(IndexConfig(encoder=cand.encoder, dataset=ds.name, params=own, progress=False), sub, train=pool)
    _, index, _ = next(side_indexes(fitted, [cand], sub, ds.name))
    out = {}
    runs = [(order, label, 0.0) for order, label in ORDERS.items()] + [("vote", f"vote+kinds@{w}", w) for w in kinds]
    for order, label, weight in runs:
        each = per_query(index, graphs, pool, val, order, weight)
        figures = summarise({m: each[m] for m in ("map_capped@20", "family@1", "p@10")},
                            [str(graphs[i].family) for i in val])
        out[label] = {k: round(v, 4) for k, v in figures.items()}
        line("side", side=name, order=label, **{k: out[label][k] for k in ("family@1" + BY_FAMILY, "p@10" + BY_FAMILY,
                                                                              "p@10", "map_capped@20")})
    return out


def wildval_figures(ds) -> dict:
    """`wildval`'s fitting models in the shipped index: top-1 and P@10 over models, by cosine and family first."""
    from benchmarks.search.index_quality import outside_per_query
    from narbench.search_engine.index_file import load_index
    from narbench.search_engine.outside_fit import outside_queries

    index = load_index()
    graphs, expected = outside_queries(ds, index)
    fit = [(g, f) for g, f in zip(graphs, expected) if f]
    emb = index.embed([g for g, _ in fit])
    out = {}
    for order, label in ORDERS.items():
        each = outside_per_query(index, ds.core_graphs, emb, [f for _, f in fit], order)
        out[label] = {"top1": round(float(each["family@1"].mean()), 4), "p@10": round(float(each["p@10"].mean()), 4)}
        line("wildval", order=label, **out[label], index=index.sha256[:12])
    return out


def main(argv: list[str] | None = None) -> int:
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_build import newest_corpus

    parser = study_parser(__doc__)
    parser.add_argument("--kinds", type=float, nargs="*", default=[], metavar="W",
                        help="also the vote with the op-kind overlap at these weights (order.KINDS; zoo sides only)")
    args = parser.parse_args(argv)
    ds = newest_corpus(load_dataset(args.dataset))
    summary = {"dataset": f"{ds.name} {ds.version}", "read_under": ds.canonical_version, "pool": POOL,
               "wildval": wildval_figures(ds), "sides": {name: side_figures(ds, name, args.kinds) for name in ("standard", "unseen")}}
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
