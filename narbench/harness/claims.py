"""Claims: sweeps started together on one output folder share its runs instead of each running
all of them. A task with a claim file (`narbench.harness.launchers.Task.claim`) is run only by the
process that creates that file (`Claim`, made with O_CREAT|O_EXCL when the run starts, wherever it
executes); another finds it held and reports the run as running elsewhere, or finds the result it
left (`<claim>.done`) and reports it done.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from narbench.core import safeio
from narbench.core.host import pid_alive
from narbench.data.store import atomic_write_bytes

#: a claim of another host not touched for this long is stale (its holder touches it every CLAIM_HEARTBEAT_S)
CLAIM_STALE_S = 600.0
CLAIM_HEARTBEAT_S = 60.0
#: a claim file not (yet) holding its JSON counts as live this long (its maker writes it at once)
_UNWRITTEN_S = 60.0
DONE_SUFFIX = ".done"


class Claim:
    """This process's claim on one run: the file `path` (JSON: pids, host, time, a token), made with
    O_CREAT|O_EXCL so that one process of all the sweeps on a folder holds it, removed when the run ends.

    A claim is stale, and taken over, when none of its processes is alive on this host, or (another
    host's, whose processes cannot be seen from here) when it was not touched for CLAIM_STALE_S.
    """

    def __init__(self, path: Path, record: dict[str, Any]) -> None:
        self.path, self.record, self.released = path, record, False

    @classmethod
    def take(cls, path: Path) -> "Claim | str":
        """The claim, taken (over, when stale); or who holds it (`holder`), when a live process does."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with _claims_locked(path.parent):
            for _ in range(3):
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                except FileExistsError:
                    record = _read_claim(path)
                    if not _stale(path, record):
                        return holder(record or {})
                    path.unlink(missing_ok=True)
                    continue
                record = {"pids": [os.getpid()], "host": socket.gethostname(), "since": time.time(),
                          "token": secrets.token_hex(8)}
                with os.fdopen(fd, "w") as fh:
                    json.dump(record, fh)
                return cls(path, record)
        return holder(_read_claim(path) or {})

    def add_pid(self, pid: int) -> None:
        """Count `pid` (the run's child process) among the claim's: it is live while either lives."""
        self.record = {**self.record, "pids": [*self.record["pids"], pid]}
        if self._mine():
            with contextlib.suppress(OSError):
                atomic_write_bytes(self.path, json.dumps(self.record).encode())

    def touch(self) -> None:
        """Show the claim's holder alive to other hosts."""
        with contextlib.suppress(OSError):
            os.utime(self.path)

    def done_result(self) -> str | None:
        """The result file another sweep left for this run since this one's plan (`release`), if it still exists."""
        try:
            result = json.loads(safeio.read_file(f"{self.path}{DONE_SUFFIX}", "launcher job"))["result"]
        except (OSError, ValueError, KeyError, TypeError):  # RefusedFileError (too large) is a ValueError
            return None
        return result if isinstance(result, str) and Path(result).is_file() else None

    def release(self, result: str | None = None) -> None:
        """Remove the claim (once); with the run's `result`, first leave it for the sweeps after (`done_result`)."""
        if self.released:
            return
        self.released = True
        if result is not None:
            with contextlib.suppress(OSError):
                atomic_write_bytes(Path(f"{self.path}{DONE_SUFFIX}"), json.dumps({"result": os.path.abspath(result)}).encode())
        with _claims_locked(self.path.parent):
            if self._mine():
                self.path.unlink(missing_ok=True)

    def _mine(self) -> bool:
        record = _read_claim(self.path)
        return record is not None and record.get("token") == self.record["token"]


def holder(record: dict[str, Any]) -> str:
    """Who holds a claim, for a person: `pid 4242 on host-a since 10:02:03`."""
    pids = ", ".join(str(p) for p in record.get("pids", [])) or "?"
    since = time.strftime("%H:%M:%S", time.localtime(record["since"])) if "since" in record else "?"
    return f"pid {pids} on {record.get('host', '?')} since {since}"


def claim_holder(path: Path) -> str | None:
    """Who holds the live claim `path`, or None (no claim, or a stale one)."""
    if not path.exists():
        return None
    record = _read_claim(path)
    return None if _stale(path, record) else holder(record or {})


def _read_claim(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(safeio.read_file(path, "launcher job"))
    except (OSError, ValueError):  # unreadable, not JSON, or over the cap (RefusedFileError)
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pids"), list) else None


def _stale(path: Path, record: dict[str, Any] | None) -> bool:
    """Whether a claim's holder is gone (see `Claim`); an unreadable claim is stale once it is old."""
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        return True
    if record is None:
        return age > _UNWRITTEN_S
    if record.get("host") == socket.gethostname():
        return not any(isinstance(p, int) and pid_alive(p) for p in record["pids"])
    return age > CLAIM_STALE_S


@contextlib.contextmanager
def _claims_locked(folder: Path) -> Iterator[None]:
    """One process at a time examines and takes the claims of `folder` (flock on `.lock`, released if it
    dies); where there is no flock (Windows, a file system without locks) O_EXCL alone guards them."""
    try:
        import fcntl
    except ImportError:
        fcntl = None
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o666) if fcntl else None
    try:
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)
