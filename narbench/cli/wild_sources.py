"""`python -m narbench.cli.wild_sources --set S --into DIR`: check out the GitHub repositories an outside set's
rows come from (`narbench/data/<set>-<version>-sources.txt`), each at its pinned commit, under `DIR/FOLDER`; then
`PYTHONPATH=DIR python -m narbench.cli.wild --set S --out OUT` extracts its rows (`narbench.zoo.wild_sources`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from narbench.datasets.wild import SETS
    from narbench.zoo.wild_sources import ORIGIN

    ap = argparse.ArgumentParser(prog="python -m narbench.cli.wild_sources",
                                 description="Check out an outside set's GitHub repositories at their commits.")
    ap.add_argument("--set", choices=list(SETS), required=True, help="the outside set (docs/wildval.md)")
    ap.add_argument("--into", type=Path, required=True, help="folder to put each repository in (its FOLDER)")
    ap.add_argument("--origin", default=ORIGIN,
                    help=f"where to clone from, with {{repo}} or {{owner}} and {{name}} (default {ORIGIN}; "
                         "a local mirror works)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from narbench.datasets.wild import outside_set
    from narbench.zoo.wild_sources import materialise, sources_of

    try:
        sources = sources_of(args.set, outside_set(args.set).version)
    except ValueError as exc:  # a damaged sources file: its line named
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not sources:
        print(f"{args.set} has no GitHub sources: its rows come from pip packages (its requirements file)",
              file=sys.stderr)
        return 2
    try:
        materialise(sources, args.into, args.origin, progress=print)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
