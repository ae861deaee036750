"""Where numba caches compiled code (ranx's metrics, the motif splitter's kernels).

Both use `@njit(cache=True)`: compiled once, then loaded from disk by later processes. numba
caches next to the sources (`__pycache__`) when that directory is writable. `setup_numba_cache()`
(called before numba is first imported) sets `NUMBA_CACHE_DIR=<narbench cache>/numba` when it is
not (a read-only install), so the compilation is still paid once per machine, not once per run.
An explicit `NUMBA_CACHE_DIR` is left alone.
"""

from __future__ import annotations

import importlib.util
import os
import sys

_PACKAGES = ("ranx", "narbench", "narbench.splitters")


def setup_numba_cache() -> None:
    if "NUMBA_CACHE_DIR" in os.environ or "numba" in sys.modules:
        return
    for name in _PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
        if origin is not None and not os.access(origin, os.W_OK):
            from narbench.dataset import cache_dir

            os.environ["NUMBA_CACHE_DIR"] = str(cache_dir() / "numba")
            return
