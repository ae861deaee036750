"""Does the out-of-family flag hold on code from packages narbench never looked at? (issue 59 item 5, validation)

    python -m benchmarks.search.outside_flag [--out DIR]         # about 3 minutes

The index's score is fitted on zoo hold-outs (`narbench.search_engine.outside_fit`: held-out families, models and
sources in a copy of the corpus). This builds that copy as `narbench index build` does and fits the score four
times: on the zoo hold-outs alone (the index build until 2026-11-29); with the validation set `wildval`
(docs/wildval.md: models from packages outside the zoos, crossimpl and the wild set) joining the copy's queries
(`outside_validation.validation_queries(outside=...)`: a model of a family the copy holds is an in-family query of kind `outside`, at
most `OUTSIDE_FALSE_FLAG` of them flagged; one of no family there a positive); a third time with them as training
rows of the regression but no bound of theirs; and as the index build fits it now, features and threshold chosen on
`wildval` searched in the index (`fit(choose_on=...)`). Each score is then applied to `wildval` searched in the
shipped index as `narbench search FILE` searches it. Printed: each fit's threshold and its record in the copy; on
`wildval` in the shipped index, fitting and `none` models flagged, the AUROC of the score and of the first hit's
cosine alone, and the flagged counts along the threshold. Validation only: no test query of any split, no `crossimpl` query and no
wild-set model is read.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import line, report, study_parser

#: thresholds along which the flagged counts on `wildval` are printed
THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995)


def main(argv: list[str] | None = None) -> int:
    from sklearn.metrics import roc_auc_score

    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_build import IndexConfig, build_index, newest_corpus
    from narbench.search_engine.index_file import load_index
    from narbench.search_engine.outside import FEATURES, NEAREST
    from narbench.search_engine.outside_fit import fit, nearest_other, outside_queries, query_features
    from narbench.search_engine.outside_validation import validation_queries

    parser = study_parser(__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    graphs, families = outside_queries(ds)
    if not graphs:
        print(f"wildval ships no graphs in {ds.name} {ds.version}'s vocabulary", file=sys.stderr)
        return 2
    val = validation_queries(ds, ds.core_graphs, seed=args.seed, outside=(graphs, families))
    cfg = IndexConfig(dataset=args.dataset, progress=False, seed=args.seed)
    copy = build_index(cfg, dataset=val.corpus)
    copy.arrays[NEAREST] = nearest_other(copy, val.corpus.core_graphs)
    x, y, kinds, groups = query_features(copy, val.queries), val.labels, val.kinds, val.groups
    zoo = kinds != "outside"
    shipped = load_index(None, None)
    if NEAREST not in shipped.arrays:  # an index whose score reads no relative feature does not keep it
        shipped.arrays[NEAREST] = nearest_other(shipped, ds.core_graphs)
    xs = query_features(shipped, graphs)
    present = {f for g in ds.core_graphs for f in g.families}
    fit_rows = np.array([bool(set(f) & present) for f in families])
    zoo_rows = (x[zoo], y[zoo], [g for g, z in zip(groups, zoo) if z])
    fits = {"on zoo hold-outs alone (the index build until 2026-11-29)": fit(*zoo_rows, kinds=kinds[zoo]),
            "with wildval's in-family models bounded too": fit(x, y, groups, kinds=kinds),
            "with wildval's models as training rows only (no bound)": fit(x, y, groups, kinds=kinds,
                                                                          outside_false_flag=1.0),
            "as the index build fits it: chosen on wildval searched in the index": fit(*zoo_rows, kinds=kinds[zoo],
                                                                                       choose_on=(xs, fit_rows))}
    top1 = xs[:, FEATURES.index("top1")]
    summary = {"dataset": f"{ds.name} {ds.version}", "index": shipped.sha256, "wildval": {
        "fit": int(fit_rows.sum()), "none": int((~fit_rows).sum()),
        "auroc_first_cosine": round(float(roc_auc_score(~fit_rows, -top1)), 4)}, "fits": {}}
    for name, score in fits.items():
        p = score.scores(xs)
        flagged = {"fit": int((p[fit_rows] >= score.threshold).sum()), "none": int((p[~fit_rows] >= score.threshold).sum())}
        along = {f"{t:g}": {"fit": int((p[fit_rows] >= t).sum()), "none": int((p[~fit_rows] >= t).sum())}
                 for t in THRESHOLDS}
        summary["fits"][name] = {"features": list(score.features), "threshold": score.threshold,
                                 "copy": {k: v for k, v in score.validation.items() if k != "cv_auroc"},
                                 "wildval_flagged": flagged, "wildval_auroc": round(float(roc_auc_score(~fit_rows, p)), 4),
                                 "wildval_flagged_along_the_threshold": along}
        line("outside-flag", fit=name, threshold=score.threshold, copy_positives_flagged=score.validation["flagged"],
             wildval_fit_flagged=f"{flagged['fit']}/{int(fit_rows.sum())}",
             wildval_none_flagged=f"{flagged['none']}/{int((~fit_rows).sum())}",
             wildval_auroc=summary["fits"][name]["wildval_auroc"])
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
