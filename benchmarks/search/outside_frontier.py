"""Is there a threshold of the out-of-family score that meets both flag targets on the validation sets pooled?

    python -m benchmarks.search.outside_frontier [--index FILE] [--sets wildval wildval2] [--out DIR]   # ~1 minute

Each model of the validation sets of outside models (`wildval`, `wildval2`: docs/wildval.md) is searched in the index
as `narbench search FILE` searches a saved graph, and its out-of-family score (`SearchResult.out_of_family`) kept.
Along every threshold the scores take: fitting models flagged and `none` models flagged, pooled and per set; a
threshold meets issue 59's targets when at most 1 in 10 fitting models and at least 5 in 7 `none` models are flagged.
Printed: what the index's own threshold flags (as the searches said), each threshold where a count changes (the
scores as a search shows them, 4 decimals), and whether any meets both. Validation
sets only: no test query, no `crossimpl` query and no wild-set model is read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from benchmarks.timing import line, report, study_parser
from narbench.datasets.wild import VALIDATIONS

#: issue 59's targets: at most this share of fitting models flagged, at least this share of `none` models
FIT_FLAGGED, NONE_FLAGGED = 0.1, 5 / 7


def scores(index, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out-of-family scores as a search shows them, 4 decimals; fits a family; flagged by the search) of the set's
    models searched in `index` (`benchmarks.search.wild.measure`)."""
    from benchmarks.search.wild import measure
    from narbench.datasets.wild import read_graphs

    w = read_graphs(canonical="2.3", name=name)
    m = measure(index, w.graphs, w.families, w.vocab)
    return m["score"], np.array([bool(f) for f in w.families]), m["flagged"]


def main(argv: list[str] | None = None) -> int:
    from narbench.search_engine.index_file import load_index

    parser = study_parser(__doc__)
    parser.add_argument("--index", type=Path, help="index file (default: the shipped index)")
    parser.add_argument("--sets", nargs="+", default=["wildval", "wildval2"], choices=VALIDATIONS)
    args = parser.parse_args(argv)
    index = load_index(None, args.index)
    if not index.header.get("out_of_family"):
        print(f"the index ({index.describe()}) has no out-of-family score", file=sys.stderr)
        return 2
    own = float(index.header["out_of_family"]["threshold"])
    by_set = {name: scores(index, name) for name in args.sets}
    s = np.concatenate([v[0] for v in by_set.values()])
    fit = np.concatenate([v[1] for v in by_set.values()])
    flagged = np.concatenate([v[2] for v in by_set.values()])
    searched = {"threshold": own, "fit_flagged": int(flagged[fit].sum()), "none_flagged": int(flagged[~fit].sum())}
    line("own-threshold", **searched, **{name: f"{int(fl[f].sum())}/{int(f.sum())} fit, {int(fl[~f].sum())}/"
                                               f"{int((~f).sum())} none" for name, (_, f, fl) in by_set.items()})
    rows, both, last = [], [], None
    for t in sorted({float(x) for x in s}):  # the scores as shown (4 decimals): the counts change only there
        flag = s >= t
        row = {"threshold": round(t, 4), "fit_flagged": int(flag[fit].sum()), "none_flagged": int(flag[~fit].sum())}
        for name, (sc, f, _) in by_set.items():
            row[name] = f"{int((sc[f] >= t).sum())}/{int(f.sum())} fit, {int((sc[~f] >= t).sum())}/{int((~f).sum())} none"
        row["meets_both"] = bool(row["fit_flagged"] <= FIT_FLAGGED * fit.sum()
                                 and row["none_flagged"] >= NONE_FLAGGED * (~fit).sum())
        if (row["fit_flagged"], row["none_flagged"]) != last:
            rows.append(row)
            line("threshold", **row)
        last = (row["fit_flagged"], row["none_flagged"])
        if row["meets_both"]:
            both.append(row["threshold"])
    summary = {"index": index.sha256, "sets": args.sets, "fit": int(fit.sum()), "none": int((~fit).sum()),
               "own_threshold": searched, "thresholds_meeting_both": both, "frontier": rows}
    line("outside-frontier", index=(index.sha256 or "")[:12], fit=int(fit.sum()), none=int((~fit).sum()),
         thresholds_meeting_both=len(both))
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
