"""Bounded reads of files a user may be handed: result folders, indexes, graph files, snapshots, caches.

Every reader of such a file follows three rules, so that a crafted file costs neither memory nor
secrets:

* **The header first.** A fixed-size prefix is read and its magic bytes checked before the body:
  a 3 GiB file that is not narbench's is refused after a few bytes.
* **A cap on bytes.** The file's size is checked before it is read, and decompressed bytes are
  counted while they stream: a zstd frame's declared size is checked before anything is
  decompressed, a frame that declares none and every gzip stream are cut off at the cap. The cap
  is the smaller of the kind's `Limit.max_bytes` and `Limit.max_ratio` times the compressed size
  (with `FLOOR` below it): a 64 KB bomb cannot expand past 64 MiB whatever it claims.
* **One line, no bytes.** An error names the file and says "not a narbench X file", "truncated",
  or which cap it passed; it never quotes the file's content (an explorer may be handed a server
  path such as /etc/shadow).

No reader here unpickles anything; `LIMITS` is the table of caps, each with its reason.
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zipfile
import zlib
from dataclasses import dataclass

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
#: below this many decompressed bytes no ratio is checked (small files compress as they like)
FLOOR = 4 * MiB
#: largest zstd window accepted: narbench writes at level 19 at most (an 8 MiB window), 4x that
ZSTD_MAX_WINDOW = 32 * MiB
#: decompressed bytes produced per step of a streaming read
CHUNK = 1 * MiB
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
_LOCAL = threading.local()
#: most entries in a zip (a torch file has one per tensor plus 6: a snapshot of a model of 10,000 tensors
#: with Adam's two states per tensor has 30,006)
ZIP_MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class Limit:
    """The caps of one kind of file: `max_bytes` (decompressed, or the file's size when it is not
    compressed) and `max_ratio` (decompressed per compressed byte); `why` says where they come from."""

    kind: str
    max_bytes: int
    max_ratio: int
    why: str

    def cap(self, compressed: int) -> int:
        """The most decompressed bytes a file of `compressed` bytes may give."""
        return min(self.max_bytes, max(FLOOR, compressed * self.max_ratio))


#: The caps, one per kind of file. Sizes measured on the shipped files (narbench/data/, the
#: committed leaderboard/); each cap leaves a margin over the largest one for bigger user-built files.
LIMITS: dict[str, Limit] = {lim.kind: lim for lim in (
    Limit("graph", 1 * GiB, 1024, "real-1.0.narg: 315 MB decompressed; real-1.0-reextracted.narg: 500:1, the "
                                  "highest ratio shipped"),
    Limit("index", 1 * GiB, 1024, "index-real-2.2-graf-lda.nari: 17 MB decompressed at 1.2:1; a 2048-d index of "
                                  "real is about 200 MB"),
    Limit("result", 64 * MiB, 1, "the largest committed result file is 48 KB (JSON, not compressed)"),
    Limit("per-query sidecar", 256 * MiB, 64, "the committed sidecars are at most 0.5 MB decompressed at 4:1 (six "
                                              "decimals per score compress little)"),
    Limit("snapshot", 8 * GiB, 1, "model, Adam state (2x the model) and RNG state, not compressed: room for "
                                  "600M float32 parameters, far above any shipped encoder"),
    Limit("checkpoint", 4 * GiB, 1, "encoder weights alone, not compressed: room for 1G float32 parameters"),
    Limit("zoo result", 64 * MiB, 1024, "one spec's extraction record: JSON of a few MB at most"),
    Limit("parts row", 256 * MiB, 1024, "one graph's parts: int32 offsets and node ids of a graph of at most a few "
                                        "million nodes"),
    Limit("taxonomy cache", 1 * GiB, 1, "isomorphism classes and near-duplicate pairs of real: a few MB of JSON"),
    Limit("embeddings", 1 * GiB, 1024, "float16 query embeddings of a run: a few MB"),
    Limit("ledger", 16 * MiB, 1, "leaderboard/verified.csv: a row of about 300 bytes per re-run result file"),
    Limit("gate reference", 64 * MiB, 1, "leaderboard/reference.json: 0.2 MB for 432 metrics with their bands"),
    Limit("launcher job", 16 * MiB, 1, "a sweep job's JSON: a run's configuration and where it writes, a few KB"),
)}


class RefusedFileError(ValueError):
    """A file refused before or while it was read (too large, not the expected kind, truncated).

    `str()` is one line: the file and the reason, never the file's bytes."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: {reason}")


def size_text(n: int) -> str:
    """`n` bytes in words (`64 MiB`, `1 GiB`, `512 bytes`)."""
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= unit:
            return f"{n / unit:.3g} {name}"
    return f"{n} bytes"


def not_kind(path: str | os.PathLike, kind: str) -> RefusedFileError:
    return RefusedFileError(path, f"not a narbench {kind} file")


def too_large(path: str | os.PathLike, limit: Limit, cap: int, what: str = "once decompressed") -> RefusedFileError:
    scaled = " of this size" if what == "once decompressed" and cap < limit.max_bytes else ""
    return RefusedFileError(path, f"refused: more than {size_text(cap)} {what} (narbench's cap for a "
                                  f"{limit.kind} file{scaled})")


def _limit(kind: str | Limit) -> Limit:
    return kind if isinstance(kind, Limit) else LIMITS[kind]


def read_prefix(path: str | os.PathLike, n: int) -> bytes:
    """The first `n` bytes of `path` (fewer when it is shorter)."""
    with open(path, "rb") as fh:
        return fh.read(n)


def check_size(path: str | os.PathLike, kind: str | Limit) -> int:
    """The size of `path`; `RefusedFileError` when it is over the kind's `max_bytes` (nothing is read)."""
    limit, size = _limit(kind), os.stat(path).st_size
    if size > limit.max_bytes:
        raise too_large(path, limit, limit.max_bytes, "on disk")
    return size


def read_file(path: str | os.PathLike, kind: str | Limit, magic: tuple[bytes, ...] = (), *,
              lstrip: bool = False) -> bytes:
    """The bytes of `path`: its start checked against `magic` (any of them; after leading white
    space with `lstrip`), then its size against the kind's cap, before the rest is read."""
    limit = _limit(kind)
    with open(path, "rb") as fh:
        head = fh.read(4 * KiB)
        start = head.lstrip() if lstrip else head
        if lstrip and start.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
            start = start[3:].lstrip()
        if magic and not start.startswith(magic):  # before the size: another program's file gets no more said
            raise not_kind(path, limit.kind)
        size = os.fstat(fh.fileno()).st_size
        if size > limit.max_bytes:
            raise too_large(path, limit, limit.max_bytes, "on disk")
        fh.seek(0)
        parts = [fh.read(size)]
        total = len(parts[0])
        while chunk := fh.read(CHUNK):  # a file that grows while read, or says it is empty (/proc): capped too
            total += len(chunk)
            if total > limit.max_bytes:
                raise too_large(path, limit, limit.max_bytes, "on disk")
            parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def zstd_decompress(frame: bytes, path: str | os.PathLike, kind: str | Limit) -> bytes:
    """The content of one zstd frame, at most the kind's cap for `len(frame)` bytes.

    A declared content size is checked before decompressing (and then decompressed into a buffer
    of that size, which libzstd never overruns); a frame without one streams, counted."""
    import zstandard

    limit = _limit(kind)
    cap = limit.cap(len(frame))
    if not frame.startswith(ZSTD_MAGIC):
        raise not_kind(path, limit.kind)
    try:
        params = zstandard.get_frame_parameters(frame[:18])
        if params.window_size > ZSTD_MAX_WINDOW:
            raise RefusedFileError(path, f"refused: a zstd window of {size_text(params.window_size)} (narbench "
                                         f"writes at most {size_text(ZSTD_MAX_WINDOW)})")
        dctx = _decompressor()
        if params.content_size != zstandard.CONTENTSIZE_UNKNOWN:
            if params.content_size > cap:
                raise too_large(path, limit, cap)
            return dctx.decompress(frame)
        return _capped(dctx.stream_reader(io.BytesIO(frame)), cap, path, limit)
    except zstandard.ZstdError:
        raise RefusedFileError(path, "truncated or corrupt (its zstd data does not decompress)") from None


def _decompressor():
    """This thread's zstd decompressor (making one costs 20 times decompressing a small part row)."""
    import zstandard

    dctx = getattr(_LOCAL, "dctx", None)
    if dctx is None:
        dctx = _LOCAL.dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    return dctx


def zstd_reader(fh, path: str | os.PathLike, kind: str | Limit, compressed: int) -> "CappedReader":
    """A reader of the zstd stream in `fh` that refuses to give more than the cap for `compressed` bytes."""
    import zstandard

    limit = _limit(kind)
    reader = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW).stream_reader(fh, closefd=False)
    return CappedReader(reader, limit.cap(compressed), path, limit)


def gzip_decompress(data: bytes, path: str | os.PathLike, kind: str | Limit) -> bytes:
    """The content of gzip `data` (every member), at most the kind's cap for `len(data)` bytes."""
    limit = _limit(kind)
    if not data.startswith(GZIP_MAGIC):
        raise not_kind(path, limit.kind)
    cap, out, total, rest = limit.cap(len(data)), [], 0, data
    while rest:
        d = zlib.decompressobj(wbits=31)
        while not d.eof:
            try:
                chunk = d.decompress(rest, CHUNK)
            except zlib.error:
                raise RefusedFileError(path, "truncated or corrupt (its gzip data does not decompress)") from None
            rest = d.unconsumed_tail
            total += len(chunk)
            if total > cap:
                raise too_large(path, limit, cap)
            out.append(chunk)
            if not chunk and not rest and not d.eof:
                raise RefusedFileError(path, "truncated (its gzip data ends early)")
        rest = d.unused_data.lstrip(b"\x00")  # another member may follow (gzip's padding is zeros)
    return b"".join(out)


def read_gzip(path: str | os.PathLike, kind: str | Limit) -> bytes:
    """A gzip file's content: its magic checked first, its size and decompressed size capped."""
    return gzip_decompress(read_file(path, kind, (GZIP_MAGIC,)), path, kind)


class CappedReader:
    """A decompressing stream that raises `RefusedFileError` once it has given more than `cap` bytes."""

    def __init__(self, raw, cap: int, path: str | os.PathLike, limit: Limit) -> None:
        self.raw, self.cap, self.path, self.limit, self.total = raw, cap, path, limit, 0

    def read(self, n: int) -> bytes:
        chunk = self.raw.read(min(n, CHUNK))
        self.total += len(chunk)
        if self.total > self.cap:
            raise too_large(self.path, self.limit, self.cap)
        return chunk

    def read_exactly(self, n: int) -> bytes:
        """`n` bytes, or `RefusedFileError` (truncated) when the stream ends before."""
        if n > self.cap:
            raise too_large(self.path, self.limit, self.cap)
        parts, got = [], 0
        while got < n:
            chunk = self.read(n - got)
            if not chunk:
                raise RefusedFileError(self.path, "truncated")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)


def _capped(reader, cap: int, path: str | os.PathLike, limit: Limit) -> bytes:
    out, capped = [], CappedReader(reader, cap, path, limit)
    while chunk := capped.read(CHUNK):
        out.append(chunk)
    return b"".join(out)


def check_zip(path: str | os.PathLike, kind: str | Limit, *, stored_only: bool = True) -> None:
    """Check a zip archive before a reader that trusts it (`torch.load`, `np.load` of an `.npz`) opens
    it: zip magic first, then the central directory: entries adding up to at most the kind's cap
    uncompressed and, with `stored_only` (torch writes none other), none compressed, so that what
    is read is no more than the file holds. `RefusedFileError` otherwise."""
    limit = _limit(kind)
    if read_prefix(path, len(ZIP_MAGIC)) != ZIP_MAGIC:
        raise not_kind(path, limit.kind)
    check_size(path, limit)
    try:
        many = _end_record_says_many(path)  # the end record first: a huge central directory is refused unread
        entries = []
        if not many:
            with zipfile.ZipFile(path) as zf:
                entries = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error):
        raise RefusedFileError(path, f"truncated or corrupt (not a readable narbench {limit.kind} file)") from None
    if many:
        raise RefusedFileError(path, f"refused: more than {ZIP_MAX_ENTRIES:,} entries (narbench's cap for a "
                                     f"{limit.kind} file)")
    if stored_only and any(e.compress_type != zipfile.ZIP_STORED for e in entries):
        raise RefusedFileError(path, f"not a narbench {limit.kind} file (compressed entries; torch writes none)")
    total = sum(e.file_size for e in entries)
    if total > limit.cap(sum(e.compress_size for e in entries)):
        raise too_large(path, limit, limit.cap(sum(e.compress_size for e in entries)))


def _end_record_says_many(path: str | os.PathLike) -> bool:
    """Whether the zip's end-of-central-directory record (PKWARE APPNOTE 4.3.16: the last 22 bytes plus a
    comment of up to 64 KiB) declares more entries or a larger central directory than narbench writes.
    Read from the format itself, not zipfile's private reader; a zip64 marker (0xFFFF entries or
    0xFFFFFFFF bytes) counts as many: narbench's files never need zip64."""
    size = os.stat(path).st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - (22 + 65535)))
        tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise zipfile.BadZipFile("no end of central directory record")
    _sig, _disk, _cd_disk, _here, total, cd_size, _cd_offset, _comment = struct.unpack("<4s4H2LH", tail[at:at + 22])
    return total == 0xFFFF or cd_size == 0xFFFFFFFF or total > ZIP_MAX_ENTRIES or cd_size > ZIP_MAX_ENTRIES * 256

