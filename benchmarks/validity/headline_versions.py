"""What a dataset version change does to the headline (issue 37: which † marks changed, which rankings flipped).

    python -m benchmarks.validity.headline_versions                       # real: every committed version's headline columns
    python -m benchmarks.validity.headline_versions --results DIR --dataset real

Reads the result files as `narbench leaderboard` does, and for each headline column of DATASET
(`narbench.leaderboard.headline.COLUMNS`) prints every method's NDCG@20 mean, rank and † mark
under each version whose Table 1 block exists (quick profile, the headline's protocol), then the
changes between consecutive versions: a † added or removed, the column's best row, and each pair
of methods whose order flipped. A split's queries can differ between versions (2.2's crossimpl
is a wider query set than 2.1's): a change then mixes the data's and the rules'. Asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from itertools import combinations
from pathlib import Path

from benchmarks.timing import ROOT
from narbench import leaderboard as lb
from narbench.leaderboard.headline import COLUMNS, METRIC, PROTOCOL, blocks_by_version
from narbench.leaderboard.subsets import with_subsets


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "leaderboard" / "results")
    parser.add_argument("--dataset", default="real")
    args = parser.parse_args(argv)
    by_version = blocks_by_version(lb.build_tables(with_subsets(lb.collect([args.results]))), "quick")
    for dataset, split in COLUMNS:
        if dataset != args.dataset:
            continue
        blocks = by_version.get((dataset, split), {})
        print(f"\n## {dataset} · {split} ({METRIC}, quick, protocol {PROTOCOL})")
        scores = {v: {r.label: (r.mean[METRIC], r.marks.get(METRIC, ""), METRIC in r.bold) for r in b.rows}
                  for v, b in blocks.items()}
        ranks = {v: {m: i + 1 for i, m in enumerate(sorted(s, key=lambda m: -s[m][0]))} for v, s in scores.items()}
        labels = sorted({m for s in scores.values() for m in s}, key=lambda m: -max(s.get(m, (-1,))[0] for s in scores.values()))
        print("| method | " + " | ".join(scores) + " |")
        print("|---|" + "---:|" * len(scores))
        for m in labels:
            cells = [f"{s[m][0]:.3f}{s[m][1]}{' (best)' if s[m][2] else ''} #{ranks[v][m]}" if m in s else "–"
                     for v, s in scores.items()]
            print(f"| {m} | " + " | ".join(cells) + " |")
        versions = list(scores)
        for old, new in zip(versions, versions[1:]):
            a, b = scores[old], scores[new]
            both = [m for m in labels if m in a and m in b]
            print(f"\n{old} -> {new}:")
            best = [[m for m in s if s[m][2]] for s in (a, b)]
            print(f"- best row: {', '.join(best[0]) or '–'} -> {', '.join(best[1]) or '–'}")
            for m in both:
                if bool(a[m][1]) != bool(b[m][1]):
                    print(f"- † {'added' if b[m][1] else 'removed'}: {m} ({a[m][0]:.3f} -> {b[m][0]:.3f})")
            flips = [(x, y) for x, y in combinations(both, 2) if (a[x][0] - a[y][0]) * (b[x][0] - b[y][0]) < 0]
            print(f"- order flipped in {len(flips)} of {len(both) * (len(both) - 1) // 2} pairs"
                  + (":" if flips else ""))
            for x, y in flips:
                hi, lo = (x, y) if b[x][0] > b[y][0] else (y, x)
                print(f"  - {hi} now above {lo} ({a[hi][0]:.3f} < {a[lo][0]:.3f} -> {b[hi][0]:.3f} > {b[lo][0]:.3f})")
            only = [m for m in labels if m in b and m not in a]
            if only:
                print(f"- only in {new}: {', '.join(only)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
