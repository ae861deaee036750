import hashlib
import os

import numpy as np
import pytest

from narbench.data.store import CorruptFileError, atomic_write_bytes, encode_graphs, read_graphs, write_graphs
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


def test_a_file_of_no_graphs_round_trips(tmp_path):
    digest = write_graphs(tmp_path / "none.narg", [], VOCAB, {"patched": 0})  # e.g. a patch whose every spec failed
    assert read_graphs(tmp_path / "none.narg", digest) == ([], VOCAB, {"patched": 0}, digest)


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
    from narbench.data.store import read_head

    graphs = toy_graphs(per_family=3)
    write_graphs(tmp_path / "d.narg", graphs, VOCAB, {"version": "x"})
    head = read_head(tmp_path / "d.narg")
    assert head["header"] == {"version": "x"} and head["vocab"] == VOCAB
    assert [r["family"] for r in head["records"]] == [g.family for g in graphs]
    (tmp_path / "bad.narg").write_bytes(b"junk")
    with pytest.raises(CorruptFileError):
        read_head(tmp_path / "bad.narg")


# ------------------------------------------------------------------ checksum and structure checks


def _v1_file(path, graphs, vocab, header=None):
    """A graph file as narbench wrote it before the checksum (version 1: a bare zstd frame)."""
    import zstandard

    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(encode_graphs(graphs, vocab, header or {})))
    return path


def _flip(path, bit):
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def test_every_flipped_bit_is_found(tmp_path):
    """One bit changed anywhere (magic, checksum, frame) raises, naming the file; none loads.

    A seeded sample of bits (every bit of every byte: `python -m benchmarks.validity.bench_bitflip`)."""
    from narbench.data.store import CONTAINER_MAGIC

    path = tmp_path / "d.narg"
    write_graphs(path, toy_graphs(per_family=2), VOCAB, {"v": 1})
    good = path.read_bytes()
    assert good.startswith(CONTAINER_MAGIC)
    rng = np.random.default_rng(0)
    head = len(CONTAINER_MAGIC) + 36  # magic, checksum, zstd frame header: a bit of each byte; then of every 5th
    bits = [8 * byte + int(rng.integers(8)) for byte in [*range(head), *range(head, len(good), 5)]]
    messages = set()
    for bit in bits:
        path.write_bytes(good)
        _flip(path, bit)
        with pytest.raises(CorruptFileError, match=str(path)) as exc:
            read_graphs(path)
        messages.add(str(exc.value).split(":")[1].strip())
    assert any(m.startswith("checksum mismatch") for m in messages)
    assert any(m.startswith("cannot decompress") for m in messages)  # the magic itself damaged


def test_checksum_mismatch_says_what_is_wrong(tmp_path):
    path = tmp_path / "d.narg"
    write_graphs(path, toy_graphs(per_family=3), VOCAB, {})
    _flip(path, 8 * (len(path.read_bytes()) - 10))
    with pytest.raises(CorruptFileError, match=r"d\.narg: checksum mismatch: .* the header records .* corrupt"):
        read_graphs(path)


def test_version_1_files_stay_readable(tmp_path):
    from narbench.data.store import read_head

    graphs = toy_graphs(per_family=3)
    digest = write_graphs(tmp_path / "v2.narg", graphs, VOCAB, {"x": 1})
    old = _v1_file(tmp_path / "v1.narg", graphs, VOCAB, {"x": 1})
    back, vocab, header, digest1 = read_graphs(old, digest)  # same payload, same sha256
    assert digest1 == digest and vocab == VOCAB and header == {"x": 1}
    assert all(np.array_equal(a.edges, b.edges) and np.array_equal(a.ops, b.ops) for a, b in zip(graphs, back))
    assert read_head(old)["header"] == read_head(tmp_path / "v2.narg")["header"] == {"x": 1}


def _graph(ops, edges, name="g"):
    from narbench.data.graph import ArchGraph

    return ArchGraph(ops=np.array(ops), edges=np.array(edges).reshape(2, -1), name=name, family="f", coarse="c")


@pytest.mark.parametrize("graph, expected", [
    (_graph([0, 1, 2], [[0, 1], [1, 3]]), r"graph 1 \('bad'\): edge endpoint 3 outside its 3 nodes"),
    (_graph([0, 1, 2], [[0, -1], [1, 2]]), r"graph 1 \('bad'\): edge endpoint -1 outside its 3 nodes"),
    (_graph([0, 9, 2], [[0, 1], [1, 2]]), r"op id 9 outside the vocabulary \[0, 8\)"),
])
def test_edge_index_and_op_ids_are_checked_on_load(tmp_path, graph, expected):
    """A version-1 file has no checksum: a damaged edge or op id is still refused, never loaded."""
    graph.name = "bad"
    path = _v1_file(tmp_path / "d.narg", [_graph([0, 1], [[0], [1]]), graph], VOCAB)
    with pytest.raises(CorruptFileError, match=rf"d\.narg: {expected}; the file is corrupt"):
        read_graphs(path)


def test_inconsistent_counts_are_refused(tmp_path):
    import struct

    from narbench.data.store import MAGIC

    graphs = [_graph([0, 1], [[0], [1]]), _graph([0, 1, 2], [[0, 1], [1, 2]])]
    payload = encode_graphs(graphs, VOCAB, {})
    n = struct.unpack("<Q", payload[len(MAGIC) : len(MAGIC) + 8])[0]
    head = payload[: len(MAGIC) + 8 + n].replace(b'"name":"g"', b'"nime":"g"', 1)  # a flipped bit in a key
    import zstandard

    path = tmp_path / "d.narg"
    path.write_bytes(zstandard.ZstdCompressor().compress(head + payload[len(MAGIC) + 8 + n :]))
    with pytest.raises(CorruptFileError, match="malformed graph records"):
        read_graphs(path)
    path.write_bytes(zstandard.ZstdCompressor().compress(payload[:-3]))  # an array cut short
    with pytest.raises(CorruptFileError, match="unreadable payload"):
        read_graphs(path)
