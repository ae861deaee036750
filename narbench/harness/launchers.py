"""Launchers: where a sweep's runs execute. A small interface over existing engines.

A `Task` is one `narbench run` command line with its log file; `execute(task)` runs it in a
child process (`python -m narbench.cli run ... --json`) and returns an `Outcome` (exit status,
result file, seconds). A launcher only decides where `execute` is called:

- `LocalLauncher` (`narbench.harness.local_launcher`): N worker processes on this machine (a thread
  pool, each thread waiting on one `narbench run` process with its own `OMP_NUM_THREADS`);
- `SubmititLauncher` (`narbench.harness.slurm_launcher`): Slurm through submitit, one job per run or
  per batch of runs, submitted as array jobs (`executor.map_array`); `cluster="local"` runs the same
  path on this machine;
- `RayLauncher` (`narbench.harness.ray_launcher`): a Ray cluster (`ray.init(address=...)`), for a
  workstation-plus-cloud user.

To add one, implement `Launcher`: `submit(tasks) -> handles` (each with `done()` and `outcome()`),
and `shutdown()`; `narbench.harness.sweep.run_sweep` takes any such object.

Sweeps started together on one output folder share its runs instead of each running all of them:
a task with a `claim` file is run only by the process that creates that file
(`narbench.harness.claims`); another finds it held and reports the run as running elsewhere, or
finds the result it left and reports it done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from narbench.harness.claims import CLAIM_HEARTBEAT_S, Claim

RUN_MODULE = "narbench.cli"


@dataclass(frozen=True)
class Task:
    """One run of a sweep: the `narbench run` arguments, its name, its log file, its torch threads."""

    name: str
    argv: tuple[str, ...]
    log: str
    threads: int | None = None  # OMP_NUM_THREADS of the run (None: inherit)
    claim: str | None = None  # the run's claim file (`Claim`); None: run it unclaimed

    def command(self) -> list[str]:
        return [sys.executable, "-m", RUN_MODULE, "run", *self.argv, "--json", "--no-progress"]

    def with_threads(self, threads: int) -> "Task":
        """The same task with `threads` torch threads (a launcher's default for tasks that set none)."""
        return Task(self.name, self.argv, self.log, threads, self.claim)


@dataclass(frozen=True)
class Outcome:
    """What one task ended with: exit status (0 ok), its result file (when written), wall seconds, log."""

    name: str
    returncode: int
    result: str | None
    seconds: float
    log: str
    error: str = ""  # the last lines of the log when it failed; who holds its claim when running elsewhere
    #: "" ran here; "running": another process holds its claim; "done": another sweep finished it (`result`)
    elsewhere: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.result is not None


def execute(task: Task, on_start: Any = None) -> Outcome:
    """Run `task` in a child process; stdout (the result as JSON) and stderr go to its log file.

    `on_start(popen)` is called once the process exists (the local launcher keeps it to stop it).
    Never raises for a failed run: the outcome's `returncode` and `error` say what happened. A
    task with a `claim` runs only if this process takes the claim (its log is not touched otherwise).
    """
    if task.claim is None:
        return _execute(task, on_start)
    claim = Claim.take(Path(task.claim))
    if isinstance(claim, str):
        return Outcome(task.name, 0, None, 0.0, task.log, claim, elsewhere="running")
    try:
        done = claim.done_result()
        if done is not None:
            return Outcome(task.name, 0, done, 0.0, task.log, elsewhere="done")
        outcome = _execute(task, on_start, claim)
        claim.release(outcome.result if outcome.ok else None)
        return outcome
    finally:
        claim.release()


def _execute(task: Task, on_start: Any = None, claim: Claim | None = None) -> Outcome:
    """`execute` without the claim: the child process, touching `claim` while it lasts."""
    log = Path(task.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if task.threads:
        env.update(OMP_NUM_THREADS=str(task.threads), MKL_NUM_THREADS=str(task.threads))
    env.setdefault("NARBENCH_NO_PROGRESS", "1")
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        fh.write("$ " + " ".join(task.command()) + "\n")
        fh.flush()
        proc = subprocess.Popen(task.command(), stdout=subprocess.PIPE, stderr=fh, text=True, env=env)
        if on_start is not None:
            on_start(proc)
        out = _wait(proc, claim)
        fh.write(out)
    seconds = time.perf_counter() - t0
    result = None
    if proc.returncode == 0:
        try:
            result = json.loads(out)["path"]
        except (ValueError, KeyError, TypeError):
            pass
    error = "" if result else _tail(log)
    return Outcome(task.name, proc.returncode if result or proc.returncode else 1, result, seconds, str(log), error)


def _wait(proc: subprocess.Popen, claim: Claim | None) -> str:
    """The child's stdout once it ends; its pid joins the claim, which is touched every CLAIM_HEARTBEAT_S."""
    if claim is None:
        return proc.communicate()[0]
    claim.add_pid(proc.pid)
    while True:
        try:
            return proc.communicate(timeout=CLAIM_HEARTBEAT_S)[0]
        except subprocess.TimeoutExpired:  # retrying loses no output (subprocess docs)
            claim.touch()


def execute_batch(tasks: list[Task]) -> list[Outcome]:
    """Run tasks one after another (one Slurm job holding a batch of runs)."""
    return [execute(t) for t in tasks]


def _tail(path: Path, lines: int = 5) -> str:
    try:  # the log's last 64 KiB: a run that printed gigabytes is not read whole
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])
    except OSError:
        return ""


@runtime_checkable
class Handle(Protocol):
    """A submitted task: poll `done()`, then `outcome()` (never raises for a failed run).

    A handle may also have `started()` (False while queued), for the progress view.
    """

    def done(self) -> bool: ...

    def outcome(self) -> Outcome: ...


@runtime_checkable
class Launcher(Protocol):
    """Runs tasks somewhere. `submit` returns one handle per task, in order; `shutdown(cancel)` ends it."""

    name: str

    def submit(self, tasks: list[Task]) -> list[Handle]: ...

    def shutdown(self, cancel: bool = False) -> None: ...
