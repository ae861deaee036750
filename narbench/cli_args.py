"""argparse types of the command line, shared by `narbench.cli` and `narbench.cli_sweep`:
a bad value is refused by the parser in one line ("expected ..., got ..."), before any work."""

from __future__ import annotations

import argparse

#: the seeds narbench accepts: numpy's and torch's generators take 0 .. 2**32-1 everywhere
#: (`narbench.harness.runner.MAX_SEED`, said here without importing the harness)
MAX_SEED = 2**32 - 1


def _checked(convert, ok, expected: str):
    """An argparse `type`: `convert(text)`, refused with "expected <expected>" unless `ok(value)`."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


_positive_int = _checked(int, lambda v: v >= 1, "a positive integer")
_seed = _checked(int, lambda v: 0 <= v <= MAX_SEED, f"an integer from 0 to {MAX_SEED}")
_non_negative_float = _checked(float, lambda v: 0 <= v < float("inf"), "a number >= 0")  # NaN fails too


def add_max_memory(parser, what: str) -> None:
    """`--max-memory SIZE`: memory a model given as code may take in its child beyond what narbench has
    loaded (`narbench.search_engine._target_child.MAX_MEMORY` by default; 0: no cap). `search` and
    `explore` share it; `what` starts its help."""
    from narbench.core.child import format_size, parse_size
    from narbench.search_engine._target_child import MAX_MEMORY

    parser.add_argument("--max-memory", type=_checked(parse_size, lambda v: v >= 0, "a size like 4G, 512M or 0 (no cap)"),
                        default=MAX_MEMORY, metavar="SIZE",
                        help=f"{what} may take beyond what narbench has loaded, e.g. 8G or 512M "
                             f"(default {format_size(MAX_MEMORY).replace(' GiB', 'G')}; 0: no cap)")


def _console(stderr: bool = False, **kwargs):
    """A rich Console; not on a terminal (a log, a pipe) it is 160 columns wide unless COLUMNS says."""
    import os

    from rich.console import Console

    console = Console(stderr=stderr, **kwargs)
    if not console.is_terminal and "COLUMNS" not in os.environ and "width" not in kwargs:
        console = Console(stderr=stderr, width=160, **kwargs)
    return console
