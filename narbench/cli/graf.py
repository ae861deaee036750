"""`python -m narbench.cli.graf [--out CSV]`: the design table of the `graf` floor (baselines/graf_design.csv).

Every candidate design's validation NDCG@20 on the `quick` training graphs (seed 0) of nas standard,
real standard and real unseen (`narbench.baselines.graf.design_csv`).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Print the table, or write it to `--out`."""
    from narbench.baselines.graf import design_csv

    parser = argparse.ArgumentParser(prog="python -m narbench.cli.graf", description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the table here as CSV (default: print it)")
    args = parser.parse_args(argv)
    text = design_csv()
    if args.out:
        with open(args.out, "w", newline="") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
