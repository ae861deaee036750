"""`python -m narbench.cli.declared [--check]`: rewrite `leaderboard/declared.csv`, one configuration per method
and dataset chosen on validation records only (the rule: `narbench.leaderboard.declared`), or check it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    """Write the file (0), or with `--check` write nothing and say whether it is what the rule gives (0 / 1)."""
    from narbench.leaderboard import declared

    parser = argparse.ArgumentParser(prog="python -m narbench.cli.declared",
                                     description=declared.__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, nargs="+", default=[declared.RESULTS_DIR],
                        help="folders of result files")
    parser.add_argument("--curves", type=Path, nargs="+", default=[declared.CURVES_DIR], help="folders of curve runs")
    parser.add_argument("--out", type=Path, default=declared.DECLARED_CSV)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when --out differs")
    args = parser.parse_args(argv)
    text = declared.to_csv(declared.select(args.results, args.curves))
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        print(f"{args.out}: " + ("as the rule gives" if same else "differs from what the rule gives; run "
                                 "`python -m narbench.cli.declared`"))
        return 0 if same else 1
    from narbench.data.store import atomic_write_bytes

    atomic_write_bytes(args.out, text.encode())
    print(f"{args.out}: {text.count(chr(10)) - 1} methods x datasets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
