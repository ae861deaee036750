"""Build the `real` dataset from the model zoos: extract, dedup, assemble one graph file.

`build_real(out_dir, jobs=N)`:

* enumerates the candidate specs (`narbench.zoo.sources.all_specs`), optionally filtered
  (`only`) and sampled (`limit`, spread evenly over the zoos);
* extracts each spec in a worker subprocess (N workers) with a per-model wall-clock limit
  (the worker is killed and replaced on timeout) and an address-space limit (`setrlimit`);
* writes each spec's result (graph, or failure reason) to its own small file under
  `out_dir/results/`, so an interrupted build resumes where it stopped;
* dedups by exact graph hash (`ArchGraph.content_hash`), keeping the first spec in the fixed
  spec order, and writes `out_dir/real-1.0.narg` with `narbench.data.store.write_graphs`
  (vocabulary = sorted op names seen);
* prints and returns a summary (extracted, failed by reason, duplicates, per family/coarse).

The parts: `narbench.zoo.results` (the per-spec files), `narbench.zoo.worker` (the worker
subprocesses and the pool that drives them), `narbench.zoo.assemble` (dedup, the graph file,
the summary); this module selects the specs and strings them together.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from narbench.data.store import atomic_write_bytes
from narbench.zoo.assemble import DATASET_NAME, DATASET_VERSION, MAX_NODES, print_summary, summarize
from narbench.zoo.results import FAILED, NOT_APPLICABLE, OK, RESULT_SUFFIX, read_result, result_path, write_result
from narbench.zoo.spec import SOURCES, Spec
from narbench.zoo.worker import run_workers

__all__ = ["DATASET_NAME", "DATASET_VERSION", "FAILED", "MAX_NODES", "NOT_APPLICABLE", "OK", "RESULT_SUFFIX",
           "BuildState", "build_real", "print_summary", "read_result", "result_path", "select_specs", "summarize",
           "write_result"]


# ============================================================================ selection


def select_specs(specs: Sequence[Spec], limit: int | None = None, only: str | Iterable[str] | None = None) -> list[Spec]:
    """Filter by `only` (glob patterns or substrings of spec keys) and sample `limit` specs,
    spread evenly over the sources and, within a source, evenly over the spec order."""
    out = list(specs)
    if only:
        pats = [only] if isinstance(only, str) else list(only)
        out = [s for s in out if any(fnmatch.fnmatchcase(s.key, p) if any(c in p for c in "*?[") else p in s.key
                                     for p in pats)]
    if limit is not None and limit < len(out):
        by_src: dict[str, list[Spec]] = defaultdict(list)
        for s in out:
            by_src[s.source].append(s)
        srcs = list(by_src)
        quota = {src: 0 for src in srcs}
        left = limit
        while left > 0:  # round robin, respecting each source's size
            progressed = False
            for src in srcs:
                if left and quota[src] < len(by_src[src]):
                    quota[src] += 1
                    left -= 1
                    progressed = True
            if not progressed:
                break
        chosen = set()
        for src in srcs:
            items, q = by_src[src], quota[src]
            for i in range(q):
                chosen.add(id(items[(i * len(items)) // q]))
        out = [s for s in out if id(s) in chosen]
    return out


# ============================================================================ the build


@dataclass
class BuildState:
    counts: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    seconds: list = field(default_factory=list)


def build_real(
    out_dir: str | os.PathLike,
    jobs: int = 1,
    limit: int | None = None,
    only: str | Iterable[str] | None = None,
    *,
    timeout: float = 180.0,
    mem_limit_gb: float | None = 8.0,
    retry_failed: bool = False,
    sources: Sequence[str] = SOURCES,
    specs: Sequence[Spec] | None = None,
    assemble: bool = True,
    max_tasks_per_worker: int = 1000,
    quiet: bool = False,
) -> dict[str, Any]:
    """Extract (resumably), dedup and assemble the `real` dataset under `out_dir`.

    `jobs`: worker processes; `limit`: sample this many specs (spread over the zoos); `only`:
    glob patterns / substrings of spec keys ("timm/resnet*", "transformers/bert/"); `timeout`:
    seconds per model; `mem_limit_gb`: address-space limit per worker beyond its imports;
    `retry_failed`: redo specs that failed before (timeouts, crashes) instead of keeping their
    recorded failure. Returns the summary dict (also printed unless `quiet`).
    """
    from rich.console import Console

    console = Console(stderr=True, quiet=quiet)
    out = Path(out_dir)
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    if specs is None:
        from narbench.zoo.sources import all_specs

        with console.status("enumerating model specs"):
            specs = all_specs(sources)
    selected = select_specs(specs, limit, only)
    todo = []
    for s in selected:
        prev = read_result(out, s)
        if prev is None or (retry_failed and prev.get("status") == FAILED):
            todo.append(s)
    console.print(f"[bold]{len(selected)}[/] specs selected, {len(selected) - len(todo)} already done, "
                  f"{len(todo)} to extract with {jobs} worker(s)")
    if todo:
        run_workers(out, todo, selected, jobs, timeout, mem_limit_gb, max_tasks_per_worker, console)
    summary = summarize(out, selected, assemble=assemble)
    summary["build_seconds"] = round(time.perf_counter() - t_start, 1)
    if not quiet:
        print_summary(summary, console)
    atomic_write_bytes(out / "summary.json", json.dumps(summary, indent=1, sort_keys=True).encode())
    return summary
