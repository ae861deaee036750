"""The search queue: searches run one at a time on their own thread, never on the server's shared pool.

The page, its data and the static files are answered on the event loop or the server's thread
pool; searches (which may load torch, the index or the corpus, or wait up to the time limit for a
model given as code) run on a thread of their own. So a search that hangs delays other searches,
never the page. At most `Limits.queue` searches wait or run at once; one more, or one that has not
started within `Limits.start_within` seconds, is refused with `Busy` (503 and Retry-After). The
thread is a daemon: stopping the server never waits for a search.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from narbench.explorer.limits import DEFAULT, Limits


class Busy(RuntimeError):
    """The queue is full, or a search waited too long for its turn: answer 503 with `retry_after`."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SearchQueue:
    def __init__(self, limits: Limits = DEFAULT) -> None:
        self.limits = limits
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._count = 0  # waiting or running
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None

    def _admit(self) -> None:
        with self._guard:
            if self._count >= self.limits.queue:
                raise Busy(f"{self._count} searches are waiting or running (the limit); try again shortly",
                           self.limits.retry_after)
            self._count += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="narbench-search", daemon=True)
                self._thread.start()

    def _release(self, _future=None) -> None:
        with self._guard:
            self._count -= 1

    def _work(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - the request's handler raises it
                future.set_exception(exc)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the search thread; Busy when it cannot be queued or started in time."""
        self._admit()
        future: Future = Future()
        future.add_done_callback(self._release)
        self._jobs.put((future, fn, args))
        waited = asyncio.wrap_future(future)
        try:
            return await asyncio.wait_for(asyncio.shield(waited), self.limits.start_within)
        except TimeoutError:
            if future.cancel():  # still waiting: give its place back
                raise Busy(f"the search did not start within {self.limits.start_within:g} s (others are before "
                           "it); try again shortly", self.limits.retry_after) from None
        return await waited  # running: its own time limit ends it
