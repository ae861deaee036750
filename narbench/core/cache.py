"""The narbench cache: one folder for everything narbench generates (datasets, parts, indexes,
numba's and matplotlib's caches)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where generated datasets are cached: `$NARBENCH_CACHE` or `~/.cache/narbench`.

    An empty NARBENCH_CACHE counts as unset (it would otherwise be the current folder).
    """
    return Path(os.environ.get("NARBENCH_CACHE") or Path.home() / ".cache" / "narbench")
