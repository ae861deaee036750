"""Scoped malloc tuning for training and embedding (glibc's `mallopt`, through ctypes).

A GNN batch allocates temporaries of 80-850 MB. glibc serves each with a fresh `mmap` and
gives it back with `munmap` when freed, so every batch the kernel hands out (and zeroes) the
same pages again: on one core that was half the wall time of a `real` epoch (issue 27).
`tuned()` turns that off for a block: no `mmap` for chunks (`M_MMAP_MAX` 0) and no trimming of
the heap top (`M_TRIM_THRESHOLD` high), so freed memory is reused by the next batch. On leaving
the block it sets the two values back to what they were and calls `malloc_trim(0)`, which hands
the retained free memory back to the kernel. The arithmetic is not touched: results are
bit-identical with and without.

Nothing changes unless asked: importing narbench leaves the allocator alone. The `narbench`
command turns it on around its subcommand (off with `--no-malloc-tuning` or
`NARBENCH_MALLOC_TUNING=0`); a program that uses narbench as a library asks with
`Trainer(malloc_tuning=True)` or `with narbench.train.allocator.tuned(): ...`.

Where there is no glibc `mallopt` (macOS, Windows, musl) `tuned()` does nothing and yields False.
glibc has no getter for these parameters: "what they were" is the process's start-up values
(glibc's defaults or the `MALLOC_*_` / `GLIBC_TUNABLES` environment) unless an enclosing
`tuned()` block set them. glibc also offers no way to switch its dynamic mmap threshold back on
once a parameter has been set: after the block the threshold stays at the value it had.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Iterator

# mallopt parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4

# glibc's compiled-in defaults (malloc/malloc.c: DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX)
GLIBC_DEFAULTS = {M_MMAP_MAX: 65536, M_TRIM_THRESHOLD: 128 * 1024}
# The tuned values: never mmap a chunk, never trim the heap top while tuned (INT_MAX bytes).
TUNED = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: 2**31 - 1}
# The same parameters as environment variables and glibc tunables (read at process start-up).
_ENV = {M_MMAP_MAX: "MALLOC_MMAP_MAX_", M_TRIM_THRESHOLD: "MALLOC_TRIM_THRESHOLD_"}
_TUNABLE = {M_MMAP_MAX: "glibc.malloc.mmap_max", M_TRIM_THRESHOLD: "glibc.malloc.trim_threshold"}

ENV_SWITCH = "NARBENCH_MALLOC_TUNING"

_lock = threading.Lock()
_depth = 0  # how many tuned() blocks are open (the outermost one sets and restores)
_libc_cache: list = []


def _load_libc():
    """The process's C library if it is glibc with `mallopt` and `malloc_trim`, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl and others lack it)
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return libc


def _libc():
    if not _libc_cache:
        _libc_cache.append(_load_libc())
    return _libc_cache[0]


def available() -> bool:
    """True where the tuning can be applied (glibc with `mallopt`)."""
    return _libc() is not None


def startup_values(environ: dict[str, str] | None = None) -> dict[int, int]:
    """The values glibc started the process with: its defaults, overridden by the environment
    (`GLIBC_TUNABLES` wins over `MALLOC_*_`, as in glibc)."""
    environ = os.environ if environ is None else environ
    values = dict(GLIBC_DEFAULTS)
    for param, name in _ENV.items():
        with contextlib.suppress(KeyError, ValueError):
            values[param] = int(environ[name], 0)
    tunables = dict(item.split("=", 1) for item in environ.get("GLIBC_TUNABLES", "").split(":") if "=" in item)
    for param, name in _TUNABLE.items():
        with contextlib.suppress(KeyError, ValueError):
            values[param] = int(tunables[name], 0)
    return values


def active() -> bool:
    """True inside a `tuned()` block that applied the tuning."""
    return _depth > 0


def enabled_by_environment(default: bool = True) -> bool:
    """`NARBENCH_MALLOC_TUNING` as a switch: 0/false/no/off turn it off, 1/true/yes/on on."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    return default


def _set(libc, values: dict[int, int]) -> bool:
    return all(libc.mallopt(param, value) == 1 for param, value in values.items())


@contextlib.contextmanager
def tuned(enable: bool = True) -> Iterator[bool]:
    """Within the block, freed memory stays in the process for reuse; yields whether applied.

    Nested blocks share the outermost one's setting; only the outermost restores. `enable=False`
    (or no glibc) makes it a plain block that yields False.
    """
    global _depth
    libc = _libc() if enable else None
    if libc is None:
        yield False
        return
    with _lock:
        if _depth == 0 and not _set(libc, TUNED):
            _set(libc, startup_values())
            libc = None
        else:
            _depth += 1
    if libc is None:
        yield False
        return
    try:
        yield True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _set(libc, startup_values())
                libc.malloc_trim(0)
