"""The narbench cache: one folder for everything narbench generates (datasets, parts, indexes,
numba's and matplotlib's caches); and the one-line errors of a file that cannot be written.

A write that fails for lack of space (ENOSPC, or EDQUOT: a quota) raises `DiskFullError`, naming
the file; a leaderboard file that cannot be written for any reason raises `WriteError`. The command
line prints either as one line and exits 2; whoever raises them has removed what it half wrote.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

#: the errnos of a write refused for lack of space, and how the error line says them
NO_SPACE = {errno.ENOSPC: "no space left on device",
            **({errno.EDQUOT: "disk quota exceeded"} if hasattr(errno, "EDQUOT") else {})}


def cache_dir() -> Path:
    """Where generated datasets are cached: `$NARBENCH_CACHE` or `~/.cache/narbench`.

    An empty NARBENCH_CACHE counts as unset (it would otherwise be the current folder).
    """
    return Path(os.environ.get("NARBENCH_CACHE") or Path.home() / ".cache" / "narbench")


class WriteError(OSError):
    """A file could not be written; `str()` is one line: the file, the reason, the errno name."""

    def __init__(self, path: str | os.PathLike, cause: OSError, note: str = "nothing was written") -> None:
        reason = NO_SPACE.get(cause.errno) or (cause.strerror or str(cause)).lower()
        super().__init__(cause.errno, reason, str(path))
        self.note = note

    def __str__(self) -> str:
        name = errno.errorcode.get(self.errno or 0, f"errno {self.errno}")
        return f"cannot write {self.filename}: {self.strerror} ({name}); {self.note}"


class DiskFullError(WriteError):
    """A write refused for lack of space (ENOSPC, EDQUOT)."""


def no_space(exc: BaseException) -> bool:
    """Whether `exc` is a write refused for lack of space."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Within it, a lack of space raises `DiskFullError` naming `path`; other errors pass unchanged."""
    try:
        yield
    except DiskFullError:
        raise
    except OSError as exc:
        if not no_space(exc):
            raise
        raise DiskFullError(path, exc) from exc
