"""`ordered_map`: a function over a list in `jobs` worker processes, results in the list's order.

For per-graph data preparation that runs in numpy/scipy (not torch), e.g. `gps`' random-walk
positional encodings. The pool is set up as `narbench.train.partcache.split_graphs` sets up its
own: fork start method where there is one (the work list is inherited, not pickled; only results
travel back), spawn elsewhere (each task then carries its items, and `fn` must be importable);
workers reset SIGTERM to its default, and start with it blocked until they have
(`partcache.worker_pool`: the CLI's handler, inherited by a forked worker, once left `pool.join()`
waiting forever); the pool is terminated and joined
however the call ends. A result does not depend on `jobs`: each item is computed by the same
`fn`, in one process, and put back at its index.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from narbench.train.partcache import available_cores, worker_pool

__all__ = ["ordered_map"]

T = TypeVar("T")

#: (fn, items) of the running `ordered_map`, set before forking its workers
_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _run_chunk(task) -> tuple[list[int], list[Any]]:
    indices, payload = task
    if payload is None:  # forked worker: the work list is inherited
        assert _WORK is not None
        fn, items = _WORK
        return indices, [fn(items[i]) for i in indices]
    fn, chunk = payload
    return indices, [fn(item) for item in chunk]


def ordered_map(fn: Callable[[Any], T], items: Sequence[Any], *, jobs: int | None = None,
                cost: Callable[[Any], float] | None = None, min_per_job: int = 16,
                tasks_per_job: int = 32) -> list[T]:
    """`[fn(x) for x in items]`, computed in up to `jobs` processes (None: all cores).

    A pool is used only when every process gets at least `min_per_job` items (else this process
    does them all). `cost(item)` estimates an item's work (default: 1 each): items are handed out
    costliest first, in tasks of consecutive items worth about 1/(`jobs` x `tasks_per_job`) of
    the total (an item worth more is a task of its own), so a large item does not run alone at
    the end (a few `real` graphs take seconds each, most milliseconds) and small ones do not
    cross the pipe one by one. Results come back in `items`' order whatever the schedule. `fn`
    must not use torch's thread pools (the workers are forked from a process that may have
    started them): numpy and scipy are fine. An exception in a worker is raised here.
    """
    global _WORK
    items = list(items)
    jobs = max(1, int(jobs if jobs is not None else available_cores()))
    jobs = min(jobs, len(items) // max(1, min_per_job))
    if jobs <= 1:
        return [fn(x) for x in items]
    costs = [float(cost(x)) for x in items] if cost is not None else [1.0] * len(items)
    order = sorted(range(len(items)), key=lambda i: -costs[i])  # stable: equal costs keep the list's order
    target = sum(costs) / (jobs * max(1, tasks_per_job))
    spans: list[list[int]] = [[]]
    worth = 0.0
    for i in order:
        if spans[-1] and worth >= target:
            spans.append([])
            worth = 0.0
        spans[-1].append(i)
        worth += costs[i]
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    inherit = ctx.get_start_method() == "fork"
    tasks = [(span, None if inherit else (fn, [items[i] for i in span])) for span in spans]
    out: list[Any] = [None] * len(items)
    saved, pool = _WORK, None
    _WORK = (fn, items) if inherit else None
    try:
        pool = worker_pool(ctx, jobs)
        for indices, results in pool.imap_unordered(_run_chunk, tasks):
            for i, r in zip(indices, results):
                out[i] = r
    finally:
        _WORK = saved
        if pool is not None:
            pool.terminate()
            pool.join()
    return out
