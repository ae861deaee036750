"""What every subcommand's parser shares: the parser class, the help formatter, the argparse types, the console.

A bad value is refused by the parser in one line (`narbench run: error: argument --seed: expected ...,
got ... (see narbench run --help)`), before any work. Nothing here imports torch or numpy: `--help`,
`--version` and argument errors answer without them (tests/test_cli_first_hour.py).
"""

from __future__ import annotations

import argparse

#: the seeds narbench accepts: numpy's and torch's generators take 0 .. 2**32-1 everywhere
#: (`narbench.harness.runner.MAX_SEED`, said here without importing the harness)
MAX_SEED = 2**32 - 1


class Parser(argparse.ArgumentParser):
    """argparse, with an error in one line (no usage block): `narbench run: error: ... (see --help)`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class ShowDefaults(argparse.HelpFormatter):
    """Help that names each option's default, where it has one worth naming."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False or action.default == [] \
                or action.default == argparse.SUPPRESS:
            return text
        return text + " (default: %(default)s)"


def checked(convert, ok, expected: str):
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


positive_int = checked(int, lambda v: v >= 1, "a positive integer")
non_negative_int = checked(int, lambda v: v >= 0, "an integer >= 0")
seed = checked(int, lambda v: 0 <= v <= MAX_SEED, f"an integer from 0 to {MAX_SEED}")
non_negative_float = checked(float, lambda v: 0 <= v < float("inf"), "a number >= 0")  # NaN fails too


def parse_param(text: str) -> tuple[str, object]:
    """`KEY=VALUE` of `--param`: the value as an int, a float, a bool (true/false) or the text."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


def shape(text: str) -> tuple[int, ...]:
    """`--input-shape`: positive integers as `1,3,224,224` or `1x3x224x224`."""
    parts = text.replace("x", ",").split(",")
    dims = tuple(int(x) for x in parts if x.strip().isdigit()) if all(x.strip().isdigit() for x in parts) else ()
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,3,224,224, got {text!r}")
    return dims


def json_object(text: str) -> dict:
    """`--kwargs`: a JSON object."""
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"width\": 64}}', got {text!r}")
    return value


def add_max_memory(parser, what: str) -> None:
    """`--max-memory SIZE`: memory a model given as code may take in its child beyond what narbench has
    loaded (`narbench.search_engine._target_child.MAX_MEMORY` by default; 0: no cap). `search` and
    `explore` share it; `what` starts its help."""
    from narbench.core.child import format_size, parse_size
    from narbench.search_engine._target_child import MAX_MEMORY

    parser.add_argument("--max-memory", type=checked(parse_size, lambda v: v >= 0, "a size like 4G, 512M or 0 (no cap)"),
                        default=MAX_MEMORY, metavar="SIZE",
                        help=f"{what} may take beyond what narbench has loaded, e.g. 8G or 512M "
                             f"(default {format_size(MAX_MEMORY).replace(' GiB', 'G')}; 0: no cap)")


def console(stderr: bool = False, **kwargs):
    """A rich Console; not on a terminal (a log, a pipe) it is 160 columns wide unless COLUMNS says."""
    import os

    from rich.console import Console

    out = Console(stderr=stderr, **kwargs)
    if not out.is_terminal and "COLUMNS" not in os.environ and "width" not in kwargs:
        out = Console(stderr=stderr, width=160, **kwargs)
    return out
