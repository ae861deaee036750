"""`narbench search TARGET`: the real architectures most similar to a model, graph or graph name
(`narbench.search_engine.engine.search`); one-line errors (exit 2), a table or JSON on stdout."""

from __future__ import annotations

import argparse
import sys

from narbench.cli.args import add_max_memory, console, json_object, non_negative_float, positive_int, shape
from narbench.cli.errors import one_line
from narbench.search_engine.order import DEFAULT_ORDER, ORDERS


def register(sub) -> None:
    """Add `search` to the subcommands."""
    p = sub.add_parser("search", help="the real architectures most similar to a model, graph or graph name",
                       description="The real architectures most similar to a model, graph or graph name. A TARGET "
                                   "given as code (FILE.py:CLASS, MODULE:CLASS, a zoo name) is imported and run, with "
                                   "your rights, in a child process under --max-memory and --timeout (docs/search.md, "
                                   "Security).")
    p.add_argument("target", metavar="TARGET",
                   help="FILE.py:CLASS, MODULE:CLASS, timm:NAME, torchvision:NAME, transformers:TYPE[/HEAD], "
                        "a graph file written by narbench, or the name of a graph in the index")
    p.add_argument("-k", type=positive_int, default=10, help="number of hits (default 10)")
    p.add_argument("--encoder", default=None, help="search the index built with this encoder (default: the shipped one)")
    p.add_argument("--index", default=None, metavar="FILE", help="search this index file")
    p.add_argument("--backend", default="exact", choices=["exact", "faiss"],
                   help="exact cosine search (default) or FAISS (pip install 'narbench[faiss]')")
    p.add_argument("--order", default=DEFAULT_ORDER, choices=ORDERS,
                   help="vote: the hits whose families the nearest graphs vote for first (default); family: the "
                        "nearest graph's families first, then the next family's; cosine: by cosine alone")
    p.add_argument("--kwargs", type=json_object, default=None, metavar="JSON",
                   help="constructor arguments of CLASS, as a JSON object")
    p.add_argument("--input-shape", type=shape, action="append", default=None, metavar="N,C,H,W",
                   help="shape of the example input (default: chosen as the real dataset's build does); "
                        "repeat it for a forward that takes several tensors")
    p.add_argument("--inputs", default=None, metavar="FILE.py:FUNC",
                   help="a function returning the example inputs: a tensor, a tuple of positional inputs, "
                        "a dict of keyword inputs, or (args, kwargs)")
    p.add_argument("--timeout", type=non_negative_float, default=120.0, metavar="SECONDS",
                   help="stop with an error if importing, building and running the model takes longer; its "
                        "process group is killed (default 120; 0: no limit)")
    add_max_memory(p, "memory the model's process")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no status line on stderr while the first search loads torch and the index")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Search; user code (the model, `--inputs`) runs in a child process under `--timeout` and `--max-memory`
    (`narbench.search_engine._target_child`), its prints go to stderr."""
    import contextlib
    import json
    import warnings

    from narbench.eval.retrieval import EmbeddingError
    from narbench.search_engine.backends import BackendError
    from narbench.search_engine.engine import render, search
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.target import TargetError

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):  # user code's prints
            warnings.simplefilter("ignore")
            result = search(args.target, args.k, encoder=args.encoder, index=args.index, backend=args.backend,
                            input_shape=args.input_shape, kwargs=args.kwargs, inputs=args.inputs,
                            timeout=args.timeout, max_memory=args.max_memory, progress=not args.quiet,
                            order=args.order)
    except (TargetError, IndexFileError, BackendError, EmbeddingError) as exc:
        return one_line("search", exc)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    render(result, console())  # piped: 160 columns, no folded names
    return 0
