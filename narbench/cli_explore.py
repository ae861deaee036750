"""`narbench explore`: the leaderboard as a web page, served on this machine or exported as static files."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_explore_parser(sub, formatter) -> None:
    p = sub.add_parser("explore", help="the leaderboard and search as a web page: serve it locally, or export the "
                                       "leaderboard (--static)",
                       formatter_class=formatter)
    p.add_argument("--results", action="append", default=[], metavar="DIR",
                   help="a folder of result files shown beside the committed ones (repeatable)")
    p.add_argument("--leaderboard", default="leaderboard", metavar="DIR",
                   help="the leaderboard folder: its results/ are read and its plots/ shown")
    p.add_argument("--no-committed", action="store_true",
                   help="show only --results folders, not the leaderboard folder's results/")
    p.add_argument("--host", default=None,
                   help="address to listen on (default 127.0.0.1: this machine only; another address exposes "
                        "the page to the network, deliberately)")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one, printed)")
    p.add_argument("--no-search", action="store_true", help="serve the leaderboard only (no search tab)")
    p.add_argument("--static", default=None, metavar="DIR",
                   help="write the page, its data and charts into DIR for any web host, and exit")
    p.set_defaults(func=cmd_explore, interrupted="explorer stopped")


def cmd_explore(args: argparse.Namespace) -> int:
    """Build the views (progress on stderr), then export them or serve them until Ctrl-C."""
    import importlib.util
    import time

    from rich.markup import escape

    from narbench.cli_args import _console
    from narbench.explorer import app
    from narbench.explorer.export import export_static
    from narbench.explorer.views import load_views

    err, out, t0 = _console(stderr=True), _console(), time.perf_counter()

    def progress(text: str) -> None:
        err.print(f"[dim]explore {time.perf_counter() - t0:5.1f}s[/dim] {escape(text)}", soft_wrap=True, highlight=False)

    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing and not args.static:  # checked before minutes of reading results (a static export needs neither)
        raise app.ExplorerError(f"narbench explore needs the explorer extra ({', '.join(missing)} not installed): "
                                "pip install 'narbench[explorer]'")
    board = Path(args.leaderboard)
    dirs = ([] if args.no_committed else [board / "results"]) + [Path(d) for d in args.results]
    if not dirs:
        raise FileNotFoundError("nothing to show: --no-committed without a --results folder")
    plots = board / "plots" if (board / "plots").is_dir() else None
    sock = None if args.static else app.bind(args.host or app.DEFAULT_HOST, args.port)  # a taken port: said at once
    payload = load_views(dirs, plot_dir=plots, progress=progress)
    if args.static:
        index = export_static(payload, args.static, plots)
        out.print(f"static explorer written to [bold]{escape(str(index))}[/bold] "
                  f"(serve the folder with any web server, e.g. python -m http.server -d {escape(args.static)})",
                  soft_wrap=True, highlight=False)
        return 0
    from narbench.explorer.searching import Searcher

    # models given as code run on this machine: only while no other machine can reach the server
    searcher = None if args.no_search else Searcher(allow_code=app.is_loopback(sock))
    out.print(f"narbench explorer on [bold]{app.url_of(sock)}[/bold] (Ctrl-C stops it)", soft_wrap=True, highlight=False)
    app.serve(app.create_app(payload, plots, searcher), sock)
    return 0
