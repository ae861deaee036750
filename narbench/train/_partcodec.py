"""The row format of the parts cache (`narbench.train.partcache`): one graph's `GraphParts` as bytes.

`encode_parts` gives the zstd-compressed payload and the blake2b checksum of the uncompressed
one; `decode_parts` reads them back and rejects a damaged row. `FORMAT` is part of the cache's
splitter id, so rows written in another format are never read.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from narbench.core import safeio
from narbench.train.parts import GraphParts

FORMAT = 3
_HEAD = struct.Struct("<4sIIII")  # magic, format, parts, members, macro edges
_MAGIC = b"NBPT"


def encode_parts(parts: GraphParts) -> tuple[bytes, bytes]:
    """(zstd-compressed payload, blake2b-128 of the uncompressed payload).

    Payload: header (magic, format, parts P, members M, macro edges E), then int32 offsets
    [P+1], node ids [M] as differences within each part (the first of a part as is: small,
    repetitive numbers that compress well), macro edges [2E], then the P 16-byte keys."""
    P = parts.num_parts
    macro = np.asarray(parts.macro_edges, dtype=np.int64).reshape(2, -1)
    deltas = np.diff(parts.nodes, prepend=0)
    starts = parts.offsets[:-1][np.diff(parts.offsets) > 0]
    deltas[starts] = parts.nodes[starts]
    payload = b"".join([
        _HEAD.pack(_MAGIC, FORMAT, P, parts.nodes.shape[0], macro.shape[1]),
        np.concatenate([parts.offsets, deltas, macro.reshape(-1)]).astype("<i4").tobytes(),
        b"".join(parts.keys),
    ])
    return _compressor().compress(payload), hashlib.blake2b(payload, digest_size=16).digest()


def decode_parts(blob: bytes, checksum: bytes) -> GraphParts:
    """Inverse of `encode_parts`; raises ValueError if the row is damaged."""
    try:  # capped before and while decompressing (`safeio.LIMITS["parts row"]`): the cache file may be anyone's
        payload = safeio.zstd_decompress(blob, "the parts cache", "parts row")
    except safeio.RefusedFileError as exc:
        raise ValueError(f"cannot decompress ({exc.reason})") from None
    if hashlib.blake2b(payload, digest_size=16).digest() != checksum:
        raise ValueError("checksum mismatch")
    magic, fmt, P, M, E = _HEAD.unpack_from(payload)
    ints = P + 1 + M + 2 * E
    if magic != _MAGIC or fmt != FORMAT or len(payload) != _HEAD.size + 4 * ints + 16 * P:
        raise ValueError("bad header")
    arr = np.frombuffer(payload, "<i4", ints, _HEAD.size).astype(np.int64)
    offsets = arr[: P + 1]
    # undo the differences: csum[k] = sum of the first k deltas (arr[P] = offsets[-1] = M is
    # the element before them, subtracted again), then restart the sum at each part
    csum = np.cumsum(arr[P : P + 1 + M]) - M
    nodes = csum[1:] - np.repeat(csum[offsets[:-1]], np.diff(offsets))
    at = _HEAD.size + 4 * ints
    keys = tuple([payload[i : i + 16] for i in range(at, at + 16 * P, 16)])
    return GraphParts(offsets, nodes, arr[P + 1 + M :].reshape(2, E), keys)


_ZSTD: dict[str, object] = {}


def _compressor():
    import zstandard

    if "c" not in _ZSTD:
        _ZSTD["c"] = zstandard.ZstdCompressor(level=3)
    return _ZSTD["c"]
