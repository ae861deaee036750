"""A process-wide on/off switch (`Switch`) that a context sets and an environment variable defaults: how the
extraction is told to record design attributes or to trace through custom functions, by a search in this
process (the context) or by a build's worker processes (the environment they inherit)."""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator


class Switch:
    """`wanted(asked)`: `asked` if given, else what the innermost `on(...)` context set, else whether the
    environment variable `env` is "1"."""

    def __init__(self, name: str, env: str) -> None:
        self.env = env
        self._var: contextvars.ContextVar[bool | None] = contextvars.ContextVar(name, default=None)

    @contextlib.contextmanager
    def on(self, value: bool = True) -> Iterator[None]:
        token = self._var.set(bool(value))
        try:
            yield
        finally:
            self._var.reset(token)

    def wanted(self, asked: bool | None = None) -> bool:
        if asked is None:
            asked = self._var.get()
        return bool(asked) if asked is not None else os.environ.get(self.env, "") == "1"
