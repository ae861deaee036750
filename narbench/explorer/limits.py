"""What one client may cost the explorer: the size and time of a request body, and the search queue.

A body is read as it arrives and counted while it is read: a chunked upload (no Content-Length)
is stopped at `max_upload` bytes and answered 413 without reading the rest, and a body that has
not arrived within `body_seconds` is answered 408. Both answers close the connection, so the
client's remaining bytes are never read. Searches wait in a queue of `queue` places (`jobs`);
a search that cannot start within `start_within` seconds, or finds the queue full, is answered 503
with `Retry-After: retry_after`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_upload: int = 64 << 20  #: bytes of one uploaded graph file
    body_seconds: float = 30.0  #: seconds a request body may take to arrive, in total
    queue: int = 8  #: searches waiting or running at once; one more is answered 503
    start_within: float = 4.0  #: seconds a search may wait for its turn before it is answered 503
    retry_after: int = 5  #: seconds the 503 asks a client to wait


DEFAULT = Limits()


class BodyRefused(Exception):
    """A request body over the size or time limit, with its HTTP status (413, 408); one line."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


async def read_body(receive, limits: Limits = DEFAULT, declared: int | None = None) -> bytes:
    """The request body from the ASGI `receive`, read chunk by chunk: BodyRefused(413) as soon as it
    passes `limits.max_upload` (or when `declared`, the Content-Length, does, before reading any),
    BodyRefused(408) when it is not complete after `limits.body_seconds`."""
    cap = limits.max_upload
    if declared is not None and declared > cap:
        raise BodyRefused(f"the graph file is {declared >> 20} MiB; the limit is {cap >> 20} MiB", 413)
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise BodyRefused("the client went away before sending the whole file", 400)
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > cap:
                    raise BodyRefused(f"the graph file is over the limit of {cap >> 20} MiB; stopped reading it", 413)
                parts.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(parts)
    except TimeoutError:
        raise BodyRefused(f"the upload did not arrive within {limits.body_seconds:g} s; stopped waiting", 408) from None
