"""The index file (`.nari`): its format, reading and writing it, and the index a search loads (`load_index`).

The container of `narbench.data.store` (version 2, the shipped index's: a checksum of the file, then
zstd over the payload; version 1, older files: zstd with its frame checksum) around a canonical
payload of magic bytes, a JSON header and named numpy arrays; the sha256 is taken over the payload,
like `narbench.data.store`. On read, every per-graph array must have one row per name and every
label and op id must index its list (`_check_arrays`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from narbench.data.store import CorruptFileError, pack_sections, read_arrays, read_payload, unpack_head, write_payload
from narbench.search_engine.index import SHIPPED, SUFFIX, IndexFileError, SearchIndex, cache_path, shipped_path
from narbench.search_engine.outside import check as check_outside

MAGIC = b"NARBENCH-INDEX\x001\x00"
FORMAT = 1


def encode_index(index: SearchIndex) -> bytes:
    """The canonical uncompressed payload (what the sha256 is taken over)."""
    header = {**index.header, "arrays": sorted(index.arrays)}
    return pack_sections(MAGIC, header, (index.arrays[key] for key in header["arrays"]))


def write_index(index: SearchIndex, path: str | Path, *, level: int = 19) -> str:
    """Write the index atomically (`narbench.data.store.write_payload`); returns the payload's sha256."""
    return write_payload(path, encode_index(index), level=level)


def read_index(path: str | Path, expected_sha256: str | None = None) -> SearchIndex:
    """Read an index file; `IndexFileError` (naming the fix) if it is missing, damaged or unexpected."""
    path = Path(path)
    fix = "rebuild it with `narbench index build`" if expected_sha256 is None else \
        "reinstall narbench to restore the shipped index, or rebuild it with `narbench index build`"
    try:
        payload, digest = read_payload(path, expected_sha256, kind="index")
    except FileNotFoundError as exc:
        raise IndexFileError(f"index file not found: {path}; {fix}") from exc
    except CorruptFileError as exc:
        raise IndexFileError(f"index {path} is damaged ({exc}); {fix}") from exc
    try:
        header, buf = unpack_head(payload, MAGIC, "index")
        if header.get("format") != FORMAT:
            raise ValueError(f"format {header.get('format')!r}, this narbench reads {FORMAT}")
        arrays = read_arrays(buf, header.pop("arrays"))
        _check_arrays(header, arrays)
        check_outside(header, arrays)  # the out-of-family score's entry, if any, is well formed
    except Exception as exc:  # noqa: BLE001 - numpy's and json's parsers raise many types on damaged bytes
        raise IndexFileError(f"index {path} is not a readable narbench index ({type(exc).__name__}: {exc}); "
                             f"{fix}") from exc
    return SearchIndex(header, arrays, sha256=digest, path=str(path))


def _check_arrays(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """`ValueError` naming the first inconsistency: rows per graph, label and op ids in range."""
    n = len(header["names"])
    shape = arrays["embeddings"].shape
    if len(shape) != 2 or shape[1] < 1:  # 0 dimensions: every cosine 0, arbitrary hits
        raise ValueError(f"its embeddings have shape {list(shape)}: an index needs one row per graph of at least "
                         "one dimension")
    for key in ("embeddings", "family", "coarse", "source", "num_nodes", "num_edges", "hash64"):
        if len(arrays[key]) != n:
            raise ValueError(f"array {key!r} has {len(arrays[key])} rows for {n} graph names")
    for key, labels in (("family", "families"), ("coarse", "coarse_labels"), ("source", "sources")):
        if n and int(arrays[key].max()) >= len(header[labels]):
            raise ValueError(f"array {key!r} holds id {int(arrays[key].max())} but there are {len(header[labels])} {labels}")
    indptr, ops = arrays["opc_indptr"].astype(np.int64), arrays["opc_op"]
    if len(indptr) != n + 1 or indptr[0] != 0 or (np.diff(indptr) < 0).any() or indptr[-1] != len(ops) \
            or len(arrays["opc_count"]) != len(ops):
        raise ValueError("the op-count arrays are inconsistent (opc_indptr does not index opc_op)")
    if len(ops) and int(ops.max()) >= len(header["vocab"]):
        raise ValueError(f"op id {int(ops.max())} outside the vocabulary of {len(header['vocab'])} ops")
    if "more_indptr" in arrays:  # the other families of graphs that several families share (real 2.3 on)
        ptr, ids = arrays["more_indptr"].astype(np.int64), arrays["more_family"]
        if len(ptr) != n + 1 or ptr[0] != 0 or (np.diff(ptr) < 0).any() or ptr[-1] != len(ids) \
                or (len(ids) and int(ids.max()) >= len(header.get("more_families", []))):
            raise ValueError("the arrays of the graphs' other families are inconsistent (more_indptr, more_family)")


def row_families(index: SearchIndex, row: int) -> tuple[str, ...]:
    """Every family of the graph in `row`, its primary (`record`'s `family`) first; an index of a dataset whose
    graphs may have several families stores the others (`more_indptr`, `more_family` over `more_families`)."""
    h, a = index.header, index.arrays
    primary = h["families"][a["family"][row]]
    if "more_indptr" not in a:
        return (primary,)
    lo, hi = int(a["more_indptr"][row]), int(a["more_indptr"][row + 1])
    return (primary, *(h["more_families"][i] for i in a["more_family"][lo:hi].tolist()))


@functools.lru_cache(maxsize=4)
def _load_cached(path: str, expected: str | None, mtime: float) -> SearchIndex:
    return read_index(path, expected)


def load_index(encoder: str | None = None, path: str | Path | None = None) -> SearchIndex:
    """The index to search, read once per process.

    `path`: that file. Otherwise the shipped index (sha256-pinned) when `encoder` is None or
    its encoder, else the one `narbench index build --encoder ENCODER` wrote to the cache.
    """
    if path is None and encoder in (None, SHIPPED.encoder):
        path, expected = shipped_path(), SHIPPED.sha256
    elif path is None:
        path, expected = cache_path(encoder), None
        if not path.is_file():
            from narbench.core.registry import UnknownNameError, names

            if encoder not in names("encoder"):  # a typo: say so, not how to build an index for it
                raise IndexFileError(str(UnknownNameError("encoder", encoder, names("encoder"))))
            raise IndexFileError(f"no index for encoder {encoder!r} (looked for {path}); build it with "
                                 f"`narbench index build --encoder {encoder}`")
    else:
        expected = None
    path = Path(path)
    if path.is_dir():
        raise IndexFileError(f"index {path} is a folder, not an index file: give the {SUFFIX} file that "
                             "`narbench index build --out` wrote")
    mtime = path.stat().st_mtime if path.is_file() else 0.0
    index = _load_cached(str(path), expected, mtime)
    if encoder is not None and index.encoder_name != encoder:
        raise IndexFileError(f"index {path} was built with encoder {index.encoder_name!r}, not {encoder!r}; "
                             f"drop --encoder or build one with `narbench index build --encoder {encoder}`")
    return index
