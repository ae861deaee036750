"""Does the out-of-family flag hold for a known family written by another package? (issue 59 item 5, validation only)

    python -m benchmarks.search.outside_sources [--out DIR]

Until 2026-11-29 the index's score was calibrated on in-family queries that are *models held out of their own
zoo*: the flag fired on 5% of them. Code a user brings comes from another package. This measures, on validation
data only, how often the flag fires on a known family's graphs written by another source: the index's
validation copy (`narbench.search_engine.outside_validation.validation_queries`) also leaves out, for some of the
families that more than one source implements, the graphs of one source (`narbench.eval.holdout.cross_source_split`,
the hold-out `graf-lda` is chosen on), and those are searched in it as a saved graph is. No test query of any
split, no `crossimpl` query and no wild-set model is read.

Printed: per kind of query (held-out family = positive; held-out model; held-out source), the count and top-1
family; the share flagged by the score fitted by the rule before (on positives and held-out models, 5% of those
flagged) and by the rule now (`outside_fit.fit`: both hold-outs, at most 5% of the models and 10% of the
sources flagged); and each score's trade-off with its threshold at a share of the held-out sources.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import line, report, study_parser

#: shares of held-out-source queries flagged at which the trade-off is printed
LEVELS = (0.05, 0.10, 0.15, 0.20)


def main(argv: list[str] | None = None) -> int:
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_build import IndexConfig, build_index, newest_corpus
    from narbench.search_engine.outside import NEAREST
    from narbench.search_engine.outside_fit import fit, nearest_other, query_features
    from narbench.search_engine.outside_validation import validation_queries

    parser = study_parser(__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    val = validation_queries(ds, ds.core_graphs, seed=args.seed)
    corpus, queries, kinds, y, fams = val.corpus, val.queries, val.kinds, val.labels, val.groups
    cfg = IndexConfig(dataset=args.dataset, progress=False, seed=args.seed)
    copy = build_index(cfg, dataset=corpus)
    copy.arrays[NEAREST] = nearest_other(copy, corpus.core_graphs)
    x = query_features(copy, queries)
    from narbench.search_engine.backends import ExactBackend

    rows, _ = ExactBackend(copy.arrays["embeddings"]).search(copy.embed(queries), 1)
    from narbench.search_engine.index_file import row_families

    right = np.array([bool(set(row_families(copy, r[0])) & set(g.families)) for r, g in zip(rows.tolist(), queries)])

    summary = {"dataset": f"{ds.name} {ds.version}", "counts": {k: int((kinds == k).sum()) for k in ("family", "model", "source")},
               "families": {k: len({f for f, kk in zip(fams, kinds) if kk == k}) for k in ("family", "model", "source")},
               "sources": sorted({g.source for g, k in zip(queries, kinds) if k == "source"}),
               "top1_family": {k: round(float(right[kinds == k].mean()), 4) for k in ("model", "source")}}
    before = fit(x[kinds != "source"], y[kinds != "source"], [f for f, k in zip(fams, kinds) if k != "source"])
    now = fit(x, y, fams, kinds=kinds)
    summary["fits"] = {}
    for name, score in (("before: fitted on held-out models, 5% of them flagged", before),
                        ("now: fitted on both hold-outs, at most 5% of models and 10% of sources flagged", now)):
        p_all = score.scores(x)
        rates = {k: round(float((p_all[kinds == k] >= score.threshold).mean()), 4) for k in ("family", "model", "source")}
        trade = {}
        for level in LEVELS:
            t = float(np.quantile(p_all[kinds == "source"], 1.0 - level))
            trade[f"{level:.2f} of source queries"] = {k: round(float((p_all[kinds == k] >= t).mean()), 4)
                                                       for k in ("family", "model", "source")}
        summary["fits"][name] = {"features": list(score.features), "threshold": score.threshold,
                                 "cv_auroc": score.validation["cv_auroc"], "flagged": rates,
                                 "flagged with the threshold at a share of source queries": trade}
        line("outside-sources", fit=name, **{f"flagged_{k}": v for k, v in rates.items()},
             features="+".join(score.features), threshold=score.threshold)
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
