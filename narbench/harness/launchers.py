"""Launchers: where a sweep's runs execute. A small interface over existing engines.

A `Task` is one `narbench run` command line with its log file; `execute(task)` runs it in a
child process (`python -m narbench.cli run ... --json`) and returns an `Outcome` (exit status,
result file, seconds). A launcher only decides where `execute` is called:

- `LocalLauncher`: N worker processes on this machine (a thread pool, each thread waiting on one
  `narbench run` process with its own `OMP_NUM_THREADS`);
- `SubmititLauncher`: Slurm through submitit, one job per run or per batch of runs, submitted as
  array jobs (`executor.map_array`); `cluster="local"` runs the same path on this machine;
- `RayLauncher`: a Ray cluster (`ray.init(address=...)`), for a workstation-plus-cloud user.

To add one, implement `Launcher`: `submit(tasks) -> handles` (each with `done()` and `outcome()`),
and `shutdown()`; `narbench.harness.sweep.run_sweep` takes any such object.

Sweeps started together on one output folder share its runs instead of each running all of them:
a task with a `claim` file is run only by the process that creates that file (`Claim`, made with
O_CREAT|O_EXCL when the run starts, wherever it executes); another finds it held and reports the run
as running elsewhere, or finds the result it left (`<claim>.done`) and reports it done.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from narbench.core.host import pid_alive
from narbench.data.store import atomic_write_bytes

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


def _execute(task: Task, on_start: Any = None, claim: "Claim | None" = None) -> Outcome:
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


def _wait(proc: subprocess.Popen, claim: "Claim | None") -> str:
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
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


# ------------------------------------------------------------------------------------- claims

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
            result = json.loads(Path(f"{self.path}{DONE_SUFFIX}").read_text())["result"]
        except (OSError, ValueError, KeyError, TypeError):
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
        record = json.loads(path.read_text())
    except (OSError, ValueError):
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


# --------------------------------------------------------------------------------------- local


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
            return execute(task if task.threads or not self.threads else _with_threads(task, self.threads), started)
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


def _with_threads(task: Task, threads: int) -> Task:
    return Task(task.name, task.argv, task.log, threads, task.claim)


# ------------------------------------------------------------------------------------- submitit


@dataclass
class _JobHandle:
    job: Any  # submitit.Job
    index: int  # this task's place in the job's batch
    task: Task

    def done(self) -> bool:
        return self.job.done()

    def started(self) -> bool:
        try:
            return self.job.done() or self.job.state not in ("PENDING", "UNKNOWN", "REQUEUED")
        except Exception:  # noqa: BLE001 (sacct/squeue unavailable for a moment)
            return False

    def outcome(self) -> Outcome:
        try:
            return self.job.result()[self.index]
        except Exception as exc:  # noqa: BLE001 (job failed, timed out, was cancelled)
            log = str(self.job.paths.stderr)
            return Outcome(self.task.name, 1, None, 0.0, log, f"{type(exc).__name__}: {str(exc)[-500:]}")


@dataclass
class SlurmOptions:
    """The Slurm resources of one job (submitit's parameters)."""

    partition: str | None = None
    account: str | None = None
    time_min: int = 120  # per job: a batch of `per_job` runs must fit
    gpus: int = 0  # GPUs per job
    cpus: int = 2  # CPUs per job (each run's torch threads)
    mem_gb: int | None = None
    per_job: int = 1  # runs per job (a batch runs them one after another)
    parallel: int | None = None  # at most this many jobs of an array at once
    extra: dict[str, Any] = field(default_factory=dict)  # more `slurm_*` parameters, e.g. {"qos": "high"}


class SubmititLauncher:
    """Slurm (or submitit's local executor) through submitit: each `submit` is one array job.

    Logs: each run's own log file as with `local`, plus submitit's in `folder` (a job that dies
    before its runs start, e.g. out of time, is reported with submitit's stderr file).
    """

    name = "slurm"

    def __init__(self, folder: str | Path, options: SlurmOptions | None = None, cluster: str | None = "slurm") -> None:
        try:
            import submitit
        except ImportError as exc:
            raise ImportError("the slurm launcher needs submitit: pip install 'narbench[slurm]'") from exc
        self.options = options or SlurmOptions()
        self.cluster = cluster
        self.executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
        o = self.options
        params: dict[str, Any] = {"name": "narbench", "timeout_min": o.time_min, "cpus_per_task": o.cpus,
                                  "gpus_per_node": o.gpus, "nodes": 1, "tasks_per_node": 1}
        if o.mem_gb:
            params["mem_gb"] = o.mem_gb
        if o.partition:
            params["slurm_partition"] = o.partition
        if o.account:
            params["slurm_account"] = o.account
        if o.parallel:
            params["slurm_array_parallelism"] = o.parallel
        params.update({k if k.startswith("slurm_") else f"slurm_{k}": v for k, v in o.extra.items()})
        self.executor.update_parameters(**params)
        self.jobs: list[Any] = []

    def submit(self, tasks: list[Task]) -> list[Handle]:
        if not tasks:
            return []
        tasks = [t if t.threads else _with_threads(t, self.options.cpus) for t in tasks]
        n = max(1, self.options.per_job)
        batches = [tasks[i:i + n] for i in range(0, len(tasks), n)]
        jobs = self.executor.map_array(execute_batch, batches)
        self.jobs += jobs
        return [_JobHandle(job, i, t) for job, batch in zip(jobs, batches) for i, t in enumerate(batch)]

    def shutdown(self, cancel: bool = False) -> None:
        if cancel:
            for job in self.jobs:
                if not job.done():
                    job.cancel(check=False)


# ------------------------------------------------------------------------------------------ ray


@dataclass
class _RayHandle:
    ref: Any
    task: Task

    def done(self) -> bool:
        import ray

        ready, _ = ray.wait([self.ref], timeout=0)
        return bool(ready)

    def outcome(self) -> Outcome:
        import ray

        try:
            return ray.get(self.ref)
        except Exception as exc:  # noqa: BLE001 (a node died, the task was cancelled)
            return Outcome(self.task.name, 1, None, 0.0, self.task.log, f"{type(exc).__name__}: {exc}")


class RayLauncher:
    """Runs on a Ray cluster: each run a Ray task reserving `threads` CPUs and `gpus` GPUs.

    `address=None` starts a local Ray (a workstation); `"auto"` or `ray://host:10001` joins a
    cluster. The output folder must be on storage every node sees (as with Slurm).
    """

    name = "ray"

    def __init__(self, address: str | None = None, threads: int = 1, gpus: float = 0) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("the ray launcher needs ray: pip install 'narbench[ray]'") from exc
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.threads, self.gpus = threads, gpus
        self._remote = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(execute)
        self._refs: list[Any] = []

    def submit(self, tasks: list[Task]) -> list[Handle]:
        handles = []
        for t in tasks:
            ref = self._remote.remote(t if t.threads else _with_threads(t, self.threads))
            self._refs.append(ref)
            handles.append(_RayHandle(ref, t))
        return handles

    def shutdown(self, cancel: bool = False) -> None:
        import ray

        if cancel:
            for ref in self._refs:
                ray.cancel(ref, force=True)
