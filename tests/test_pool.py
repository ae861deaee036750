"""`narbench.train.pool.ordered_map`: results in the list's order, from other processes, whatever the schedule."""

from __future__ import annotations

import os
import signal

import pytest

from narbench.train.pool import ordered_map


def _square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _sigterm_is_default(_x) -> bool:
    return signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def _sigterm_is_unblocked(_x) -> bool:
    return signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, set())


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise ValueError("seven")
    return x


def test_results_come_back_in_order_from_worker_processes():
    items = list(range(50))
    out = ordered_map(_square_and_pid, items, jobs=2, min_per_job=1, tasks_per_job=4,
                      cost=lambda x: (x * 7919) % 13)  # a schedule unlike the list's order, several items a task
    assert [v for v, _ in out] == [x * x for x in items]
    assert os.getpid() not in {pid for _, pid in out}


def test_too_few_items_per_job_run_here():
    out = ordered_map(_square_and_pid, list(range(10)), jobs=2, min_per_job=16)
    assert {pid for _, pid in out} == {os.getpid()}
    assert ordered_map(_square_and_pid, [], jobs=4) == []


def test_workers_die_on_sigterm_whatever_handler_the_parent_has():
    before = signal.signal(signal.SIGTERM, lambda *a: None)  # as `narbench.process.scope` installs one
    try:
        assert all(ordered_map(_sigterm_is_default, list(range(8)), jobs=2, min_per_job=1))
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_exception_in_a_worker_is_raised_here():
    with pytest.raises(ValueError, match="seven"):
        ordered_map(_fail_on_seven, list(range(20)), jobs=2, min_per_job=1)


def test_workers_start_with_sigterm_blocked_until_they_reset_it(monkeypatch):
    """A SIGTERM sent to a worker still starting must wait for the default action, not meet the
    parent's handler (which ignored it and hung `terminate()` once); the parent's mask is put back."""
    import multiprocessing.context

    from narbench.train.partcache import worker_pool

    seen = {}
    fork = multiprocessing.context.ForkProcess._Popen

    def during_fork(process):  # what a worker inherits: the mask of the thread that forks it
        seen["blocked"] = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, set())
        return fork(process)

    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    monkeypatch.setattr(multiprocessing.context.ForkProcess, "_Popen", staticmethod(during_fork))
    pool = worker_pool(multiprocessing.get_context("fork"), 1)
    monkeypatch.undo()
    try:
        assert seen["blocked"] and pool.apply(_sigterm_is_unblocked, (0,))
    finally:
        pool.terminate()
        pool.join()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before
