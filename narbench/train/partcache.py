"""Split many graphs once: in parallel processes, persisted in an on-disk cache.

`split_graphs(splitter, graphs, jobs=..., cache=...)` returns one `GraphParts` per graph (the
partition as flat arrays plus every part's subgraph key, `narbench.train.parts`). Graphs found in the
cache are read back; the others are split (`jobs` processes, fork start method where there is
one; `jobs=1` in this process) and written to the cache.

**The cache** is one SQLite file, `<narbench cache>/parts/parts.sqlite` (`narbench.core.cache.
cache_dir()`), with one row per (splitter id, graph content hash). The splitter id is a sha256
of the splitter's name, its parameters and its code version (`Splitter.code_version()`: the
source of the splitter's class and base classes), plus the source of `narbench.train.parts` (and its
kernels), `narbench.data.graph` (topological order), `narbench.train._partcodec` (row format) and this
module: changing any of them gives new rows and never reads stale ones. A row holds the
zstd-compressed parts (offsets, node ids delta-coded within each part, macro edges, as int32;
keys) and the blake2b checksum of the uncompressed payload (`encode_parts`, `decode_parts`).

A row that fails its checksum or does not decode is reported (one warning per call naming the
file and the count) and recomputed; a file that is not a database or is malformed is moved
aside (`parts.sqlite.corrupt-<time>-<pid>`), reported and recreated; a cache that cannot be used
otherwise (read-only, locked for minutes) is reported and the graphs are split without it. Two
runs may use the cache at once: SQLite locks the file, rows are written by the main process
only, in one transaction per batch of 2,000 graphs, and concurrent writers of a row write the
same content.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import multiprocessing
from typing import Any
import os
import sqlite3
import struct
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from narbench.train._partcodec import FORMAT, decode_parts, encode_parts
from narbench.data.graph import ArchGraph
from narbench.train.parts import GraphParts
from narbench.train.splitter import Splitter


# -- identity ----------------------------------------------------------------------------------
def _source_digest(objects) -> str:
    h = hashlib.sha256()
    for obj in objects:
        try:
            h.update(inspect.getsource(obj).encode())
        except (OSError, TypeError):  # no source available: fall back to the qualified name
            h.update(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', obj)}".encode())
    return h.hexdigest()


def splitter_id(splitter: Splitter) -> str:
    """Cache identity of a splitter: name, parameters, code version, parts format."""
    import narbench.train._partcodec
    import narbench.train._parts_kernels
    import narbench.data.graph
    import narbench.train.parts

    ident = {
        "name": splitter.name,
        "class": f"{type(splitter).__module__}.{type(splitter).__qualname__}",
        "params": splitter.params(),
        "code": splitter.code_version(),
        "parts": _source_digest([narbench.train.parts, narbench.train._parts_kernels, narbench.data.graph, narbench.train._partcodec,
                                 sys.modules[__name__]]),
        "format": FORMAT,
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:32]


# -- the cache file ----------------------------------------------------------------------------
def default_path() -> Path:
    from narbench.core.cache import cache_dir

    return cache_dir() / "parts" / "parts.sqlite"


class PartsCache:
    """The SQLite file of computed parts (see the module docstring)."""

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS parts (splitter TEXT NOT NULL, graph TEXT NOT NULL, "
        "blob BLOB NOT NULL, checksum BLOB NOT NULL, PRIMARY KEY (splitter, graph)) WITHOUT ROWID"
    )

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"PartsCache({str(self.path)!r})"

    # connection, with recovery from a file that is not a database
    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a read-only cache: an sqlite3.Error, reported and skipped by the callers
                raise sqlite3.OperationalError(f"cannot create {self.path.parent}: {exc.strerror or exc}") from exc
            try:
                self._conn = self._open()
            except sqlite3.DatabaseError as exc:
                if not _corrupt(exc):
                    raise
                self._set_aside(exc)
                self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=120.0, isolation_level=None)
        try:
            conn.execute(self._SCHEMA)
            conn.execute("SELECT count(*) FROM parts WHERE splitter = ''").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _set_aside(self, exc: Exception) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        for suffix in ("", "-journal", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.exists():
                os.replace(src, f"{aside}{suffix}")
        warnings.warn(f"parts cache {self.path} is not a readable database ({exc}); moved it to {aside.name} "
                      "and started an empty one", RuntimeWarning, stacklevel=4)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get_many(self, splitter: str, hashes: Sequence[str], decode: Callable = decode_parts) -> tuple[dict, int]:
        """(parts found, number of damaged rows) for the graph content hashes `hashes` (each row read
        by `decode(blob, checksum)`, which raises ValueError on a damaged one)."""
        try:
            return self._get_many(splitter, hashes, decode)
        except sqlite3.DatabaseError as exc:
            if not _corrupt(exc):  # locked for too long, read-only, ...: the caller decides
                raise
            self._set_aside(exc)  # damaged beyond single rows
            return {}, 0

    def _get_many(self, splitter: str, hashes: Sequence[str], decode: Callable) -> tuple[dict, int]:
        conn = self._connect()
        found: dict = {}
        damaged = 0
        wanted = list(dict.fromkeys(hashes))
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT graph, blob, checksum FROM parts WHERE splitter = ? AND graph IN ({marks})", [splitter, *chunk]
            ).fetchall()
            for graph, blob, checksum in rows:
                try:
                    found[graph] = decode(bytes(blob), bytes(checksum))
                except (ValueError, struct.error, TypeError):
                    damaged += 1
        return found, damaged

    def put_many(self, splitter: str, rows: Sequence[tuple[str, bytes, bytes]]) -> None:
        """Write (graph hash, blob, checksum) rows in one transaction (replacing damaged ones)."""
        if not rows:
            return
        try:
            self._put_many(splitter, rows)
        except sqlite3.DatabaseError as exc:
            if not _corrupt(exc):
                raise
            self._set_aside(exc)
            self._put_many(splitter, rows)

    def _put_many(self, splitter: str, rows) -> None:
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?)",
                             [(splitter, g, blob, checksum) for g, blob, checksum in rows])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """A damaged file (not a database, malformed), as opposed to a busy or read-only one."""
    name = getattr(exc, "sqlite_errorname", None)
    if name is not None:
        return name in ("SQLITE_CORRUPT", "SQLITE_NOTADB")
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


# -- computing ---------------------------------------------------------------------------------
def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def compute_parts(splitter: Splitter, graph: ArchGraph) -> GraphParts:
    """Split one graph and key its parts (what a worker does per graph).

    Splitters with a `split_flat(graph) -> (offsets, nodes, macro edges)` method (the segment
    splitters) skip building a `Partition` of per-part arrays."""
    if _uses_split_flat(type(splitter)):
        return GraphParts.from_flat(graph, *splitter.split_flat(graph))
    return GraphParts.of(graph, splitter.split(graph))


def _uses_split_flat(cls: type) -> bool:
    """True when the most derived class defining `split` or `split_flat` defines `split_flat`
    (a subclass overriding `split` alone gets its own `split`)."""
    for klass in cls.__mro__:
        if "split_flat" in vars(klass):
            return True
        if "split" in vars(klass):
            return False
    return False


_WORK: tuple[Splitter, Sequence[ArchGraph]] | None = None  # set before forking workers


def _work_chunk(task) -> list[tuple[GraphParts, bytes | None, bytes | None]]:
    """Per graph `lo..hi-1` of the work list: (parts, encoded row or None, checksum or None)."""
    lo, hi, encode, payload = task
    if payload is None:  # forked worker or this process: the work list is inherited
        assert _WORK is not None
        splitter, graphs = _WORK[0], _WORK[1][lo:hi]
    else:
        splitter, graphs = payload
    out = []
    for g in graphs:
        parts = compute_parts(splitter, g)
        out.append((parts, *encode_parts(parts)) if encode else (parts, None, None))
    return out


def _worker_signals() -> None:
    """A pool worker dies at once on SIGTERM (`pool.terminate()`), whatever handler the parent had.

    The CLI turns SIGTERM into an exception in its own process (`narbench.process`); a forked
    worker inherits that handler, and a worker blocked on the pool's task-queue lock when
    `terminate()` came was seen to survive it, leaving `pool.join()` waiting forever (the gate in
    CI, cold parts cache). The worker starts with SIGTERM blocked (`worker_pool`), so one sent
    before this runs waits, and is delivered, by default, when it is unblocked here."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def worker_pool(ctx: Any, jobs: int) -> Any:
    """`ctx.Pool(jobs)` whose workers die on SIGTERM however early it comes (`_worker_signals`).

    Workers are started with SIGTERM blocked: a pool terminated right after it was made (its work
    done by the first worker up) sent SIGTERM to a worker still starting, which ran the parent's
    handler, ignored it, went on to wait for tasks and left `terminate()` joining it forever
    (seen in a fresh-clone CI run under load: `tests/test_pool.py`, a handler that ignores SIGTERM).
    The parent's own mask is put back at once."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        return ctx.Pool(jobs, initializer=_worker_signals)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        return ctx.Pool(jobs, initializer=_worker_signals)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def split_graphs(
    splitter: Splitter,
    graphs: Sequence[ArchGraph],
    *,
    jobs: int | None = None,
    cache: PartsCache | None = None,
    hashes: Sequence[str] | None = None,
    progress: Callable | None = None,
    desc: str = "split graphs",
) -> list[GraphParts]:
    """One `GraphParts` per graph: from `cache` when there, else computed (and cached).

    `jobs`: processes for the graphs not in the cache (None: all cores; 1: this process; a
    handful of graphs is always done here). `progress`: a context-manager factory yielding a
    rich `Progress` (e.g. `Trainer.progress`). Each distinct graph (by content hash) is split at
    most once per call; the result does not depend on `jobs`.
    """
    global _WORK
    hashes = list(hashes) if hashes is not None else [g.content_hash() for g in graphs]
    sid = splitter_id(splitter) if cache is not None else ""
    found: dict[str, GraphParts] = {}
    if cache is not None:
        try:
            found, damaged = cache.get_many(sid, hashes)
        except sqlite3.Error as exc:
            warnings.warn(f"parts cache {cache.path} unusable ({exc}); splitting without it", RuntimeWarning,
                          stacklevel=2)
            cache, found, damaged = None, {}, 0
        if damaged:
            warnings.warn(f"parts cache {cache.path}: {damaged} damaged entr{'y' if damaged == 1 else 'ies'} "
                          "(checksum or format); recomputing them", RuntimeWarning, stacklevel=2)
    todo: dict[str, int] = {}
    for i, h in enumerate(hashes):
        if h not in found and h not in todo:
            todo[h] = i
    if not todo:
        return [found[h] for h in hashes]
    order = list(todo.values())
    work = [graphs[i] for i in order]
    jobs = max(1, int(jobs if jobs is not None else available_cores()))
    jobs = min(jobs, max(1, len(work) // 16))  # a pool is not worth it for a handful of graphs
    chunk = max(1, min(32, len(work) // (jobs * 16)))
    spans = [(lo, min(lo + chunk, len(work))) for lo in range(0, len(work), chunk)]
    encode = cache is not None
    ctx = None
    if jobs > 1:
        ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    inherit = ctx is None or ctx.get_start_method() == "fork"
    tasks = [(lo, hi, encode, None if inherit else (splitter, work[lo:hi])) for lo, hi in spans]
    pool = None
    _WORK = (splitter, work) if inherit else None
    try:
        if ctx is not None:
            # the first chunk here: whatever the splitter compiles or loads on first use (numba
            # kernels) is then inherited by the forked workers instead of done once in each
            head = [_work_chunk(tasks[0])]
            pool = worker_pool(ctx, jobs)
            results = itertools.chain(head, pool.imap(_work_chunk, tasks[1:]))
        else:
            results = map(_work_chunk, tasks)
        with (progress() if progress is not None else _NoProgress()) as prog:
            bar = None
            if prog is not None:
                bar = prog.add_task(desc, total=len(work), info=f"{len(hashes) - len(work)} cached, jobs {jobs}")
            pending: list[tuple[str, bytes, bytes]] = []
            for (lo, hi, _, _), computed in zip(tasks, results):
                for j, (parts, blob, checksum) in zip(range(lo, hi), computed):
                    h = hashes[order[j]]
                    found[h] = parts
                    if encode:
                        pending.append((h, blob, checksum))
                if len(pending) >= 2000:
                    cache = _put(cache, sid, pending)
                    pending = []
                if bar is not None:
                    prog.update(bar, advance=hi - lo)
            if pending:
                _put(cache, sid, pending)
    finally:
        _WORK = None
        if pool is not None:
            pool.terminate()
            pool.join()
    return [found[h] for h in hashes]


def _put(cache: PartsCache | None, sid: str, rows) -> PartsCache | None:
    """Write rows; on an error other than a damaged file, warn and stop writing (None)."""
    if cache is None or not rows:
        return cache
    try:
        cache.put_many(sid, rows)
        return cache
    except sqlite3.Error as exc:
        warnings.warn(f"parts cache {cache.path}: cannot write ({exc}); results are not cached", RuntimeWarning,
                      stacklevel=3)
        return None


class _NoProgress:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> None:
        return None
