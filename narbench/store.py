"""A compact, versioned, checksummed file format for a set of graphs.

One file holds the op vocabulary, every graph's op ids and edges (edges stored as
differences, which compress well), labels, names and per-graph metadata. The sha256 is taken
over the canonical *uncompressed* payload, so it does not depend on the zstd library's
version: the same graphs give the same hash on any machine. Files are written atomically.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import struct
from pathlib import Path
from typing import Any

import numpy as np

from narbench.graph import ArchGraph

MAGIC = b"NARBENCH-GRAPHS\x001\x00"
_ARRAYS = ("ops", "node_counts", "edge_src_delta", "edge_dst_delta", "edge_counts")


class CorruptFileError(IOError):
    """A graph file is truncated, unreadable or does not match its expected sha256."""


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` through a temp file and rename: readers never see half a file.

    The file gets the mode any new file gets (0666 less the umask, usually 0644): the temp file
    is created with `os.open(..., 0o666)`, not `tempfile.mkstemp`, whose 0600 would make result
    files unreadable to other users of a shared results folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def encode_graphs(graphs: list[ArchGraph], vocab: list[str], header: dict[str, Any]) -> bytes:
    """The canonical uncompressed payload for `graphs` (what the sha256 is taken over)."""
    ops = np.concatenate([g.ops for g in graphs]).astype("<i2" if len(vocab) < 2**15 else "<i4")
    node_counts = np.array([g.num_nodes for g in graphs], dtype="<i4")
    src = [g.edges[0] for g in graphs]
    dst = [g.edges[1] for g in graphs]
    # Edges as differences: within a graph, src as a running difference and dst relative to src.
    src_delta = np.concatenate([np.diff(s, prepend=0) for s in src]).astype("<i4")
    dst_delta = np.concatenate([d - s for s, d in zip(src, dst)]).astype("<i4")
    edge_counts = np.array([g.num_edges for g in graphs], dtype="<i4")
    records = [
        {"name": g.name, "family": g.family, "coarse": g.coarse, "source": g.source, "meta": g.meta}
        for g in graphs
    ]
    head = {"header": header, "vocab": list(vocab), "records": records}
    head_bytes = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    buf.write(MAGIC)
    buf.write(struct.pack("<Q", len(head_bytes)))
    buf.write(head_bytes)
    for arr in (ops, node_counts, src_delta, dst_delta, edge_counts):
        np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def decode_graphs(payload: bytes) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
    if not payload.startswith(MAGIC):
        raise CorruptFileError("not a narbench graph file (bad magic bytes)")
    buf = io.BytesIO(payload)
    buf.seek(len(MAGIC))
    (n,) = struct.unpack("<Q", buf.read(8))
    head = json.loads(buf.read(n))
    arrays = {k: np.lib.format.read_array(buf, allow_pickle=False) for k in _ARRAYS}
    node_off = np.concatenate([[0], np.cumsum(arrays["node_counts"], dtype=np.int64)])
    edge_off = np.concatenate([[0], np.cumsum(arrays["edge_counts"], dtype=np.int64)])
    graphs = []
    for i, rec in enumerate(head["records"]):
        ops = arrays["ops"][node_off[i] : node_off[i + 1]].astype(np.int64)
        sd = arrays["edge_src_delta"][edge_off[i] : edge_off[i + 1]].astype(np.int64)
        dd = arrays["edge_dst_delta"][edge_off[i] : edge_off[i + 1]].astype(np.int64)
        src = np.cumsum(sd)
        graphs.append(ArchGraph(ops=ops, edges=np.stack([src, src + dd]), **rec))
    return graphs, head["vocab"], head["header"]


def write_graphs(
    path: str | os.PathLike,
    graphs: list[ArchGraph],
    vocab: list[str],
    header: dict[str, Any],
    *,
    level: int = 19,
) -> str:
    """Write graphs to `path` (zstd at `level`, atomic) and return the payload's sha256."""
    import zstandard

    payload = encode_graphs(graphs, vocab, header)
    atomic_write_bytes(path, zstandard.ZstdCompressor(level=level).compress(payload))
    return hashlib.sha256(payload).hexdigest()


def read_payload(path: str | os.PathLike, expected_sha256: str | None = None) -> tuple[bytes, str]:
    """The decompressed payload of a narbench zstd file and its sha256.

    `FileNotFoundError` if it is missing; `CorruptFileError` if it cannot be decompressed or its
    sha256 is not `expected_sha256`. Graph files and search indexes are both read through here."""
    import zstandard

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    try:
        payload = zstandard.ZstdDecompressor().decompress(path.read_bytes())
    except zstandard.ZstdError as exc:
        raise CorruptFileError(f"{path}: cannot decompress ({exc}); the file is truncated or corrupt") from exc
    digest = hashlib.sha256(payload).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise CorruptFileError(
            f"{path}: sha256 {digest[:16]}... does not match the expected {expected_sha256[:16]}..."
        )
    return payload, digest


def read_graphs(
    path: str | os.PathLike, expected_sha256: str | None = None
) -> tuple[list[ArchGraph], list[str], dict[str, Any], str]:
    """Read a graph file; raise `CorruptFileError` if it is damaged or its hash is not expected."""
    try:
        payload, digest = read_payload(path, expected_sha256)
    except FileNotFoundError:
        raise FileNotFoundError(f"graph file not found: {path}") from None
    try:
        graphs, vocab, header = decode_graphs(payload)
    except (ValueError, KeyError, struct.error, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{path}: unreadable payload ({exc})") from exc
    return graphs, vocab, header, digest


def read_head(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON head of a graph file (header, vocab, one record per graph) without its arrays.

    Streams only the start of the compressed file: a second or less where `read_graphs` takes
    several, and unchecked (the sha256 covers the whole payload). For listings, not for runs.
    """
    import zstandard

    path = Path(path)
    try:
        with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
            start = reader.read(len(MAGIC) + 8)
            if len(start) < len(MAGIC) + 8 or not start.startswith(MAGIC):
                raise CorruptFileError(f"{path}: not a narbench graph file (bad magic bytes)")
            (n,) = struct.unpack("<Q", start[len(MAGIC):])
            chunks, got = [], 0
            while got < n:
                chunk = reader.read(min(n - got, 1 << 22))
                if not chunk:
                    raise CorruptFileError(f"{path}: truncated")
                chunks.append(chunk)
                got += len(chunk)
        return json.loads(b"".join(chunks))
    except (zstandard.ZstdError, ValueError) as exc:
        raise CorruptFileError(f"{path}: unreadable ({exc})") from exc
