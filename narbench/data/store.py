"""A compact, versioned, checksummed file format for a set of graphs.

One file holds the op vocabulary, every graph's op ids and edges (edges stored as
differences, which compress well), labels, names and per-graph metadata. The sha256 is taken
over the canonical *uncompressed* payload, so it does not depend on the zstd library's
version: the same graphs give the same hash on any machine. Files are written atomically.

The file around the payload (`.narg` graph files and `.nari` search indexes alike) has two
versions, both read:

* **2**: `CONTAINER_MAGIC`, the sha256 of the rest of the file (32 bytes), then one zstd frame
  (with zstd's own checksum of the payload). Any changed bit is found on read, before
  decompressing: the magic is not recognised or the rest of the file has another sha256.
* **1**: a bare zstd frame, no checksum of its own (the shipped `real-1.0.narg` and
  `index-real-1.0-wl.nari`, whose payload sha256 is pinned in the package instead).

Whatever the version, a payload is checked for structure on read (array lengths, op ids inside
the vocabulary, every edge endpoint inside its graph): a damaged file raises `CorruptFileError`
naming the file and what is wrong, never a graph with wrong edges. A file may come from anyone (an
upload to the explorer, `--index`): its first bytes are checked before the rest is read, and its size
and decompressed size are capped (`narbench.core.safeio.LIMITS`); errors never quote its bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import struct
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import numpy as np

from narbench.core import safeio
from narbench.core.cache import writing
from narbench.data.graph import ArchGraph

MAGIC = b"NARBENCH-GRAPHS\x001\x00"
_ARRAYS = ("ops", "node_counts", "edge_src_delta", "edge_dst_delta", "edge_counts")
_RECORD_KEYS = {"name", "family", "coarse", "source", "meta"}

#: The start of a version-2 file: magic, then the sha256 of the zstd frame after it (32 bytes).
CONTAINER_MAGIC = b"NARBENCH-FILE\x002\x00"
#: The version `write_payload` writes (1: a bare zstd frame, still read).
CONTAINER_VERSION = 2
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class CorruptFileError(IOError):
    """A graph file is truncated, unreadable or does not match its expected sha256."""


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` through a temp file and rename: readers never see half a file.

    A lack of space raises `narbench.core.cache.DiskFullError` naming `path` (nothing of it stays).
    """
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = write_temp(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def write_temp(path: Path, data: bytes) -> Path:
    """Write `data`, synced to disk, to a new temp file beside `path` (`.<name>.<random>.tmp`) and
    return it; nothing stays if that fails. The rename onto `path` is the caller's.

    The file gets the mode any new file gets (0666 less the umask, usually 0644): it is created
    with `os.open(..., 0o666)`, not `tempfile.mkstemp`, whose 0600 would make result files
    unreadable to other users of a shared results folder.
    """
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    """The parts end to end; an empty array for none (a file of no graphs, e.g. a patch whose every spec failed)."""
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def encode_graphs(graphs: list[ArchGraph], vocab: list[str], header: dict[str, Any]) -> bytes:
    """The canonical uncompressed payload for `graphs` (what the sha256 is taken over)."""
    ops = _cat([g.ops for g in graphs]).astype("<i2" if len(vocab) < 2**15 else "<i4")
    node_counts = np.array([g.num_nodes for g in graphs], dtype="<i4")
    src = [g.edges[0] for g in graphs]
    dst = [g.edges[1] for g in graphs]
    # Edges as differences: within a graph, src as a running difference and dst relative to src.
    src_delta = _cat([np.diff(s, prepend=0) for s in src]).astype("<i4")
    dst_delta = _cat([d - s for s, d in zip(src, dst)]).astype("<i4")
    edge_counts = np.array([g.num_edges for g in graphs], dtype="<i4")
    records = [
        {"name": g.name, "family": g.family, "coarse": g.coarse, "source": g.source, "meta": g.meta}
        for g in graphs
    ]
    head = {"header": header, "vocab": list(vocab), "records": records}
    return pack_sections(MAGIC, head, (ops, node_counts, src_delta, dst_delta, edge_counts))


def pack_sections(magic: bytes, head: dict[str, Any], arrays: Iterable[np.ndarray]) -> bytes:
    """The payload layout of narbench's files (graphs, search index): `magic`, the length of the
    JSON head (u64, little-endian), the head (sorted keys, compact), then each array in `.npy` form."""
    head_bytes = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    buf.write(magic)
    buf.write(struct.pack("<Q", len(head_bytes)))
    buf.write(head_bytes)
    for arr in arrays:
        np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def unpack_head(payload: bytes, magic: bytes, kind: str) -> tuple[dict[str, Any], io.BytesIO]:
    """The JSON head of a `pack_sections` payload and a reader at its first array (`read_arrays`)."""
    if not payload.startswith(magic):
        raise CorruptFileError(f"not a narbench {kind} file (bad magic bytes)")
    buf = io.BytesIO(payload)
    buf.seek(len(magic))
    (n,) = struct.unpack("<Q", buf.read(8))
    return json.loads(buf.read(n)), buf


def read_arrays(buf: io.BytesIO, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The next arrays of `buf`, one per name, in order (no pickles)."""
    return {k: np.lib.format.read_array(buf, allow_pickle=False) for k in names}


def decode_graphs(payload: bytes) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
    """Graphs, vocabulary and header of a payload; `CorruptFileError` saying what is inconsistent."""
    head, buf = unpack_head(payload, MAGIC, "graph")
    arrays = read_arrays(buf, _ARRAYS)
    if buf.read(1):
        raise CorruptFileError("unexpected bytes after the last array")
    records, vocab = head["records"], head["vocab"]
    _check_counts(arrays, records, len(vocab))
    node_off = np.concatenate([[0], np.cumsum(arrays["node_counts"], dtype=np.int64)])
    edge_off = np.concatenate([[0], np.cumsum(arrays["edge_counts"], dtype=np.int64)])
    graphs = []
    for i, rec in enumerate(records):
        ops = arrays["ops"][node_off[i] : node_off[i + 1]].astype(np.int64)
        sd = arrays["edge_src_delta"][edge_off[i] : edge_off[i + 1]].astype(np.int64)
        dd = arrays["edge_dst_delta"][edge_off[i] : edge_off[i + 1]].astype(np.int64)
        src = np.cumsum(sd)
        edges = np.stack([src, src + dd])
        if edges.size and edges.view(np.uint64).max() >= len(ops):  # the edge-index check (a negative id is huge)
            bad = int(edges.min() if edges.min() < 0 else edges.max())
            raise CorruptFileError(f"graph {i} ({rec['name']!r}): edge endpoint {bad} outside its {len(ops)} nodes")
        graphs.append(ArchGraph(ops=ops, edges=edges, **rec))
    return graphs, vocab, head["header"]


def _check_counts(arrays: dict[str, np.ndarray], records: list, num_ops: int) -> None:
    """The arrays agree with each other and the head: counts add up to the arrays' lengths, one
    record per graph, every op id in the vocabulary (edge endpoints are checked per graph)."""
    for key in _ARRAYS:
        if arrays[key].ndim != 1 or arrays[key].dtype.kind not in "iu":
            raise CorruptFileError(f"array {key!r} is not a 1-d integer array")
    nodes, edges = arrays["node_counts"].astype(np.int64), arrays["edge_counts"].astype(np.int64)
    if not isinstance(records, list) or not all(isinstance(r, dict) and set(r) == _RECORD_KEYS for r in records):
        raise CorruptFileError("malformed graph records in the head")
    if not len(records) == len(nodes) == len(edges):
        raise CorruptFileError(f"{len(records)} records but {len(nodes)} node counts and {len(edges)} edge counts")
    if len(nodes) and (nodes.min() < 1 or edges.min() < 0):
        raise CorruptFileError("a graph has a negative edge count or no node")
    ops = arrays["ops"]
    if len(ops) != nodes.sum():
        raise CorruptFileError(f"{len(ops)} op ids but the node counts add up to {int(nodes.sum())}")
    if len(ops) and (ops.min() < 0 or ops.max() >= num_ops):
        bad = int(ops.min() if ops.min() < 0 else ops.max())
        raise CorruptFileError(f"op id {bad} outside the vocabulary [0, {num_ops})")
    if not len(arrays["edge_src_delta"]) == len(arrays["edge_dst_delta"]) == edges.sum():
        raise CorruptFileError(f"{len(arrays['edge_src_delta'])} edge sources and {len(arrays['edge_dst_delta'])} "
                               f"targets but the edge counts add up to {int(edges.sum())}")


def write_graphs(
    path: str | os.PathLike,
    graphs: list[ArchGraph],
    vocab: list[str],
    header: dict[str, Any],
    *,
    level: int = 19,
) -> str:
    """Write graphs to `path` (zstd at `level`, atomic) and return the payload's sha256."""
    return write_payload(path, encode_graphs(graphs, vocab, header), level=level)


def write_payload(path: str | os.PathLike, payload: bytes, *, level: int = 19) -> str:
    """Write `payload` as a version-2 file (magic, checksum, zstd frame), atomically.

    Returns the payload's sha256 (the content's identity, which does not depend on zstd)."""
    import zstandard

    frame = zstandard.ZstdCompressor(level=level, write_checksum=True).compress(payload)
    atomic_write_bytes(path, CONTAINER_MAGIC + hashlib.sha256(frame).digest() + frame)
    return hashlib.sha256(payload).hexdigest()


def _frame(path: Path, kind: str) -> bytes:
    """The zstd frame of a file, its header checked before the rest is read and, in a version-2
    file, the frame checked against the file's checksum; the file's size is capped (`safeio.LIMITS`)."""
    try:
        data = safeio.read_file(path, kind, (CONTAINER_MAGIC, _ZSTD_MAGIC))
    except safeio.RefusedFileError as exc:
        reason = "cannot decompress: " + exc.reason if exc.reason.startswith("not a narbench") else exc.reason
        raise CorruptFileError(f"{path}: {reason}") from None
    if data.startswith(CONTAINER_MAGIC):
        start = len(CONTAINER_MAGIC) + 32
        recorded, frame = data[len(CONTAINER_MAGIC) : start].hex(), data[start:]
        digest = hashlib.sha256(frame).hexdigest()
        if digest != recorded:
            raise CorruptFileError(f"{path}: checksum mismatch: the {len(frame):,} bytes after the file header have "
                                   f"sha256 {digest[:16]}..., the header records {recorded[:16]}...; the file is "
                                   "truncated or corrupt")
        return frame
    return data


def read_payload(path: str | os.PathLike, expected_sha256: str | None = None, *,
                 kind: str = "graph") -> tuple[bytes, str]:
    """The decompressed payload of a narbench file (version 1 or 2) and its sha256.

    `FileNotFoundError` if it is missing; `CorruptFileError` if it is not a narbench file (found from
    its first bytes, before the rest is read), its checksum does not match (version 2), it cannot be
    decompressed, it would decompress past the cap of its `kind` (`narbench.core.safeio.LIMITS`:
    "graph" or "index"), or its payload's sha256 is not `expected_sha256`. Graph files and search
    indexes are both read through here."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    frame = _frame(path, kind)
    try:
        payload = safeio.zstd_decompress(frame, path, kind)
    except safeio.RefusedFileError as exc:
        corrupt = "corrupt" in exc.reason or exc.reason.startswith("refused")
        raise CorruptFileError(str(exc) + ("" if corrupt else "; the file is truncated or corrupt")) from None
    except MemoryError:  # a damaged frame header can claim any size up to the cap
        raise CorruptFileError(f"{path}: cannot decompress (MemoryError); the file is truncated or corrupt") from None
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
    except CorruptFileError as exc:
        raise CorruptFileError(f"{path}: {exc}; the file is corrupt") from exc
    except Exception as exc:  # noqa: BLE001 - numpy's and json's parsers raise many types on damaged bytes
        raise CorruptFileError(f"{path}: unreadable payload ({type(exc).__name__}: {exc}); the file is corrupt") from exc
    return graphs, vocab, header, digest


def read_head(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON head of a graph file (header, vocab, one record per graph) without its arrays.

    Streams only the start of the compressed file: a second or less where `read_graphs` takes
    several, and unchecked (the sha256 covers the whole payload). For listings, not for runs.
    """
    import zstandard

    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            start = fh.read(len(CONTAINER_MAGIC))
            if start != CONTAINER_MAGIC and not start.startswith(_ZSTD_MAGIC):
                raise CorruptFileError(f"{path}: not a narbench graph file")
            fh.seek(len(CONTAINER_MAGIC) + 32 if start == CONTAINER_MAGIC else 0)
            reader = safeio.zstd_reader(fh, path, "graph", size)
            start = reader.read_exactly(len(MAGIC) + 8)
            if not start.startswith(MAGIC):
                raise CorruptFileError(f"{path}: not a narbench graph file (bad magic bytes)")
            (n,) = struct.unpack("<Q", start[len(MAGIC):])
            head = reader.read_exactly(n)
        return json.loads(head)
    except safeio.RefusedFileError as exc:
        raise CorruptFileError(str(exc)) from None
    except (zstandard.ZstdError, ValueError) as exc:
        raise CorruptFileError(f"{path}: unreadable ({type(exc).__name__}); the file is truncated or corrupt") from exc
