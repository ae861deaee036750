"""A function run in a forked child process under limits: a memory cap, a time limit, a process group.

`run_forked(work, timeout=, max_memory=)` forks. The child starts a session of its own (so it leads
a process group of its own: whatever it starts is in that group unless it leaves it), caps its
address space (`set_memory_limit`) and calls `work(send)`; `send(kind, data)` passes a message
back through a pipe. It ends with `os._exit`: no atexit handler of the parent runs in it. The
parent reads the messages until the child is gone or the time limit has passed, then ends the
whole group: at the time limit (or on Ctrl-C or SIGTERM in the parent) SIGTERM, up to `GRACE` s for
the child to go, then SIGKILL; after an answer at once with SIGKILL, so that no process the
function started outlives it.

Why fork, and a cap relative to the child's size (measured): a forked child inherits the parent's
address space, torch's included; a `narbench search` process that has imported torch and its meta
kernels and read the index maps 1,012 MiB (~0.4 GB resident), an explorer that loaded a corpus more.
An absolute RLIMIT_AS of 1 GiB would leave a model 12 MiB there and nothing in the explorer; so the
cap is the child's size at the fork plus `max_memory`, as the zoo's extraction workers set it, and
means the same for every caller. A fresh interpreter (spawn) would start small but import torch
and torch._dynamo again, 3-6 s per child on the project's 2-core CPU, where a fork of that process
and its exit take 40-60 ms (a whole search in a child: ~65 ms more than in the parent). Nothing the
parent holds needs pickling either (a model instance, the caller's example inputs): the child has
it. What a fork does not copy is the parent's threads: a child must not wait on a thread pool the
parent had started (`narbench.search_engine._target_child` sets torch to one thread).
"""

from __future__ import annotations

import os
import re
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

#: seconds between SIGTERM and SIGKILL when the time limit ends a child's process group
GRACE = 1.0
#: most bytes a child may send back (its messages past that are dropped and `Outcome.overflow` set)
MAX_REPLY = 256 << 20
#: exit status of a child whose `work` raised (its traceback is sent as an `exception` message)
CRASHED = 70

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)

Send = Callable[[str, bytes], None]


@dataclass
class Outcome:
    """What a child sent (`messages`, (kind, data) in order) and how it ended: `status` is its exit
    status, or minus the signal that ended it; `timed_out`: the time limit ended it."""

    messages: list[tuple[str, bytes]] = field(default_factory=list)
    status: int | None = None
    timed_out: bool = False
    overflow: bool = False
    seconds: float = 0.0

    def last(self, kind: str) -> bytes | None:
        """The data of the last message of `kind`, None if there is none."""
        return next((data for k, data in reversed(self.messages) if k == kind), None)


def parse_size(text: str) -> int:
    """Bytes of a size like `4G`, `512M`, `1.5GiB`, `4096` (binary units); ValueError for anything else."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def format_size(n: int) -> str:
    """`4 GiB`, `512 MiB`, `1.5 GiB`: bytes in the largest binary unit that keeps a number >= 1."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def vm_size() -> int:
    """This process's address space in bytes (VmSize; 0 where /proc cannot tell)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def set_memory_limit(limit_bytes: int | None) -> None:
    """No core files, and (with a limit) an address-space limit (RLIMIT_AS) of this process's current
    size plus `limit_bytes`, never above the hard limit: what it already maps (torch, the index) is
    not counted against the limit, what it allocates from now on is."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not limit_bytes:
        return
    soft = vm_size() + limit_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_forked(work: Callable[[Send], None], *, timeout: float | None = None, max_memory: int | None = None,
               grace: float = GRACE) -> Outcome:
    """Run `work(send)` in a forked child under the limits (module docstring); what it sent and how it ended.

    `timeout`: seconds from the fork (None or 0: no limit); `max_memory`: bytes the child may add to
    its address space (None or 0: no cap)."""
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice by the child
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    read_end, write_end = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which never returns from here
        _child(work, read_end, write_end, max_memory)
    os.close(write_end)
    out = Outcome()
    try:
        _collect(out, read_end, pid, timeout)
    except BaseException:  # the parent interrupted while it waits (Ctrl-C, SIGTERM): the group goes too
        _end_group(pid, grace)
        raise
    finally:
        os.close(read_end)
    out.status = _end_group(pid, grace if out.timed_out else 0.0)
    out.seconds = time.monotonic() - t0
    return out


def _child(work: Callable[[Send], None], read_end: int, write_end: int, max_memory: int | None) -> None:
    code = 0
    try:
        os.close(read_end)
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler: SIGTERM ends the child

        def send(kind: str, data: bytes) -> None:
            frame = b"%s %d\n" % (kind.encode(), len(data)) + data
            view = memoryview(frame)
            while view:
                view = view[os.write(write_end, view):]

        set_memory_limit(max_memory)
        try:
            work(send)
        except BaseException:  # noqa: BLE001 - a bug in `work`: its traceback goes to the parent
            code = CRASHED
            send("exception", traceback.format_exc().encode(errors="replace"))
    except BaseException:  # noqa: BLE001 - nothing may return into the parent's code from here
        code = CRASHED
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _collect(out: Outcome, fd: int, pid: int, timeout: float | None) -> None:
    """Read `pid`'s messages from `fd` until the pipe closes, the child exits or the time limit passes."""
    try:
        pidfd = os.pidfd_open(pid)  # readable once the child has exited (Linux 5.3+)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + timeout if timeout else None
    buf = bytearray()
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                out.timed_out = True
                break
            step = left if pidfd is not None else min(left if left is not None else 0.05, 0.05)
            ready = select.select([fd] + ([pidfd] if pidfd is not None else []), [], [], step)[0]
            if fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # every writer closed the pipe
                    break
                buf += chunk
                if len(buf) > MAX_REPLY:
                    out.overflow = True
                    break
            elif pidfd in ready or (pidfd is None and _exited(pid)):
                buf += _drain(fd, MAX_REPLY - len(buf))  # its last messages (a process it started may hold the pipe)
                break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    out.messages = _frames(bytes(buf))


def _exited(pid: int) -> bool:
    """Whether the child has exited, leaving it unreaped (its pid, and so its group's id, stays taken)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _drain(fd: int, most: int) -> bytes:
    os.set_blocking(fd, False)
    got = bytearray()
    while len(got) <= most:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _frames(buf: bytes) -> list[tuple[str, bytes]]:
    """The whole messages in `buf` (`KIND LENGTH\\n` then LENGTH bytes); a cut last one is dropped."""
    messages, at = [], 0
    while True:
        end = buf.find(b"\n", at)
        if end < 0:
            return messages
        try:
            kind, length = buf[at:end].decode().split(" ")
            size = int(length)
        except ValueError:
            return messages
        if end + 1 + size > len(buf):
            return messages
        messages.append((kind, buf[end + 1:end + 1 + size]))
        at = end + 1 + size


def _end_group(pid: int, grace: float) -> int:
    """End `pid`'s process group (SIGTERM, `grace` s, SIGKILL; at once with SIGKILL without grace) and
    reap `pid`; its exit status, or minus the signal that ended it."""
    if grace > 0:
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not _exited(pid):
            time.sleep(0.02)
    _signal(pid, signal.SIGKILL)  # the whole group, before `pid` is reaped: its group id cannot be reused yet
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _signal(pid: int, sig: int) -> None:
    for kill in (os.killpg, os.kill):  # the group; the child itself, if it had not made its group yet
        try:
            kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
