"""Per-graph node encodings computed once and kept on disk, as the motif parts are (`partcache`).

`gps` feeds every node a random-walk encoding (`narbench.baselines.gnn.random_walk_pe`): the
largest CPU cost of a `gps` run, and the same for every seed, split and profile that sees the
graph. `EncodingCache` keeps them in an SQLite file of its own,
`<narbench cache>/encodings/encodings.sqlite` (the `PartsCache` machinery: locking, a damaged file
set aside, rows written in one transaction), one row per (kind, graph content hash). `kind` names
the encoding and the code that computes it (the caller builds it: `gps` passes its walk length and
a digest of `random_walk_pe`'s source, `source_digest`), so changed code never reads old rows. A
row is the [nodes, width] float32 array, zstd-compressed, with the blake2b checksum of the
uncompressed payload; a damaged row is reported and recomputed, and a cache that cannot be used
(read-only, locked for minutes) is reported and skipped.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from narbench.core import safeio
from narbench.train.partcache import PartsCache, _source_digest

FORMAT = 1
_HEAD = struct.Struct("<4sIII")  # magic, format, rows, columns
_MAGIC = b"NBNE"
#: one row's cap: a graph of a few million nodes with 20 float32 values each
LIMIT = safeio.Limit("encodings row", 512 * safeio.MiB, 1024,
                     "one graph's float32 node encodings: 20 per node for a graph of a few million nodes")


def source_digest(*objects) -> str:
    """A digest of the objects' source code (a cache kind changes when the code does)."""
    return _source_digest(objects)[:16]


def encode_array(array: np.ndarray) -> tuple[bytes, bytes]:
    """(zstd-compressed payload, blake2b-128 of the payload) of a 2-D float32 array."""
    array = np.ascontiguousarray(array, dtype="<f4")
    payload = _HEAD.pack(_MAGIC, FORMAT, *array.shape) + array.tobytes()
    from narbench.train._partcodec import _compressor

    return _compressor().compress(payload), hashlib.blake2b(payload, digest_size=16).digest()


def decode_array(blob: bytes, checksum: bytes) -> np.ndarray:
    """Inverse of `encode_array`; ValueError on a damaged row."""
    try:
        payload = safeio.zstd_decompress(blob, "the encodings cache", LIMIT)
    except safeio.RefusedFileError as exc:
        raise ValueError(f"cannot decompress ({exc.reason})") from None
    if hashlib.blake2b(payload, digest_size=16).digest() != checksum:
        raise ValueError("checksum mismatch")
    magic, fmt, rows, cols = _HEAD.unpack_from(payload)
    if magic != _MAGIC or fmt != FORMAT or len(payload) != _HEAD.size + 4 * rows * cols:
        raise ValueError("bad header")
    return np.frombuffer(payload, "<f4", rows * cols, _HEAD.size).reshape(rows, cols).astype(np.float32)


def default_path() -> Path:
    from narbench.core.cache import cache_dir

    return cache_dir() / "encodings" / "encodings.sqlite"


class EncodingCache(PartsCache):
    """The SQLite file of node encodings (see the module docstring)."""

    def __init__(self, path=None) -> None:
        super().__init__(path if path is not None else default_path())

    def __repr__(self) -> str:
        return f"EncodingCache({str(self.path)!r})"

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_conn": None}  # a copy (an encoder pickled) opens its own connection

    def get_arrays(self, kind: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached arrays of the graphs `hashes` ({} when the cache cannot be read: reported)."""
        try:
            found, damaged = self.get_many(f"{kind}:{FORMAT}", hashes, decode=decode_array)
        except sqlite3.Error as exc:
            warnings.warn(f"encodings cache {self.path} unusable ({exc}); computing without it", RuntimeWarning,
                          stacklevel=2)
            return {}
        if damaged:
            warnings.warn(f"encodings cache {self.path}: {damaged} damaged entr{'y' if damaged == 1 else 'ies'}; "
                          "recomputing them", RuntimeWarning, stacklevel=2)
        return found

    def put_arrays(self, kind: str, arrays: dict[str, np.ndarray]) -> None:
        """Write the arrays (graph hash -> array); a cache that cannot be written is reported and skipped."""
        rows = [(h, *encode_array(a)) for h, a in arrays.items()]
        try:
            self.put_many(f"{kind}:{FORMAT}", rows)
        except sqlite3.Error as exc:
            warnings.warn(f"encodings cache {self.path}: cannot write ({exc}); encodings are not cached",
                          RuntimeWarning, stacklevel=2)
