"""What the `narbench` command sets up in its own process: where libraries write, and SIGTERM.

A narbench command writes only into its output folder, the narbench cache and a temporary
folder of its own that is removed at exit. Three libraries would otherwise write elsewhere:

- PyG writes a generated `<class>_propagate_*.py` module per message-passing class into the
  system temp dir and never removes it: `tempfile.tempdir` (and `TMPDIR`, for child processes)
  point into the command's temporary folder.
- ranx imports `ir_datasets`, which creates ~18 folders under `~/.ir_datasets`: `IR_DATASETS_HOME`
  points into the temporary folder (narbench never downloads an ir_datasets corpus).
- matplotlib keeps its font cache in `~/.config/matplotlib`: `MPLCONFIGDIR` points to
  `<narbench cache>/matplotlib`, so the cache is built once per machine as before.

A variable the user set (to something not empty) is left alone. `scope()` wraps one command in `narbench.cli.main` and
restores everything when it ends; nothing is set on `import narbench`: a program that uses the
Python API keeps its own environment.

SIGTERM (a job scheduler, `timeout`, `kill`) is turned into the same path as Ctrl-C: the run
writes nothing, progress bars are closed (the terminal gets its cursor back) and the command
exits with 143.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: exit status of a command ended by SIGTERM (128 + 15, as a shell reports it)
TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM received: unwinds like Ctrl-C (context managers close, nothing half-written stays)."""


@contextlib.contextmanager
def scope() -> Iterator[Path]:
    """For the length of one command: the writes of PyG, ir_datasets and matplotlib pointed away
    from $HOME and the shared temp dir, SIGTERM handled; everything restored (and the temporary
    folder removed) when it ends. Yields the command's temporary folder."""
    from narbench.core.cache import cache_dir

    pid = os.getpid()
    tmp = Path(tempfile.mkdtemp(prefix="narbench-"))
    saved_env = {k: os.environ.get(k) for k in _ENV}
    saved_tempdir = tempfile.tempdir
    saved_handler = _handle_sigterm(pid)
    try:
        tempfile.tempdir = str(tmp)
        os.environ["TMPDIR"] = str(tmp)  # child processes (zoo workers) write there too
        # set but empty counts as unset (an empty MPLCONFIGDIR would otherwise be ignored or the current folder)
        for key, value in (("IR_DATASETS_HOME", tmp / "ir_datasets"), ("MPLCONFIGDIR", cache_dir() / "matplotlib")):
            if not os.environ.get(key):
                os.environ[key] = str(value)
        yield tmp
    finally:
        if os.getpid() == pid:  # not in a forked child unwinding through Python
            tempfile.tempdir = saved_tempdir
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            if saved_handler is not None:
                signal.signal(signal.SIGTERM, saved_handler)
            shutil.rmtree(tmp, ignore_errors=True)


_ENV = ("TMPDIR", "IR_DATASETS_HOME", "MPLCONFIGDIR")


def _handle_sigterm(pid: int):
    """Install the SIGTERM handler; returns the one it replaced (None: not the main thread)."""

    def on_sigterm(signum, frame) -> None:
        if os.getpid() != pid:  # a forked worker: die as it would have without this handler
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    try:
        return signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread (main() called from a thread): leave it alone
        return None


def show_cursor() -> None:
    """Give the terminal its cursor back (rich hides it while a progress bar is live)."""
    import sys

    for stream in (sys.stderr, sys.stdout):
        try:
            if stream.isatty():
                stream.write("\x1b[?25h")
                stream.flush()
        except (OSError, ValueError):
            pass
