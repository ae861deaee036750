"""`narbench runs`: the result files under folders, one row each (`narbench.harness.runs`)."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console


def register(sub) -> None:
    """Add `runs` to the subcommands."""
    p = sub.add_parser("runs", help="list result files: configuration, metrics, time, device, git commit")
    p.add_argument("dirs", nargs="*", default=["runs"], metavar="DIR", help="folders of result files (default: runs)")
    p.add_argument("--json", action="store_true", help="print them as JSON on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`narbench runs`: a table (or JSON) of the result files under DIR; unreadable files are named on stderr."""
    import json

    from narbench.harness.runs import list_runs, runs_table

    rows, problems = list_runs(args.dirs)
    err = Console(stderr=True)
    for problem in problems:
        err.print(f"[yellow]skipped:[/yellow] {problem}", highlight=False, soft_wrap=True)
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        (Console() if sys.stdout.isatty() else Console(width=250)).print(runs_table(rows))
    return 0
