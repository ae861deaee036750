"""The cache of `python -m narbench.cli.taxonomy_build --cache DIR`: slow intermediate results as JSON.

The build keeps the isomorphism classes, the WL near-duplicate pairs and the dedup's merged
family pairs of the (unchanged) graphs between runs. They are plain data, so they are kept as
JSON with a tag saying which of three shapes it is (never a pickle: a cache folder may be
shared or handed over, and a pickle runs code when read); the file's first byte and its size
are checked before it is read (`safeio.LIMITS["taxonomy cache"]`). A file that cannot be used is
reported in one line and recomputed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from narbench.core import safeio
from narbench.data.store import atomic_write_bytes

#: the integer dtypes an array in the cache may have (the WL pairs are int64)
_DTYPES = ("int64", "int32")


def encode(value: Any) -> dict[str, Any]:
    """`value` (an integer array, a Counter of family pairs, or lists of ints) as tagged JSON data."""
    if isinstance(value, np.ndarray):
        if str(value.dtype) not in _DTYPES:
            raise TypeError(f"the taxonomy cache keeps integer arrays, not {value.dtype}")
        return {"array": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, Counter):
        return {"counter": [[list(key), int(n)] for key, n in value.items()]}
    return {"lists": [[int(x) for x in row] for row in value]}


def decode(raw: Any) -> Any:
    """Inverse of `encode`; ValueError for anything else."""
    if not isinstance(raw, dict) or len(raw) not in (1, 3):
        raise ValueError("not a narbench taxonomy cache file")
    if "array" in raw:
        if raw.get("dtype") not in _DTYPES:
            raise ValueError("an array of another dtype")
        return np.array(raw["array"], dtype=raw["dtype"]).reshape([int(n) for n in raw["shape"]])
    if "counter" in raw:
        return Counter({tuple(str(k) for k in key): int(n) for key, n in raw["counter"]})
    if "lists" in raw:
        return [[int(x) for x in row] for row in raw["lists"]]
    raise ValueError("not a narbench taxonomy cache file")


def cached(folder: Path | None, name: str, key: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, kept in `folder` as `taxonomy-<name>-<key>.json` when `folder` is given."""
    if folder is None:
        return compute()
    path = Path(folder) / f"taxonomy-{name}-{key}.json"
    if path.is_file():
        try:
            return decode(json.loads(safeio.read_file(path, "taxonomy cache", (b"{",), lstrip=True)))
        except safeio.RefusedFileError as exc:
            reason = exc.reason
        except (ValueError, TypeError, KeyError):
            reason = "not a narbench taxonomy cache file"
        print(f"{path}: {reason}; recomputed", file=sys.stderr)
    value = compute()
    atomic_write_bytes(path, json.dumps(encode(value), separators=(",", ":")).encode())
    return value
