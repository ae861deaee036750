"""`narbench` command line: all argument parsing and dispatch, one module per subcommand.

Each subcommand module (`SUBCOMMANDS`, in the order `narbench --help` lists them) has a
`register(subparsers)` that adds its parser and wires its handler with `set_defaults(func=...)`,
and the handler (`run(args)`; `run_real`, `run_build`, ... where a module holds several
subcommands). A handler takes the parsed arguments and returns the exit status: 0 done, 1 the gate
failed, 2 bad input (said in one line on stderr, before any training: `errors.input_errors`) or a
refused run (one line too: an encoder's non-finite embeddings, after training), 130 interrupted.
Handlers are thin: the work is the Python API's (`narbench.run`, `narbench.leaderboard`,
`narbench.harness.gate`). `args` holds what the parsers share (types, formatter, console).

Heavy modules (torch, PyG, numpy, the leaderboard) are imported inside the handlers: `--version`,
`--help` and argument errors answer without them (tests/test_cli_first_hour.py checks torch).
"""

from __future__ import annotations

import argparse
import sys

from narbench.cli import build, check, datasheet, explore, index, leaderboard, listing, run, runs, search, sweep
from narbench.cli.args import Parser, console
from narbench.cli.version import Version

#: the subcommand modules, each registering its parser(s), in `--help`'s order
SUBCOMMANDS = (run, build, datasheet, leaderboard, sweep, runs, search, index, explore, check, listing)


def build_parser() -> argparse.ArgumentParser:
    """The `narbench` parser: every subcommand, each with its handler as `func`."""
    parser = Parser(prog="narbench", description="Neural Architecture Retrieval benchmark")
    parser.add_argument("--version", action=Version, help="show the versions of narbench, torch, PyG and the datasets")
    parser.add_argument("--no-malloc-tuning", dest="malloc_tuning", action="store_false",
                        help="leave glibc's malloc settings alone (by default the command keeps freed batch memory "
                             "for reuse, see narbench.train.allocator; also NARBENCH_MALLOC_TUNING=0)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: the command line), run the subcommand's handler, return its exit status."""
    restore = _degrade_unencodable_output()
    try:
        return _main(argv)
    finally:
        restore()


def _main(argv: list[str] | None) -> int:
    from narbench import process
    from narbench.cli.errors import error, input_errors
    from narbench.train import allocator

    args = build_parser().parse_args(argv)
    errors = input_errors()
    try:
        # PyG, ir_datasets, matplotlib write into a temp dir; SIGTERM unwinds; freed batch memory is reused
        with process.scope(), allocator.tuned(args.malloc_tuning and allocator.enabled_by_environment()):
            return args.func(args)
    except KeyboardInterrupt as exc:
        process.show_cursor()
        console(stderr=True).print(getattr(args, "interrupted", "interrupted"), soft_wrap=True, highlight=False)
        return process.TERMINATED if isinstance(exc, process.Terminated) else 130
    except errors as exc:
        error(str(exc))
        return 2


def _degrade_unencodable_output():
    """stdout / stderr that are not UTF-8 (`PYTHONIOENCODING=ascii`, a C locale) write `?` for a character
    they cannot encode (the tables' `·`, `…`, box lines) instead of raising UnicodeEncodeError. Returns a
    function that restores them."""
    undo = []
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        errors = getattr(stream, "errors", None)
        if encoding.startswith("utf") or errors != "strict" or not hasattr(stream, "reconfigure"):
            continue
        try:
            stream.reconfigure(errors="replace")
        except (ValueError, OSError, TypeError):  # a stream that cannot be reconfigured: left as it is
            continue
        undo.append(stream)

    def restore() -> None:
        for stream in undo:
            try:
                stream.reconfigure(errors="strict")
            except (ValueError, OSError, TypeError):
                pass
    return restore
