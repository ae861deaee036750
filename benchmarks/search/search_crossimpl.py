"""Search quality on models written outside the zoos (issue 38's search targets); prints a table.

    python -m benchmarks.search.search_crossimpl                                  # the shipped index, real's crossimpl
    python -m benchmarks.search.search_crossimpl --dataset real-2.2 --index FILE  # an index built on real 2.2
    python -m benchmarks.search.search_crossimpl --index FILE --against OTHER     # and the paired difference

Each `crossimpl` query (a zoo architecture as another package implements it; never in the index)
is searched as `narbench search` searches a graph: embedded by the index's encoder, ranked by
cosine over every graph of the index with the exact backend, the hits in search's default order (family first, since
2026-11-30: `narbench.search_engine.order`; `--order cosine` for cosine alone). Per package, then over all queries
and the `reimpl` and `exact` subsets: top-1 family (the query's family is one of the first hit's) and
family precision@10 (the share of the ten hits with the query's family), and the share flagged "no family in
the index fits" (a false flag: every query's family is in the index). Targets: top-1 >= 0.9, precision@10 >= 0.85. The index must be over the dataset's vocabulary (the same canonical rules).
`--against OTHER` also searches every query in another index and prints, over all queries and each
subset, the paired difference (index minus OTHER) and its two-sided p: the leaderboard's paired
bootstrap over queries (`narbench.leaderboard.significance.bootstrap_test`; one index is one seed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from narbench.search_engine.order import DEFAULT_ORDER, ORDERS

TOP1, P10 = 0.9, 0.85


def measure(index, queries, k: int = 10, order: str = DEFAULT_ORDER) -> tuple[np.ndarray, np.ndarray]:
    """(first hit in the query's family, share of the `k` hits in it) per query, the hits in `order` as search
    orders them (`narbench.search_engine.order`); a hit is in it when any of its families is (`row_families`: an
    index of real 2.3 keeps every family of a shared graph; 2.2's, one)."""
    from narbench.search_engine.backends import make_backend
    from narbench.search_engine.index_file import row_families
    from narbench.search_engine.order import depth, reorder

    backend = make_backend("exact", index.arrays["embeddings"])
    rows, _ = backend.search(index.embed(queries), depth(k, order))
    ranked = [reorder(row, lambda r: row_families(index, r), order) for row in rows.tolist()]
    hit = np.array([[g.family in row_families(index, r) for r in row[:k]] for g, row in zip(queries, ranked)],
                   dtype=bool)
    return hit[:, 0], hit.mean(axis=1)


def flagged(index, queries) -> np.ndarray | None:
    """Per query, whether search says "no family in the index fits" (every crossimpl query fits one: a false
    flag); None when the index has no out-of-family score."""
    from narbench.search_engine.outside import stored
    from narbench.search_engine.outside_fit import query_features

    score = stored(index)
    if score is None:
        return None
    return score.scores(query_features(index, queries)) >= score.threshold


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="real", help="registered dataset whose crossimpl split queries")
    parser.add_argument("--index", type=Path, help="index file (default: the shipped index)")
    parser.add_argument("--order", default=DEFAULT_ORDER, choices=ORDERS,
                        help="the hits' order (default: search's)")
    parser.add_argument("--against", type=Path, metavar="OTHER",
                        help="another index file ('shipped' for the shipped index): paired differences and p")
    args = parser.parse_args(argv)

    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_file import load_index
    from narbench.search_engine.index_build import newest_corpus

    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    index = load_index(None, args.index)
    if list(index.vocab) != list(ds.vocab):
        print(f"the index ({index.describe()}) is not over {args.dataset}'s vocabulary; build one on it with "
              f"narbench index build --dataset {args.dataset}", file=sys.stderr)
        return 2
    split = ds.get_split("crossimpl")
    queries = [ds.graphs[i] for i in split.test]
    top1, p10 = measure(index, queries, order=args.order)
    flags = flagged(index, queries)
    flags = np.full(len(queries), np.nan) if flags is None else flags.astype(np.float64)
    print(f"index: {index.describe()} (sha256 {index.sha256[:12]}); queries: {args.dataset} crossimpl, {len(queries)}")
    packages = [(name.split(":", 1)[1], pos) for name, pos in sorted(split.subsets.items()) if name.startswith("package:")]
    summary = [("all", np.arange(len(queries)))] + [(name, pos) for name, pos in sorted(split.subsets.items())
                                                     if not name.startswith("package:")]
    groups = packages + summary
    print(f"| {'queries':<26} | {'n':>4} | top-1 family | family P@10 | flagged |")
    print(f"|{'-' * 28}|{'-' * 6}|{'-' * 14}|{'-' * 13}|{'-' * 9}|")
    for name, pos in groups:
        pos = np.asarray(pos, dtype=np.int64)
        print(f"| {name:<26} | {len(pos):>4} | {top1[pos].mean():>12.3f} | {p10[pos].mean():>11.3f} | "
              f"{flags[pos].mean():>7.3f} |")
    print('flagged: search says "no family in the index fits" (false for every crossimpl query; nan: no score)')
    met = top1.mean() >= TOP1 and p10.mean() >= P10
    print(f"targets (all queries): top-1 >= {TOP1}, P@10 >= {P10}: {'met' if met else 'not met'}")
    if args.against is not None:
        other = load_index(None, None if str(args.against) == "shipped" else args.against)
        if list(other.vocab) != list(ds.vocab):
            print(f"the index {other.describe()} is not over {args.dataset}'s vocabulary", file=sys.stderr)
            return 2
        package = np.empty(len(queries), dtype=object)
        for name, pos in packages:
            package[np.asarray(pos, dtype=np.int64)] = name
        clusters = np.asarray([f"{p}|{g.family}" for p, g in zip(package, queries)])  # package x family (protocol.md)
        compare(other, (top1, p10), measure(other, queries, order=args.order), summary, clusters)  # packages: too few queries to test
    return 0


def compare(other, mine: tuple[np.ndarray, np.ndarray], theirs: tuple[np.ndarray, np.ndarray], groups,
            clusters: np.ndarray) -> None:
    """Paired differences (this index minus `other`) and bootstrap p over all queries and each subset, resampling
    whole clusters (a package's implementation of one family: its queries are not independent)."""
    from narbench.leaderboard.significance import bootstrap_test

    print(f"\nagainst: {other.describe()} (sha256 {other.sha256[:12]}); difference (this - that), two-sided p")
    print(f"| {'queries':<26} | {'n':>4} | top-1 family | p      | family P@10 | p      |")
    print(f"|{'-' * 28}|{'-' * 6}|{'-' * 14}|{'-' * 8}|{'-' * 13}|{'-' * 8}|")
    for name, pos in groups:
        pos = np.asarray(pos, dtype=np.int64)
        cells = []
        for a, b in zip(mine, theirs):
            a, b = a[pos].astype(np.float64), b[pos].astype(np.float64)
            p = bootstrap_test(b[None], a[None], clusters=clusters[pos])
            cells += [f"{a.mean() - b.mean():>+12.3f}", f"{p:>6.3f}"]
        print(f"| {name:<26} | {len(pos):>4} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
