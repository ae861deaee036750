"""The local launcher: a sweep's runs on this machine, `jobs` at a time (a thread pool, each thread
waiting on one `narbench run` process with its own `OMP_NUM_THREADS`)."""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from narbench.harness.launchers import Handle, Outcome, Task, execute


@dataclass
class _FutureHandle:
    future: Future
    task: Task

    def done(self) -> bool:
        return self.future.done()

    def started(self) -> bool:
        return self.future.running() or self.future.done()

    def outcome(self) -> Outcome:
        try:
            return self.future.result()
        except BaseException as exc:  # noqa: BLE001 (cancelled, or the launcher itself failed)
            return Outcome(self.task.name, 1, None, 0.0, self.task.log, f"{type(exc).__name__}: {exc}")


class LocalLauncher:
    """`jobs` runs at a time on this machine, each a `narbench run` process with `threads` torch threads."""

    name = "local"

    def __init__(self, jobs: int = 1, threads: int | None = None) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.jobs, self.threads = jobs, threads
        self._pool = ThreadPoolExecutor(jobs, thread_name_prefix="narbench-sweep")
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def _run(self, task: Task) -> Outcome:
        def started(proc: subprocess.Popen) -> None:
            with self._lock:
                self._procs.add(proc)

        try:
            return execute(task if task.threads or not self.threads else task.with_threads(self.threads), started)
        finally:
            with self._lock:
                self._procs = {p for p in self._procs if p.poll() is None}

    def submit(self, tasks: list[Task]) -> list[Handle]:
        return [_FutureHandle(self._pool.submit(self._run, t), t) for t in tasks]

    def shutdown(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
        if cancel:
            with self._lock:
                procs = list(self._procs)
            for proc in procs:  # an interrupted run writes nothing (narbench.harness.runner)
                if proc.poll() is None:
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
