"""`python -m narbench.cli.taxonomy_build [--check] [--out DIR] [--cache DIR]`: rebuild the taxonomy tables
`taxonomy-real.csv` and `taxonomy-near-duplicates.csv` (`narbench.zoo.taxonomy_build.build_tables`), or check
that the committed ones are fresh."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m narbench.cli.taxonomy_build",
                                 description="Build `narbench/data/taxonomy-real.csv` and "
                                             "`taxonomy-near-duplicates.csv` from rules and data.")
    ap.add_argument("--check", action="store_true", help="fail if the committed tables differ from a rebuild")
    ap.add_argument("--out", type=Path, default=None, help="write the tables here (default: narbench/data)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep the isomorphism classes and WL pairs of the (unchanged) graphs here between runs")
    return ap


def main(argv: list[str] | None = None) -> int:
    """0 when the tables are written (or, with --check, fresh) and every invariant holds; 1 otherwise."""
    args = build_parser().parse_args(argv)
    from narbench.zoo.taxonomy_build import build_tables

    return build_tables(check=args.check, out=args.out, cache=args.cache)


if __name__ == "__main__":
    sys.exit(main())
