"""Which ops two sources of one design write differently? (issue 59, validation only)

    python -m benchmarks.search.op_roles [--dataset real] [--top 12] [--out DIR]

On `choose_index`'s `source` side (of `standard`'s `quick` training graphs, each family two sources implement: its
smallest source's graphs against the family's graphs from the other sources), per family and op: the op's share of
a graph's nodes, averaged over the family's graphs of each side, and the absolute difference of the two. Printed:
the ops whose difference, averaged over the families (each family counts once), is largest, with the role
(`narbench.data.roles`) each belongs to. This is what motivated reading WL in op roles. No test graph, `crossimpl`
query or wild-set model is read.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np

from benchmarks.timing import line, report, study_parser


def op_shares(graphs: list, num_ops: int) -> np.ndarray:
    """Each op's share of a graph's nodes, averaged over `graphs`."""
    return np.mean([np.bincount(g.ops, minlength=num_ops) / max(len(g.ops), 1) for g in graphs], axis=0)


def differences(ds, folds) -> tuple[np.ndarray, list[str]]:
    """([families x ops] |share in the queried source - share in the family's other sources|, the families)."""
    rows, names = [], []
    for fold in folds:
        pool = [ds.graphs[i] for i in fold.pool]
        queries: dict[str, list] = defaultdict(list)
        for i in fold.val:
            queries[str(ds.graphs[i].family)].append(ds.graphs[i])
        for family, graphs in sorted(queries.items()):
            others = [g for g in pool if str(g.family) == family]
            rows.append(np.abs(op_shares(graphs, len(ds.vocab)) - op_shares(others, len(ds.vocab))))
            names.append(family)
    return np.array(rows), names


def main(argv: list[str] | None = None) -> int:
    from benchmarks.search.index_sides import source_folds
    from narbench.data.dataset import load_dataset
    from narbench.data.roles import ROLE_OF

    parser = study_parser(__doc__)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    from narbench.search_engine.index_build import newest_corpus

    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    diff, families = differences(ds, source_folds(ds))
    mean = diff.mean(axis=0)
    top = []
    for op in np.argsort(-mean, kind="stable")[: args.top].tolist():
        name = ds.vocab[op]
        widest = families[int(np.argmax(diff[:, op]))]
        top.append({"op": name, "role": ROLE_OF.get(name, ""), "mean_abs_share_diff": round(float(mean[op]), 4),
                    "families_differing_by_1pct": int((diff[:, op] > 0.01).sum()), "widest_family": widest})
        line("op", **top[-1])
    in_roles = float(mean[[i for i, op in enumerate(ds.vocab) if op in ROLE_OF]].sum() / mean.sum())
    line("roles", share_of_the_difference=f"{in_roles:.3f}", families=len(families))
    report({"dataset": f"{ds.name} {ds.version}", "sha256": ds.sha256, "families": families, "top": top,
            "roles_share_of_difference": in_roles}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
