"""Extraction workers: subprocesses that extract model specs one at a time, and the pool that drives them.

Each worker is a plain subprocess (`python -m narbench.zoo.worker --worker ...`, never
multiprocessing, so the caller's `__main__` is not re-imported) with an address-space limit,
connected through a socket pair. The pool (`run_workers`) hands out specs, kills a worker that
exceeds the per-model time limit or dies, records every outcome (`narbench.zoo.results`) and
replaces the worker.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narbench.core.child import set_memory_limit as _set_memory_limit  # RLIMIT_AS beyond its imports
from narbench.zoo.results import FAILED, NOT_APPLICABLE, OK, read_result, write_result
from narbench.zoo.spec import SOURCES, Spec


def _classify(exc: BaseException) -> str:
    msg = str(exc).lower()
    if isinstance(exc, MemoryError) or any(s in msg for s in ("can't allocate memory", "out of memory",
                                                               "bad_alloc", "cannot allocate memory")):
        return "oom"
    return "exception"


def _spawn_worker(log_path: str, mem_limit_bytes: int | None, preload: list[str]):
    """Start `python -m narbench.zoo.worker --worker` connected through a socket pair.

    A plain subprocess (not multiprocessing) so that the caller's `__main__` is never re-imported.
    """
    import socket
    import sys
    from multiprocessing.connection import Connection

    parent_sock, child_sock = socket.socketpair()
    env = dict(os.environ)
    env["NARBENCH_WORKER_SYS_PATH"] = json.dumps([p for p in sys.path if p])  # appended, never shadowing
    args = [sys.executable, "-m", "narbench.zoo.worker", "--worker", str(child_sock.fileno()), log_path,
            str(mem_limit_bytes or 0), ",".join(preload)]
    log = open(log_path, "ab")
    try:
        proc = subprocess.Popen(args, pass_fds=(child_sock.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, close_fds=True)
    finally:
        log.close()
        child_sock.close()
    return proc, Connection(parent_sock.detach())


def _worker_main(conn, log_path: str, mem_limit_bytes: int | None, preload: list[str]) -> None:
    """Extract specs sent over `conn` one at a time; reply with a result dict for each."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import importlib

    import torch

    torch.set_num_threads(1)
    for mod in preload:
        try:
            importlib.import_module(mod)
        except Exception as exc:  # noqa: BLE001 - reported per spec later
            print(f"preload {mod} failed: {exc!r}", flush=True)
    from narbench.zoo.spec import NotApplicable
    from narbench.zoo.specgraph import extract_spec

    _set_memory_limit(mem_limit_bytes)
    conn.send({"ready": True})
    done = 0
    while True:
        msg = conn.recv()
        if msg is None:
            break
        spec = Spec.from_json(msg)
        print(f"--- {spec.key}", flush=True)
        t0 = time.perf_counter()
        try:
            graph, info = extract_spec(spec)
            res = {"status": OK, "graph": graph.to_json(), "info": info}
        except NotApplicable as exc:
            res = {"status": NOT_APPLICABLE, "reason": NOT_APPLICABLE, "error": str(exc)[:300]}
        except BaseException as exc:  # noqa: BLE001 - every failure is a result
            errors = getattr(exc, "errors", None)  # AllDevicesFailed: one error per device tried
            if errors:
                reason = "oom" if any(_classify(e) == "oom" for _, e in errors) else "exception"
                res = {"status": FAILED, "reason": reason, "error": f"{type(errors[0][1]).__name__}: {str(exc)[:900]}"}
            else:
                res = {"status": FAILED, "reason": _classify(exc), "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        res["seconds"] = round(time.perf_counter() - t0, 4)
        done += 1
        if done % 50 == 0:  # a full collection costs ~0.2 s with the zoos loaded: not after every model
            gc.collect()
        conn.send(res)


@dataclass
class _Worker:
    slot: int
    proc: Any = None
    conn: Any = None
    ready: bool = False
    spec: Spec | None = None
    started: float = 0.0
    tasks: int = 0
    spawned_at: float = 0.0


def _preload_for(specs: Sequence[Spec]) -> list[str]:
    mods = {"timm": ["timm"], "torchvision": ["torchvision"], "transformers": ["transformers"]}
    seen = {s.source for s in specs}
    return [m for src in SOURCES if src in seen for m in mods[src]]


def _defaults(all_selected: Sequence[Spec]) -> dict[tuple[str, ...], Spec]:
    """The default (no-variant) spec of each model/head and of each model: when it fails with an exception
    (bad dummy inputs, missing dependency), its variants are recorded as failed without running them."""
    defaults: dict[tuple[str, ...], Spec] = {}
    for s in all_selected:
        if not s.variant:
            defaults.setdefault((s.source, s.model, s.task), s)
            defaults.setdefault((s.source, s.model), s)
    return defaults


@dataclass
class _Pool:
    """One run of `run_workers`: the workers, the specs still to hand out (last first) and the counts of what
    became of the others, shown on `progress`."""

    out: Path
    queue: list[Spec]
    workers: list[_Worker]
    defaults: dict[tuple[str, ...], Spec]
    preload: list[str]
    mem: int | None
    timeout: float
    startup_timeout: float
    max_tasks: int
    progress: Any = None
    task: Any = None
    counts: Counter = field(default_factory=Counter)

    def spawn(self, w: _Worker) -> None:
        w.proc, w.conn = _spawn_worker(str(self.out / "logs" / f"worker-{w.slot}.log"), self.mem, self.preload)
        w.ready, w.spec, w.tasks, w.spawned_at = False, None, 0, time.monotonic()

    def stop(self, w: _Worker, kill: bool = False) -> None:
        if w.proc is None:
            return
        if not kill:
            try:
                w.conn.send(None)
                w.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()
        w.conn.close()
        w.proc = None

    def record(self, spec: Spec, res: dict[str, Any]) -> None:
        """Write the spec's result and count it."""
        write_result(self.out, spec, res)
        self.counts[res["status"] if res["status"] != FAILED else res["reason"]] += 1
        self.progress.advance(self.task)

    def default_failure(self, spec: Spec) -> dict[str, Any] | None:
        """The result of a variant whose default spec failed with an exception (not run), else None."""
        if not spec.variant:
            return None
        base = self.defaults.get((spec.source, spec.model, spec.task)) or self.defaults.get((spec.source, spec.model))
        res = read_result(self.out, base) if base is not None else None
        if res is None or res.get("status") != FAILED or res.get("reason") != "exception":
            return None
        return {"status": FAILED, "reason": "default-failed", "seconds": 0.0,
                "error": f"not run: {base.key} failed ({res.get('error', '')[:200]})"}

    def dispatch(self) -> None:
        """Respawn stopped workers while specs remain and hand each ready idle worker its next spec."""
        for w in self.workers:
            if w.proc is None and self.queue:
                self.spawn(w)
            while w.ready and w.spec is None and self.queue:
                spec = self.queue.pop()
                skipped = self.default_failure(spec)
                if skipped is not None:
                    self.record(spec, skipped)
                    continue
                w.spec = spec
                w.started = time.monotonic()
                w.conn.send(w.spec.to_json())
                break

    def receive(self, now: float) -> None:
        """Take the messages of the workers that sent one within 0.25 s: ready, a result, or death."""
        from multiprocessing.connection import wait

        conns = {w.conn: w for w in self.workers if w.proc is not None}
        for conn in wait(list(conns), timeout=0.25):
            w = conns[conn]
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = None
            if msg is None:  # the worker died
                self._died(w, now)
                continue
            if msg.get("ready"):
                w.ready = True
                continue
            spec, w.spec = w.spec, None
            w.tasks += 1
            self.record(spec, msg)
            if w.tasks >= self.max_tasks:
                self.stop(w)

    def _died(self, w: _Worker, now: float) -> None:
        try:
            code = w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if w.spec is not None:
            reason = "oom" if code == -9 else "crash"
            self.record(w.spec, {"status": FAILED, "reason": reason, "seconds": round(now - w.started, 2),
                                 "error": f"worker exited with code {code}"})
        elif not w.ready:
            raise RuntimeError(f"extraction worker failed to start (exit code {code}); see {self.out / 'logs'}")
        self.stop(w, kill=True)

    def enforce_limits(self, now: float) -> None:
        """Kill a worker past the per-model time limit (its spec fails with `timeout`) or that did not start."""
        for w in self.workers:
            if w.proc is None:
                continue
            if w.spec is not None and now - w.started > self.timeout:
                self.stop(w, kill=True)
                spec, w.spec = w.spec, None
                self.record(spec, {"status": FAILED, "reason": "timeout", "seconds": round(now - w.started, 2),
                                   "error": f"no result within {self.timeout:g} s"})
            elif not w.ready and now - w.spawned_at > self.startup_timeout:
                self.stop(w, kill=True)
                raise RuntimeError(f"extraction worker did not start within {self.startup_timeout:g} s")

    def run(self) -> None:
        """Until every spec has a result; the workers are stopped however it ends."""
        for w in self.workers:
            self.spawn(w)
        try:
            while self.queue or any(w.spec is not None for w in self.workers):
                now = time.monotonic()
                self.dispatch()
                self.receive(now)
                self.enforce_limits(time.monotonic())
                self.progress.update(self.task, stats=" ".join(f"{k}={v}" for k, v in sorted(self.counts.items())))
        finally:
            for w in self.workers:
                self.stop(w, kill=w.spec is not None)


def run_workers(out: Path, todo: list[Spec], all_selected: Sequence[Spec], jobs: int, timeout: float,
                mem_limit_gb: float | None, max_tasks: int, console) -> None:
    """Extract `todo` in `jobs` worker subprocesses, recording every outcome under `out` (`narbench.zoo.results`):
    a worker past `timeout` s on a spec is killed, one that dies is replaced, and each is replaced after
    `max_tasks` specs; `mem_limit_gb` caps each worker's address space."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    pool = _Pool(out=out, queue=list(reversed(todo)),
                 workers=[_Worker(slot=i) for i in range(max(1, min(jobs, len(todo))))],
                 defaults=_defaults(all_selected), preload=_preload_for(todo),
                 mem=int(mem_limit_gb * 2**30) if mem_limit_gb else None, timeout=timeout,
                 startup_timeout=max(300.0, timeout), max_tasks=max_tasks)
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stats]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        pool.progress, pool.task = progress, progress.add_task("extracting", total=len(todo), stats="")
        pool.run()


if __name__ == "__main__":  # the worker entry point (see `_spawn_worker`)
    import sys
    from multiprocessing.connection import Connection

    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        sys.path += [p for p in json.loads(os.environ.get("NARBENCH_WORKER_SYS_PATH", "[]")) if p not in sys.path]
        _worker_main(Connection(int(sys.argv[2])), sys.argv[3], int(sys.argv[4]) or None,
                     [m for m in sys.argv[5].split(",") if m])
    else:
        sys.exit("usage: python -m narbench.zoo.worker --worker FD LOG MEM_BYTES PRELOAD")
