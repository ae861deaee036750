"""`python -m narbench.cli.wild --out DIR`: extract every row of `narbench/data/wild-1.0.csv` into
`DIR/wild-1.0.narg` (`narbench.zoo.wild_graphs.run_cli`; needs the wild packages, docs/wild.md); `--set
wildval` the validation set's rows (`wildval-1.1.csv` into `wildval-1.1.narg`, docs/wildval.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from narbench.data.canonical import VERSIONS, at_least
    from narbench.datasets.wild import ARTIFACT, CANONICAL, SETS

    ap = argparse.ArgumentParser(prog="python -m narbench.cli.wild",
                                 description="Extract the wild set's graphs (canonical 2.2, as crossimpl's queries) "
                                             "into `wild-1.0.narg`; prints a table of nodes, unknown ops and seconds.")
    ap.add_argument("--out", type=Path, required=True, help=f"folder for {ARTIFACT} (or the file of --canonical-version)")
    ap.add_argument("--canonical-version", choices=[v for v in VERSIONS if at_least(v, "2.2")], default=None,
                    help=f"canonical rules to extract under (default: the set's first, the wild set's {CANONICAL}; "
                         "2.3 re-extracts with convolution groups and dimensions, custom functions traced through; "
                         "rules the set ships no file of write <set>-<version>-canonical-<rules>.narg, unpinned)")
    ap.add_argument("--set", choices=list(SETS), default="wild",
                    help="which table: wild (the test set, docs/wild.md) or wildval (the validation set, "
                         "docs/wildval.md)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from narbench.zoo.wild_graphs import run_cli

    return run_cli(args.out, args.canonical_version, args.set)


if __name__ == "__main__":
    sys.exit(main())
