"""`narbench datasets`, `narbench encoders`, `narbench splitters`: what is registered, as a table
(`narbench.datasets.datasheet.datasets_table`, `narbench.core.registry.table`)."""

from __future__ import annotations

import argparse

from narbench.cli.args import console


def register(sub) -> None:
    """Add `datasets`, `encoders` and `splitters` to the subcommands."""
    sub.add_parser("datasets", help="list registered datasets: version, size, families, splits").set_defaults(
        func=run, kind="dataset")
    for kind in ("encoder", "splitter"):
        sub.add_parser(f"{kind}s", help=f"list registered {kind}s").set_defaults(func=run, kind=kind)


def run(args: argparse.Namespace) -> int:
    """The registered datasets (version, size, families, splits) or encoders / splitters (who provides them,
    what they are)."""
    if args.kind == "dataset":
        from narbench.datasets.datasheet import datasets_table

        table = datasets_table()
    else:
        from narbench.core import registry

        table = registry.table(args.kind)
    console().print(table)
    return 0
