"""The `source` side made wider and weighed by family (issue 59, validation only)

    python -m benchmarks.search.source_wide [--dataset real] [--graphs split|quick] [--out DIR]

`choose_index`'s `source` side draws its queries from `standard`'s 6,000 `quick` training graphs: 113 queries of 21
families, 66 of them one family's (`vit`), and its figure is their mean. On 2026-11-29 the index it chose (WL read in
op roles) was better there and worse on the wild set, a test set read once after. This measures the same kind of
side drawn from `standard`'s whole training split (`--graphs split`, the default; `quick` gives choose_index's own
side, whose query-weighted figures equal its), with every figure also averaged per family first (each family
counts once), for four fixed candidates: `wl`, the index shipped before (`graf-lda+wl@0.2`), the one chosen
(`graf-lda/roles+wl/roles@0.2`) and the fusion with only its WL part in roles (`graf-lda+wl/roles@0.2`). Each is
fitted on each fold's pool (every training graph but the fold's queries) as `choose_index` fits. No test graph of any
split, no `crossimpl` query and no wild-set model is read. It chooses nothing: a wider side for the rule is for a
revision of the rule, made before that revision's run.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from benchmarks.timing import line, report, study_parser

METRICS = ("map_capped@20", "family@1", "p@10")


def candidates():
    from benchmarks.search.choose_index import LDA, Candidate

    roles = {"fuse_wl": 0.2, "fuse_wl_alphabet": "roles"}
    return [Candidate("wl", "wl", {"dim": 256}), Candidate("graf-lda+wl@0.2", "graf-lda", {**LDA, "fuse_wl": 0.2}),
            Candidate("graf-lda/roles+wl/roles@0.2", "graf-lda", {**LDA, "wl_alphabet": "roles", **roles}),
            Candidate("graf-lda+wl/roles@0.2", "graf-lda", {**LDA, **roles})]


def fold_rows(ds, fold, cands) -> dict[str, dict[str, np.ndarray]]:
    """{candidate: {metric: per-query values over the fold's queries}}, each fitted once on the fold's pool."""
    from benchmarks.search.index_sides import side_dataset, side_indexes
    from benchmarks.search.index_quality import per_query
    from narbench.search_engine.index_build import IndexConfig, fit_encoder, index_params

    sub = side_dataset(ds, fold)
    pool, val = fold.positions()
    groups: dict[str, list] = {}
    for cand in cands:
        own = index_params(IndexConfig(encoder=cand.encoder, params=cand.params))[0]
        groups.setdefault(json.dumps([cand.encoder, own], sort_keys=True), []).append(cand)
    out = {}
    for key, members in groups.items():
        encoder, own = json.loads(key)
        fitted = fit_encoder(IndexConfig(encoder=encoder, dataset=ds.name, params=own, progress=False), sub, train=pool)
        for cand, index, _ in side_indexes(fitted, members, sub, ds.name):
            out[cand.label] = per_query(index, sub.core_graphs, pool, val)
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks.search.index_sides import source_folds
    from benchmarks.search.index_quality import BY_FAMILY, summarise
    from narbench.data.dataset import load_dataset

    parser = study_parser(__doc__)
    parser.add_argument("--graphs", choices=("split", "quick"), default="split",
                        help="the training graphs the side is drawn from (default: standard's whole training split)")
    args = parser.parse_args(argv)
    from narbench.search_engine.index_build import newest_corpus

    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    train = ds.get_split("standard").train if args.graphs == "split" else None
    folds = source_folds(ds, 0, train=train)
    cands = candidates()
    values: dict[str, dict[str, list]] = {c.label: {m: [] for m in METRICS} for c in cands}
    families: list[str] = []
    for fold in folds:
        families += [str(ds.graphs[i].family) for i in fold.val]
        line("side", side=fold.name, index=len(fold.index), pool=len(fold.pool), val=len(fold.val))
        for label, rows in fold_rows(ds, fold, cands).items():
            for m in METRICS:
                values[label][m].append(rows[m])
    fam = np.array(families)
    summary = {"dataset": f"{ds.name} {ds.version}", "sha256": ds.sha256, "graphs": args.graphs,
               "queries": int(len(fam)), "families": {f: int((fam == f).sum()) for f in sorted(set(fam))},
               "candidates": {}}
    for label, per in values.items():
        means = summarise({m: np.concatenate(per[m]) for m in METRICS}, families)
        row = {m: {"queries": round(means[m], 4), "families": round(means[m + BY_FAMILY], 4)} for m in METRICS}
        summary["candidates"][label] = row
        line("measured", candidate=label, **{f"{m}_{w}": f"{row[m][w]:.4f}" for m in METRICS
                                             for w in ("queries", "families")})
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
