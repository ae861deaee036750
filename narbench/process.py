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

The temporary folder is named `narbench-<pid>-<host tag>-<random>`: a command killed with
SIGKILL cannot remove its own, so every command first removes the folders of that pattern, in the
system temp dir, whose process is gone from this host (`remove_stale`).

A variable the user set (to something not empty) is left alone. `scope()` wraps one command in `narbench.cli.main` and
restores everything when it ends; nothing is set on `import narbench`: a program that uses the
Python API keeps its own environment.

SIGTERM (a job scheduler, `timeout`, `kill`) is turned into the same path as Ctrl-C: the run
writes nothing, progress bars are closed (the terminal gets its cursor back) and the command
exits with 143.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from narbench.core.host import pid_alive

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
    remove_stale()
    tmp = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{pid}-{host_tag()}-"))
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
_PREFIX = "narbench-"
#: a command's temporary folder: narbench-<pid>-<host tag>-<mkdtemp's random part>
_OWNED = re.compile(rf"^{_PREFIX}(\d+)-([0-9a-f]{{8}})-[A-Za-z0-9_]+$")


def host_tag() -> str:
    """8 hex digits naming this host (a temp dir shared by hosts keeps each host's folders apart)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def remove_stale(root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the temporary folders of narbench commands of this host that are gone (killed with SIGKILL,
    say) from `root` (default: the system temp dir); returns them. Other names are never touched."""
    root = Path(root if root is not None else tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    tag = host_tag()
    for entry in entries:
        match = _OWNED.match(entry.name)
        if not match or match.group(2) != tag or pid_alive(int(match.group(1))):
            continue
        if entry.is_dir(follow_symlinks=False) and _mine(entry):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def _mine(entry: os.DirEntry) -> bool:
    """Whether this user owns the folder (another user's is theirs to remove)."""
    try:
        return not hasattr(os, "getuid") or entry.stat(follow_symlinks=False).st_uid == os.getuid()
    except OSError:
        return False


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
