"""The compiled fast paths of training on or off: `propagate` (GCN and GIN layers as CSR products)
and `dropout` (ReLU and dropout in one pass). Both give the numbers of the ops they replace; within
`eager()` neither is used and PyG's and torch's own ops run (the reference path: tests compare the two)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_ENABLED = [True]


def enabled() -> bool:
    """False within `eager()`."""
    return _ENABLED[-1]


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Within the block, layers run PyG's and torch's own ops."""
    _ENABLED.append(False)
    try:
        yield
    finally:
        _ENABLED.pop()
