"""Which † marks and generated findings change from one significance test to another (issues 37 and 58).

    python -m benchmarks.validity.significance_changes                       # clustered bootstrap vs single queries
    python -m benchmarks.validity.significance_changes --all-columns         # every column of the tables
    python -m benchmarks.validity.significance_changes --old student-pooled  # issue 37: against the pooled t-test

Reads the result files the way `narbench leaderboard` does (profiles quick and paper, crossimpl's
subsets as splits of their own), builds the tables twice, with the old test (default `bootstrap-query`:
the two-level bootstrap over single queries, the leaderboard's test before issue 58) and the new one
(default `bootstrap`: the same over clusters of dependent queries, `narbench.leaderboard.clusters`), and
prints per table block and column every † added or removed, with both p-values, the row's and the best
row's mean ± std over seeds and n; the † count of every table and of Table 1 per dataset/split,
protocol and column; the p of the pairs issue 58 named under both tests; and the generated findings
(`claims.findings_markdown`) whose sentences differ. Asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from functools import partial

from benchmarks.timing import ROOT
from narbench import leaderboard as lb
from narbench.leaderboard.significance import DEFAULT_TEST, TEST_UNIT, TESTS, Bootstrap, seed_matrix
from narbench.leaderboard.tables import CI_COLUMNS, COLUMNS, HEADERS, PAPER_PROFILES

#: the pairs issue 58 names (headline setting, (encoder, variant) above (encoder, variant)), on NDCG@20
ISSUE_PAIRS = (
    ("real unseen", ("graf-lda", "holdout=cross-source,wl_rounds=3"), ("gps", "")),
    ("real unseen", ("graf-lda", "holdout=cross-source"), ("graf-lda", "holdout=cross-source,wl_rounds=3")),
    ("real unseen", ("gps", ""), ("best-floor", "fuse=8")),
)


def _records(dirs):
    records = [r for r in lb.collect(dirs) if r.result.profile in PAPER_PROFILES]
    from narbench.leaderboard.subsets import with_subsets  # crossimpl's reimpl/exact subsets as splits

    return with_subsets(records)


def _fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "untested"
    return "<1e-4" if p < 1e-4 else f"{p:.4f}"


def _best(block, m):
    return next((r for r in block.rows if m in r.bold), None)


def dagger_changes(old, new, columns) -> tuple[Counter, Counter]:
    """Print every † that differs between the `old` and `new` tables; returns (Table 1 counts per
    (old|new, dataset, split, protocol, column), every table's counts per (old|new, table))."""
    t1: Counter = Counter()
    every: Counter = Counter()
    for t_old, t_new in zip(old, new):
        for b_old, b_new in zip(t_old.blocks, t_new.blocks):
            if not b_old.rows:
                continue
            assert b_old.setting == b_new.setting and [r.label for r in b_old.rows] == [r.label for r in b_new.rows]
            lines = []
            ds, split, protocol = b_old.setting[0], b_old.setting[1], b_old.setting[4]
            for m in columns:
                best = _best(b_new, m)
                for r_old, r_new in zip(b_old.rows, b_new.rows):
                    was, now = m in r_old.marks, m in r_new.marks
                    every[("old", t_old.number)] += was
                    every[("new", t_old.number)] += now
                    if t_old.number == 1:
                        t1[("old", ds, split, protocol, m)] += was
                        t1[("new", ds, split, protocol, m)] += now
                    if was != now:
                        lines.append(
                            f"  {'removed' if was else 'added':7} {HEADERS[m]:8} {r_new.label:32} n={r_new.n_text:2} "
                            f"{r_new.mean[m]:.4f}±{r_new.std[m]:.4f} vs best {best.label if best else '?'} "
                            f"{best.mean[m]:.4f}±{best.std[m]:.4f}  p old {_fmt_p(r_old.p.get(m))}, "
                            f"p new {_fmt_p(r_new.p.get(m))}")
            if lines:
                print(f"Table {t_old.number} · {b_old.title}")
                print("\n".join(lines) + "\n")
    return t1, every


def print_counts(t1: Counter, every: Counter) -> None:
    print("Table 1, † per dataset/split, protocol block and column, old -> new:")
    for ds, split, protocol, m in sorted({k[1:] for k in t1}):
        o, n = t1[("old", ds, split, protocol, m)], t1[("new", ds, split, protocol, m)]
        if o or n:
            print(f"  {ds:22} {split:18} {protocol:7} {HEADERS[m]:8} {o:3} -> {n:3}")
    for number in sorted({k[1] for k in every}):
        print(f"  Table {number}: {every[('old', number)]} -> {every[('new', number)]} †")
    print(f"  all tables: {sum(v for k, v in every.items() if k[0] == 'old')} -> "
          f"{sum(v for k, v in every.items() if k[0] == 'new')} †\n")


def issue_pairs(records, tables, old_test: str, new_test: str) -> None:
    """The p of each pair of `ISSUE_PAIRS` in the headline's blocks under both tests (bootstrap tests only)."""
    from narbench.leaderboard.headline import METRIC, headline_blocks

    chosen = headline_blocks(tables)
    if chosen is None or old_test not in TEST_UNIT or new_test not in TEST_UNIT:
        return
    profile, blocks = chosen
    runs = lb.select_runs(records)
    print(f"Issue 58's pairs ({METRIC}, Table 1, profile {profile}, protocol family), p {old_test} -> {new_test}:")
    for setting, a, b in ISSUE_PAIRS:
        block = blocks.get(tuple(setting.split(" ", 1)))
        rows = {(r.key.encoder, r.key.variant): r for r in (block.rows if block else [])}
        if a not in rows or b not in rows:
            print(f"  {setting}: {a} or {b} not in the block")
            continue
        ra, rb = rows[a], rows[b]
        xa, xb = seed_matrix(runs[ra.key], METRIC), seed_matrix(runs[rb.key], METRIC)
        ps = [Bootstrap(unit=TEST_UNIT[t]).test(xa, xb) for t in (old_test, new_test)]
        print(f"  {setting}: `{ra.label}` ({ra.mean[METRIC]:.3f}) vs `{rb.label}` ({rb.mean[METRIC]:.3f}): "
              f"p {_fmt_p(ps[0])} -> {_fmt_p(ps[1])}")
    print()


def findings_changes(records, old, new, old_test: str, new_test: str) -> None:
    """The generated findings under each test (each one's tables and pairwise p), sentence by sentence."""
    from narbench.leaderboard import claims

    if old_test not in TEST_UNIT or new_test not in TEST_UNIT:
        return
    texts = []
    for tables, test in ((old, old_test), (new, new_test)):
        saved = claims.Bootstrap
        claims.Bootstrap = partial(Bootstrap, unit=TEST_UNIT[test])
        try:
            texts.append(claims.findings_markdown(records, tables))
        finally:
            claims.Bootstrap = saved
    said = [[s for line in t.splitlines() for s in claims.sentences(line)] for t in texts]  # per bullet
    gone, came = [s for s in said[0] if s not in said[1]], [s for s in said[1] if s not in said[0]]
    print(f"Generated findings: {len(said[0])} sentences under {old_test}, {len(said[1])} under {new_test}; "
          f"{len(gone)} only under {old_test}, {len(came)} only under {new_test}:")
    for s in gone:
        print(f"  - {s}")
    for s in came:
        print(f"  + {s}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=[str(ROOT / "leaderboard" / "results")])
    ap.add_argument("--old", default="bootstrap-query", choices=list(TESTS))
    ap.add_argument("--new", default=DEFAULT_TEST, choices=list(TESTS))
    ap.add_argument("--all-columns", action="store_true", help="every column, not only NDCG@20, MRR@20, MAPc@20")
    args = ap.parse_args(argv)
    columns = COLUMNS if args.all_columns else CI_COLUMNS

    t0 = time.perf_counter()
    records = _records(args.dirs)
    df = lb.aggregate(records)
    t1 = time.perf_counter()
    old = lb.build_tables(records, df, stat_test=args.old)
    t2 = time.perf_counter()
    new = lb.build_tables(records, df, stat_test=args.new)
    t3 = time.perf_counter()
    print(f"{len(records)} records from {', '.join(args.dirs)} ({t1 - t0:.1f} s); old: {args.old} ({t2 - t1:.1f} s), "
          f"new: {args.new} ({t3 - t2:.1f} s)")
    print(f"columns: {', '.join(HEADERS[m] for m in columns)}; alpha {lb.ALPHA}\n")
    print_counts(*dagger_changes(old, new, columns))
    issue_pairs(records, new, args.old, args.new)
    findings_changes(records, old, new, args.old, args.new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
