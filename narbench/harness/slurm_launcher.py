"""The Slurm launcher, through submitit: one job per run or per batch of runs, submitted as array
jobs (`executor.map_array`); `cluster="local"` runs the same path on this machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narbench.harness.launchers import Handle, Outcome, Task, execute_batch


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
        tasks = [t if t.threads else t.with_threads(self.options.cpus) for t in tasks]
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
