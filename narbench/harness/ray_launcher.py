"""The Ray launcher: a sweep's runs on a Ray cluster (`ray.init(address=...)`), for a
workstation-plus-cloud user; each run a Ray task reserving its CPUs and GPUs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from narbench.harness.launchers import Handle, Outcome, Task, execute


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
            ref = self._remote.remote(t if t.threads else t.with_threads(self.threads))
            self._refs.append(ref)
            handles.append(_RayHandle(ref, t))
        return handles

    def shutdown(self, cancel: bool = False) -> None:
        import ray

        if cancel:
            for ref in self._refs:
                ray.cancel(ref, force=True)
