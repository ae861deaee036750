"""Which exceptions mean bad input, and how the command says so: one line on stderr, exit status 2.

An error of `input_errors()` raised by a handler is the user's to fix (an unknown name, a missing or
corrupt file, a refused flag, a run refused after training) and `main` prints it with `error` in one
line; any other exception is a bug and keeps its traceback. Handlers that answer a problem before
raising (a result that could not be written) call `error` themselves.
"""

from __future__ import annotations


def input_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean bad input or a refused run (exit 2, one line), as opposed to a bug (a traceback)."""
    from narbench.core import registry
    from narbench.core.cache import WriteError
    from narbench.core.safeio import RefusedFileError
    from narbench.data.store import CorruptFileError
    from narbench.eval.retrieval import EmbeddingError
    from narbench.eval.validation import InvalidResultError
    from narbench.explorer.app import ExplorerError
    from narbench.harness.gate import GateError
    from narbench.harness.preflight import PreflightError
    from narbench.harness.runner import ConfigError
    from narbench.harness.grid import GridError
    from narbench.leaderboard import NothingToShowError, RejectedResultsError
    from narbench.leaderboard.headline import HeadlineError
    from narbench.train.checkpoint import CheckpointError

    return (registry.UnknownNameError, registry.RegistryError, ConfigError, PreflightError, CheckpointError,
            CorruptFileError, FileNotFoundError, GateError, RejectedResultsError, InvalidResultError, HeadlineError,
            NothingToShowError, GridError, EmbeddingError, WriteError, ExplorerError, RefusedFileError)


def error(message: str) -> None:
    """`error: <message>` in red on stderr, in one line however long."""
    from rich.markup import escape

    from narbench.cli.args import console

    console(stderr=True).print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)


def one_line(command: str, exc: BaseException) -> int:
    """`narbench <command>: error: <exc>` on stderr with its whitespace folded to one line; returns 2."""
    import sys

    sys.stderr.write(f"narbench {command}: error: {' '.join(str(exc).split())}\n")
    return 2
