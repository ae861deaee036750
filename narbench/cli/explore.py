"""`narbench explore`: the leaderboard as a web page, served on this machine or exported as static files."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from narbench.cli.args import ShowDefaults, add_max_memory, console

#: the leaderboard folder, inside the project root (`narbench.core.project`) unless --leaderboard is given
LEADERBOARD = "leaderboard"


def register(sub) -> None:
    """Add `explore` to the subcommands."""
    p = sub.add_parser("explore", help="the leaderboard and search as a web page: serve it locally, or export the "
                                       "leaderboard (--static)",
                       formatter_class=ShowDefaults)
    p.add_argument("--results", action="append", default=[], metavar="DIR",
                   help="a folder of result files shown beside the committed ones (repeatable)")
    p.add_argument("--leaderboard", default=None, metavar="DIR",
                   help="the leaderboard folder: its results/ are read and its plots/ shown (default: the project's "
                        "leaderboard/, found from any folder inside the project)")
    p.add_argument("--no-committed", action="store_true",
                   help="show only --results folders, not the leaderboard folder's results/")
    p.add_argument("--host", default=None,
                   help="address to listen on (default 127.0.0.1: this machine only; another address exposes "
                        "the page to the network, deliberately)")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one, printed)")
    p.add_argument("--token", default=None,
                   help="the access token to require (default: $NARBENCH_EXPLORER_TOKEN, else a random one, printed "
                        "in the address); other users can read a command line: prefer the variable")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a host name the page may be opened as, besides the bound address, localhost, 127.0.0.1 "
                        "and ::1 (repeatable; for --host 0.0.0.0)")
    p.add_argument("--allow-code", action="store_true",
                   help="let the search tab import and run models given as code (FILE.py:CLASS, MODULE:CLASS, "
                        "timm:NAME) on this machine; refused with a --host other than 127.0.0.1")
    p.add_argument("--allow-paths", action="store_true",
                   help="let the search tab read graph files by their path on this machine; refused with a --host "
                        "other than 127.0.0.1")
    add_max_memory(p, "with --allow-code: memory a model's process")
    p.add_argument("--no-search", action="store_true", help="serve the leaderboard only (no search tab)")
    p.add_argument("--static", default=None, metavar="DIR",
                   help="write the page, its data and charts into DIR for any web host, and exit")
    p.set_defaults(func=run, interrupted="explorer stopped")


def _leaderboard(args: argparse.Namespace) -> Path | None:
    """The leaderboard folder: as given, else the project's; None outside a project when it is not needed."""
    from narbench.core.project import NotInProject, find_root

    if args.leaderboard is not None:
        return Path(args.leaderboard)
    try:
        return find_root() / LEADERBOARD
    except NotInProject:
        if args.no_committed:  # only its charts were wanted: none
            return None
        raise


def run(args: argparse.Namespace) -> int:
    """Check the flags, build the views (progress on stderr), then export them or serve them until Ctrl-C."""
    import importlib.util
    import time

    from rich.markup import escape

    from narbench.explorer import app
    from narbench.explorer.access import Access, TokenError, choose_token
    from narbench.explorer.export import export_static
    from narbench.explorer.views import load_views

    err, out, t0 = console(stderr=True), console(), time.perf_counter()

    def progress(text: str) -> None:
        err.print(f"[dim]explore {time.perf_counter() - t0:5.1f}s[/dim] {escape(text)}", soft_wrap=True, highlight=False)

    if not 0 <= args.port <= 65535:
        raise app.ExplorerError(f"--port {args.port}: a port is 0 (a free one) to 65535")
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing and not args.static:  # checked before minutes of reading results (a static export needs neither)
        raise app.ExplorerError(f"narbench explore needs the explorer extra ({', '.join(missing)} not installed): "
                                "pip install 'narbench[explorer]'")
    try:
        token = None if args.static else choose_token(args.token, dict(os.environ))
    except TokenError as exc:
        raise app.ExplorerError(str(exc)) from None
    board = _leaderboard(args)
    dirs = ([] if args.no_committed else [board / "results"]) + [Path(d) for d in args.results]
    if not dirs:
        raise FileNotFoundError("nothing to show: --no-committed without a --results folder")
    plots = board / "plots" if board is not None and (board / "plots").is_dir() else None
    sock = None if args.static else _listen(args, app)  # a taken port or a refused flag: said at once
    payload = load_views(dirs, plot_dir=plots, progress=progress, declared=board / "declared.csv")
    if args.static:
        index = export_static(payload, args.static, plots)
        out.print(f"static explorer written to [bold]{escape(str(index))}[/bold] "
                  f"(serve the folder with any web server, e.g. python -m http.server -d {escape(args.static)})",
                  soft_wrap=True, highlight=False)
        return 0
    from narbench.explorer.searching import Searcher

    searcher = None if args.no_search else Searcher(allow_code=args.allow_code, allow_paths=args.allow_paths,
                                                         max_memory=args.max_memory)
    bound = sock.getsockname()[0]
    access = Access.local(token, bound, args.allow_host)
    shown = app.url_of(sock, token)
    if bound in ("0.0.0.0", "::"):  # a wildcard is no address to open: show this machine's name for it
        shown = f"http://localhost:{sock.getsockname()[1]}/?token={token}"
    out.print(f"narbench explorer on [bold]{escape(shown)}[/bold] (Ctrl-C stops it)", soft_wrap=True, highlight=False)
    app.serve(app.create_app(payload, plots, searcher, access=access), sock)
    return 0


def _listen(args: argparse.Namespace, app):
    """The bound socket; ExplorerError (one line) when code or paths are allowed on an address others can reach."""
    sock = app.bind(args.host or app.DEFAULT_HOST, args.port)
    flags = [f for f, on in (("--allow-code", args.allow_code), ("--allow-paths", args.allow_paths)) if on]
    if flags and not app.is_loopback(sock):
        sock.close()
        raise app.ExplorerError(f"{' and '.join(flags)} with --host {args.host}: refused (it would let other "
                                "machines run code or read files here); use them only on 127.0.0.1")
    return sock
