"""`python -m narbench.cli.curves FOLDER [--out DIR]`: the learning-curve page and plots of the `narbench run
--curve` results under FOLDER (`narbench.leaderboard.curves.write_curves`)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Write `<out>/curves.md` and its plots; 2 (one line) when FOLDER holds no curve result."""
    from narbench.leaderboard import curves

    parser = argparse.ArgumentParser(prog="python -m narbench.cli.curves", description=curves.__doc__.split("\n")[0])
    parser.add_argument("folder", help="folder of curve results (e.g. leaderboard/curves)")
    parser.add_argument("--out", default="leaderboard", help="where curves.md and plots/ go (default: leaderboard)")
    args = parser.parse_args(argv)
    try:
        page = curves.write_curves(args.folder, args.out)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
