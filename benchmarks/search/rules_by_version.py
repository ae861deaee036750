"""Do the canonical passes chosen on `wildval` help elsewhere? Validation sets searched in indexes of each rules' corpus

    python -m benchmarks.search.rules_by_version                              # 2.4-2.7; wildval2 and wildval
    python -m benchmarks.search.rules_by_version --rules 2.5 2.6 --sets wildval2

2.4's, 2.5's and 2.6's rules are passes over canonical graphs written from `wildval`'s misses, 2.7's from `wildval2`'s
(`narbench.data.canonical.UPGRADES`). Per version, the shipped index's encoder is built on real 2.3's graphs read
under the passes up to it (`IndexConfig.rules`, `narbench index build --rules`: its out-of-family score fitted as the
build fits it), and each set is searched as `narbench search` searches a saved graph, its graphs read under the same
rules (the index's `canonical_version`): top-1 family, P@10, flagged, in search's order (family first) and by cosine.
`wildval` measures how much the rules gained where they were chosen; `wildval2` (built after them, from 22 other
packages, docs/wildval.md) whether the gain carries to code no rule was written from. Validation sets only: no test
query, no `crossimpl` query and no wild-set model is read.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import line, report, study_parser
from narbench.datasets.wild import VALIDATIONS

ORDERS = ("family", "cosine")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.search.wild import measure
    from narbench.data.dataset import load_dataset
    from narbench.datasets.wild import read_graphs
    from narbench.search_engine.index_build import IndexConfig, build_index

    parser = study_parser(__doc__)
    parser.add_argument("--rules", nargs="+", default=["2.4", "2.5", "2.6", "2.7"],
                        help="canonical versions (default 2.4-2.7)")
    parser.add_argument("--sets", nargs="+", default=["wildval2", "wildval"], choices=VALIDATIONS)
    args = parser.parse_args(argv)
    ds = load_dataset(args.dataset)
    sets = {name: read_graphs(canonical="2.3", name=name) for name in args.sets}
    summary = {"dataset": f"{ds.name} {ds.version}", "rules": {}}
    for rules in args.rules:
        index = build_index(IndexConfig(dataset=args.dataset, rules=rules, progress=False), dataset=ds)
        row = {"index_canonical_version": index.header["canonical_version"], "index": index.sha256 or None,
               "fit": (index.header["encoder"].get("fit") or {}).get("picked")}
        for name, w in sets.items():
            fits = np.array([bool(f) for f in w.families])
            for order in ORDERS:
                m = measure(index, w.graphs, w.families, w.vocab, order=order)
                row[f"{name}/{order}"] = fig = {
                    "top1": round(float(m["top1"][fits].mean()), 4), "p10": round(float(m["p10"][fits].mean()), 4),
                    "fit_flagged": f"{int(m['flagged'][fits].sum())}/{int(fits.sum())}",
                    "none_flagged": f"{int(m['flagged'][~fits].sum())}/{int((~fits).sum())}"}
                line("rules", rules=rules, read_under=row["index_canonical_version"], set=name, order=order, **fig)
        summary["rules"][rules] = row
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
