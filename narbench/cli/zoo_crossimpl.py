"""`python -m narbench.cli.zoo_crossimpl --out DIR [--canonical-version V] [--corpus FILE]`: extract every row
of `narbench/data/crossimpl.csv` into `crossimpl-2.1.1.narg` (`narbench.zoo.crossimpl.run_cli`; `narbench
build-crossimpl` does the same)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from narbench.data.canonical import DEFAULT_VERSION
    from narbench.datasets.crossimpl import ARTIFACT

    ap = argparse.ArgumentParser(prog="narbench build-crossimpl",
                                 description="Build `crossimpl-2.1.1.narg`: canonical graphs of the reimplementations "
                                             "in `narbench/data/crossimpl.csv`.")
    ap.add_argument("--out", type=Path, required=True, help=f"folder for {ARTIFACT}")
    ap.add_argument("--canonical-version", default=DEFAULT_VERSION, help="canonical rules (2.2 needs --corpus)")
    ap.add_argument("--corpus", type=Path, default=None, help="real graph file of that version (corpus twins)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from narbench.zoo.crossimpl import run_cli

    return run_cli(args.out, args.canonical_version, args.corpus)


if __name__ == "__main__":
    sys.exit(main())
