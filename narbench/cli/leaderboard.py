"""`narbench leaderboard`: regenerate the leaderboard folder from result files (`narbench.leaderboard.write_leaderboard`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from narbench.cli.args import ShowDefaults, console
from narbench.train.profiles import PROFILES

#: `narbench leaderboard --test` choices, the default first: `narbench.leaderboard.significance.TESTS`
#: (named here so that building the parser imports no numpy; a test keeps the two in step)
LEADERBOARD_TESTS = ("bootstrap", "bootstrap-query", "student", "fisher", "student-pooled")


def register(sub) -> None:
    """Add `leaderboard` to the subcommands."""
    p = sub.add_parser("leaderboard", help="aggregate result files into the leaderboard (tables, plots)",
                       formatter_class=ShowDefaults)
    p.add_argument("--results", action="append", default=[], metavar="DIR",
                   help="extra folder of result files (repeatable; <out>/results is always read)")
    p.add_argument("--out", default="leaderboard", help="leaderboard folder")
    p.add_argument("--readme", default=None, metavar="FILE",
                   help="rewrite the headline table between the narbench:headline markers of FILE (default: the "
                        "README.md beside the leaderboard folder, when it has the markers)")
    p.add_argument("--profile", dest="profiles", action="append", default=None, choices=sorted(PROFILES),
                   help="a profile to show (repeatable; default: quick and paper, the ones comparable with the "
                        "paper; any other gets blocks of its own without the paper's numbers)")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--no-tsne", action="store_true", help="skip the t-SNE maps (the slowest part)")
    p.add_argument("--redraw", action="store_true", help="redraw every figure, even those whose inputs are unchanged")
    p.add_argument("--verify", action="store_true",
                   help="re-run every shown result of a training-free encoder and refuse one that differs (takes as "
                        "long as those runs took; rows re-run in full are `re-run` in aggregate.csv's verified column)")
    p.add_argument("--test", default=LEADERBOARD_TESTS[0], choices=LEADERBOARD_TESTS,
                   help="significance test of the tables' marks (default: a two-level bootstrap over clusters of "
                        "dependent queries and seeds; bootstrap-query: over single queries)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Regenerate the leaderboard folder; progress on stderr, compact tables on stdout."""
    import time

    from rich.markup import escape

    from narbench.harness.preflight import check_output
    from narbench.leaderboard import PAPER_PROFILES, write_leaderboard
    from narbench.leaderboard.headline import START

    check_output(args.out, what="leaderboard folder")  # a file in the way, read-only: one line, nothing read
    err, t0 = console(stderr=True), time.perf_counter()

    def progress(text: str) -> None:
        err.print(f"[dim]leaderboard {time.perf_counter() - t0:5.1f}s[/dim] {escape(text)}", soft_wrap=True,
                  highlight=False)

    headline = args.readme
    beside = Path(args.out).resolve().parent / "README.md"
    if headline is None and beside.is_file() and START in beside.read_text(errors="replace"):
        headline = beside
    verify = None
    if args.verify:
        from narbench.harness.verify import FloorVerifier
        verify = FloorVerifier(progress)
    readme = write_leaderboard(args.results, args.out, profiles=args.profiles or PAPER_PROFILES,
                               plots=not args.no_plots, tsne=not args.no_tsne, stat_test=args.test,
                               redraw=args.redraw, readme=headline, console=console(), progress=progress,
                               verify=verify)
    console().print(f"leaderboard written to [bold]{escape(str(readme))}[/bold]", soft_wrap=True, highlight=False)
    return 0
