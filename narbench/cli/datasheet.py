"""`narbench datasheet NAME`: what is in a dataset (`narbench.datasets.datasheet`), computed from the loaded data."""

from __future__ import annotations

import argparse
from pathlib import Path

from narbench.cli.args import console


def register(sub) -> None:
    """Add `datasheet` to the subcommands."""
    p = sub.add_parser("datasheet", help="counts per source/family/coarse label, sizes, vocabulary, split")
    p.add_argument("dataset", help="registered dataset name")
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write the datasheet as Markdown")
    p.add_argument("--json", default=None, metavar="FILE", help="also write it as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Draw the datasheet on stdout; write it as Markdown and JSON where asked."""
    import json

    from rich.markdown import Markdown

    from narbench.data.dataset import load_dataset
    from narbench.data.store import atomic_write_bytes
    from narbench.datasets.datasheet import datasheet

    sheet = datasheet(load_dataset(args.dataset))
    if args.dataset != sheet.name:
        sheet.registered = args.dataset  # a version registered beside the current one: say how to regenerate it
    text = sheet.to_markdown()
    console().print(Markdown(text))
    if args.markdown:
        atomic_write_bytes(Path(args.markdown), text.encode())
    if args.json:
        atomic_write_bytes(Path(args.json), json.dumps(sheet.to_json(), indent=1, sort_keys=True).encode())
    return 0
