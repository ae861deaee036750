"""Which † marks change from the earlier leaderboards' test to the current default (issue 37, item 3).

    python benchmarks/significance_changes.py                      # leaderboard/results, NDCG@20 MRR@20 MAPc@20
    python benchmarks/significance_changes.py --all-columns        # every column of the tables
    python benchmarks/significance_changes.py --new student        # another test against the pooled one

Reads the result files the way `narbench leaderboard` does (profiles quick and paper, crossimpl's
subsets as splits of their own), builds the tables twice, with the pooled t-test of earlier
leaderboards (`student-pooled`: seed-matched per-query scores of all seeds concatenated) and with
the new test (default `bootstrap`: queries resampled, seeds' spread as Student t), and prints per
table block and column every † added or removed, with both p-values, the row's and the best row's
mean ± std over seeds and n. Then Table 1's count per dataset/split, protocol and column. Asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from narbench import leaderboard as lb  # noqa: E402
from narbench.leaderboard.significance import DEFAULT_TEST, TESTS  # noqa: E402
from narbench.leaderboard.tables import CI_COLUMNS, COLUMNS, HEADERS, PAPER_PROFILES  # noqa: E402

OLD = "student-pooled"


def _records(dirs):
    records = [r for r in lb.collect(dirs) if r.result.profile in PAPER_PROFILES]
    try:  # crossimpl's reimpl/exact subsets as splits of their own, as the leaderboard shows them
        from narbench.leaderboard.subsets import with_subsets
    except ImportError:
        return records
    return with_subsets(records)


def _fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "untested"
    return "<1e-4" if p < 1e-4 else f"{p:.4f}"


def _best(block, m):
    return next((r for r in block.rows if m in r.bold), None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=[str(ROOT / "leaderboard" / "results")])
    ap.add_argument("--new", default=DEFAULT_TEST, choices=[t for t in TESTS if t != OLD])
    ap.add_argument("--all-columns", action="store_true", help="every column, not only NDCG@20, MRR@20, MAPc@20")
    args = ap.parse_args(argv)
    columns = COLUMNS if args.all_columns else CI_COLUMNS

    t0 = time.perf_counter()
    records = _records(args.dirs)
    df = lb.aggregate(records)
    t1 = time.perf_counter()
    old = lb.build_tables(records, df, stat_test=OLD)
    t2 = time.perf_counter()
    new = lb.build_tables(records, df, stat_test=args.new)
    t3 = time.perf_counter()
    print(f"{len(records)} records from {', '.join(args.dirs)}; old: {OLD} ({t2 - t1:.1f} s), "
          f"new: {args.new} ({t3 - t2:.1f} s)")
    print(f"columns: {', '.join(HEADERS[m] for m in columns)}; alpha {lb.ALPHA}\n")

    per_setting: Counter = Counter()
    totals: Counter = Counter()
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
                    if t_old.number == 1:  # the counts: Table 1 only (other tables repeat its rows)
                        totals[("old", ds, split, protocol, m)] += was
                        totals[("new", ds, split, protocol, m)] += now
                    if was == now:
                        continue
                    change = "removed" if was else "added"
                    if t_old.number == 1:
                        per_setting[(ds, split, protocol, m, change)] += 1
                    lines.append(
                        f"  {change:7} {HEADERS[m]:8} {r_new.label:32} n={r_new.n_text:2} "
                        f"{r_new.mean[m]:.4f}±{r_new.std[m]:.4f} vs best {best.label if best else '?'} "
                        f"{best.mean[m]:.4f}±{best.std[m]:.4f}  p old {_fmt_p(r_old.p.get(m))}, "
                        f"p new {_fmt_p(r_new.p.get(m))}")
            if lines:
                print(f"Table {t_old.number} · {b_old.title}")
                print("\n".join(lines))
                for note in b_new.notes:
                    print(f"  note: {note}")
                print()

    print("Table 1, † per dataset/split, protocol block and column, old -> new:")
    for ds, split, protocol, m in sorted({k[1:] for k in totals}):
        o, n = totals[("old", ds, split, protocol, m)], totals[("new", ds, split, protocol, m)]
        print(f"  {ds:22} {split:18} {protocol:7} {HEADERS[m]:8} {o:3} -> {n:3}")
    o = sum(v for k, v in totals.items() if k[0] == "old")
    n = sum(v for k, v in totals.items() if k[0] == "new")
    removed = sum(v for k, v in per_setting.items() if k[-1] == "removed")
    added = sum(v for k, v in per_setting.items() if k[-1] == "added")
    print(f"  total Table 1: {o} -> {n} († removed {removed}, added {added})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
