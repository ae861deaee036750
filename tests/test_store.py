import hashlib
import os

import numpy as np
import pytest

from narbench.store import CorruptFileError, atomic_write_bytes, encode_graphs, read_graphs, write_graphs
from tests.conftest import toy_graphs

VOCAB = [f"op{i}" for i in range(8)]


def test_roundtrip_preserves_graphs(tmp_path):
    graphs = toy_graphs(per_family=5)
    graphs[0].meta = {"params": 123, "task": "cls"}
    digest = write_graphs(tmp_path / "d.narg", graphs, VOCAB, {"version": "x"})
    back, vocab, header, digest2 = read_graphs(tmp_path / "d.narg", digest)
    assert digest == digest2 and vocab == VOCAB and header == {"version": "x"}
    assert len(back) == len(graphs)
    for a, b in zip(graphs, back):
        assert np.array_equal(a.ops, b.ops) and np.array_equal(a.edges, b.edges)
        assert (a.name, a.family, a.coarse, a.source, a.meta) == (b.name, b.family, b.coarse, b.source, b.meta)


def test_hash_is_over_payload_not_compression(tmp_path):
    graphs = toy_graphs(per_family=3)
    d1 = write_graphs(tmp_path / "a.narg", graphs, VOCAB, {}, level=1)
    d2 = write_graphs(tmp_path / "b.narg", graphs, VOCAB, {}, level=19)
    assert d1 == d2 == hashlib.sha256(encode_graphs(graphs, VOCAB, {})).hexdigest()


def test_truncated_file_is_detected(tmp_path):
    path = tmp_path / "d.narg"
    write_graphs(path, toy_graphs(per_family=5), VOCAB, {})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match="truncated or corrupt"):
        read_graphs(path)


def test_wrong_hash_is_detected(tmp_path):
    path = tmp_path / "d.narg"
    write_graphs(path, toy_graphs(per_family=5), VOCAB, {})
    with pytest.raises(CorruptFileError, match="does not match"):
        read_graphs(path, "0" * 64)


def test_not_a_graph_file(tmp_path):
    import zstandard

    path = tmp_path / "d.narg"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"hello world"))
    with pytest.raises(CorruptFileError, match="bad magic"):
        read_graphs(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_graphs(tmp_path / "nope.narg")


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    atomic_write_bytes(path, b"old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(path, b"new content")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_atomic_write_gives_the_mode_of_any_new_file(tmp_path):
    """0666 less the umask (0644 under the usual 022), not mkstemp's 0600; no temp file left."""
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "a.json", b"{}")
        atomic_write_bytes(tmp_path / "a.json", b"{}")  # replacing keeps the same mode
        os.umask(0o077)
        atomic_write_bytes(tmp_path / "private.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "private.json"]


def test_read_head_gives_records_without_the_arrays(tmp_path):
    from narbench.store import read_head

    graphs = toy_graphs(per_family=3)
    write_graphs(tmp_path / "d.narg", graphs, VOCAB, {"version": "x"})
    head = read_head(tmp_path / "d.narg")
    assert head["header"] == {"version": "x"} and head["vocab"] == VOCAB
    assert [r["family"] for r in head["records"]] == [g.family for g in graphs]
    (tmp_path / "bad.narg").write_bytes(b"junk")
    with pytest.raises(CorruptFileError):
        read_head(tmp_path / "bad.narg")
