"""Every reader of a file a user may be handed, against crafted files (issue 57).

Readers: result files and their `.queries.json.gz` sidecars, `.nari` indexes, `.narg` graph files
(the explorer's uploads are read by the same code), run snapshots, `--init-from` checkpoints, the
taxonomy cache, zoo result payloads, the parts cache's rows, the embeddings `.npz` of a result.
Each gets: a pickle that would write a marker file (never written; one line), a decompression bomb
of about 64 KB (refused, the reader's peak memory growing by less than 256 MiB, measured in a
forked child), a file with a wrong header on a sparse 3 GiB file (refused after a few bytes), and a
truncated file (one line). No message quotes a file's bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import types
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from narbench.core import safeio
from narbench.data.store import CONTAINER_MAGIC, MAGIC, CorruptFileError, read_graphs, write_graphs, write_payload
from tests.conftest import toy_graphs

ROOT = Path(__file__).resolve().parents[2]
VOCAB = [f"op{i}" for i in range(8)]
SECRET = b"s3cr3t:*:20000:0:99999:7:::\n"  # what a server file's first bytes may be; never in a message
GiB = 1 << 30
RSS_LIMIT_MIB = 256


# ---------------------------------------------------------------------------------- crafted files


def zstd_bomb(blocks: int = 16384, declared: int | None = None) -> bytes:
    """A zstd frame of `blocks` RLE blocks of 128 KiB zeros, 4 bytes each: 64 KB expanding to 2 GiB.
    Without `declared` the frame states no content size (a reader must count while streaming)."""
    if declared is None:
        head = bytes([0x00, 0x38])  # no content size; a 128 KiB window
    else:
        head = bytes([0xC0, 0x38]) + struct.pack("<Q", declared)  # an 8-byte content size
    block = struct.pack("<I", (131072 << 3) | (1 << 1))[:3] + b"\x00"
    last = struct.pack("<I", (131072 << 3) | (1 << 1) | 1)[:3] + b"\x00"
    return safeio.ZSTD_MAGIC + head + block * (blocks - 1) + last


def gzip_bomb(mib: int = 64) -> bytes:
    """About 64 KB of gzip expanding to `mib` MiB of zeros."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join([*(comp.compress(zeros) for _ in range(mib)), comp.flush()])


def container(frame: bytes) -> bytes:
    """A version-2 narbench file around `frame`, its checksum right: only the payload is bad."""
    return CONTAINER_MAGIC + hashlib.sha256(frame).digest() + frame


class Plant:
    """Unpickled, it writes its marker file: what a planted pickle could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def sparse(path: Path, head: bytes, size: int = 3 * GiB) -> Path:
    """A file of `size` bytes starting with `head` (sparse: it costs no disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head)
    os.truncate(path, size)
    return path


def one_line(message: str) -> str:  # and no byte of the file quoted
    assert "\n" not in message.strip() and "Traceback" not in message and "s3cr3t" not in message, message
    return message


def test_the_crafted_bombs_are_real():
    """The bombs decompress to what they claim (so a refusal is not of a broken file)."""
    import zstandard

    small = zstd_bomb(blocks=3)
    assert zstandard.ZstdDecompressor().stream_reader(io.BytesIO(small)).read(1 << 20) == bytes(3 * 131072)
    assert len(zstd_bomb()) < 66_000 and len(gzip_bomb()) < 70_000
    assert len(gzip.decompress(gzip_bomb(2))) == 2 << 20


# ---------------------------------------------------------------------------------- memory: one child per case

_CHILD = textwrap.dedent("""
    import json, os, resource, sys, types, warnings
    from pathlib import Path

    def graph(p): from narbench.data.store import read_graphs; return read_graphs(p)
    def index(p): from narbench.search_engine.index_file import read_index; return read_index(p)
    def result(p): from narbench.eval.result import RunResult; return RunResult.read(p)
    def sidecar(p): from narbench.eval.validation import read_sidecar; return read_sidecar(p)
    def snapshot(p):
        from narbench.train.resume import Snapshots
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            state = Snapshots(Path(p).parent, "k").load(0, "toy")
        if state is None and seen:
            raise ValueError(str(seen[0].message))
        return state
    def checkpoint(p): from narbench.train.checkpoint import read; return read(p)
    def zoo(p):
        from narbench.zoo.results import read_result
        got = read_result(Path(p).parents[1], types.SimpleNamespace(slug=Path(p).name[:-len(".json.zst")]))
        if got is None:
            raise ValueError("redone")
        return got
    def parts(p): from narbench.train._partcodec import decode_parts; return decode_parts(Path(p).read_bytes(), bytes(16))
    def taxonomy(p):
        from narbench.zoo.taxonomy_cache import cached
        name, key = Path(p).stem.split("-")[1:3]
        return cached(Path(p).parent, name, key, lambda: [[1]])
    def embeddings(p): from narbench.leaderboard.figures import _load_panel; return _load_panel(Path(p), 10)

    import narbench.data.store, narbench.search_engine.index, narbench.eval.validation, narbench.train.resume  # noqa
    import narbench.train.checkpoint, narbench.zoo.results, narbench.train._partcodec, narbench.zoo.taxonomy_cache  # noqa
    import narbench.leaderboard.figures  # noqa
    out = []
    for reader, path in json.loads(sys.argv[1]):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            try:
                globals()[reader](path)
                outcome, message = "read", ""
            except Exception as exc:
                outcome, message = type(exc).__name__, str(exc)
            grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
            os.write(w, json.dumps([reader, path, outcome, message, grew]).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        out.append(json.loads(data))
    print(json.dumps(out))
""")


def _in_children(cases: list[tuple[str, Path]]) -> list[tuple[str, str, str, str, float]]:
    env = {**os.environ, "NARBENCH_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([(r, str(p)) for r, p in cases])],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="measures each reader in a forked child")
def test_bombs_and_huge_files_are_refused_without_the_memory(tmp_path):
    """Each reader, given a ~64 KB bomb or a sparse 3 GiB file: refused in one line, peak memory
    growth under 256 MiB (the 65,609-byte upload of the review took 2.1 GiB; a whole 3 GiB file read
    before its header was checked took 3 GiB)."""
    bomb, told = zstd_bomb(), zstd_bomb(declared=2 * GiB)
    (tmp_path / "results").mkdir()
    zip_bomb = tmp_path / "bomb.embeddings.npz"
    with __import__("zipfile").ZipFile(zip_bomb, "w", compression=8) as zf:  # deflated: 64 MiB of zeros
        with zf.open("embeddings.npy", "w") as fh:
            for _ in range(64):
                fh.write(bytes(1 << 20))
    cases = [
        ("graph", _write(tmp_path / "v1-bomb.narg", bomb)),  # no declared size: counted while streaming
        ("graph", _write(tmp_path / "v2-bomb.narg", container(told))),  # declares 2 GiB: refused before
        ("graph", _write(tmp_path / "v2-liar.narg", container(zstd_bomb(declared=1 << 20)))),  # declares 1 MiB
        ("index", _write(tmp_path / "bomb.nari", container(bomb))),
        ("sidecar", _write(tmp_path / "r.queries.json.gz", gzip_bomb())),
        ("zoo", _write(tmp_path / "zoo" / "results" / "x.json.zst", bomb)),
        ("parts", _write(tmp_path / "row.bin", bomb)),
        ("embeddings", zip_bomb),
        ("snapshot", _zip_bomb_snapshot(tmp_path / "snap" / "stage0-toy.pt")),
        ("checkpoint", _zip_bomb_snapshot(tmp_path / "bomb.pt")),
        # 3 GiB, the wrong header: refused after a few bytes
        ("graph", sparse(tmp_path / "big" / "g.narg", SECRET)),
        ("index", sparse(tmp_path / "big" / "i.nari", SECRET)),
        ("result", sparse(tmp_path / "big" / "r.json", SECRET)),
        ("sidecar", sparse(tmp_path / "big" / "r.queries.json.gz", SECRET)),
        ("snapshot", sparse(tmp_path / "big" / "snap" / "stage0-toy.pt", SECRET)),
        ("checkpoint", sparse(tmp_path / "big" / "c.pt", SECRET)),
        ("zoo", sparse(tmp_path / "big" / "zoo" / "results" / "x.json.zst", SECRET)),
        ("taxonomy", sparse(tmp_path / "big" / "tax" / "taxonomy-classes-abc.json", SECRET)),
        ("embeddings", sparse(tmp_path / "big" / "e.npz", SECRET)),
        # 3 GiB with the right header: refused by its size, unread
        ("graph", sparse(tmp_path / "big2" / "g.narg", CONTAINER_MAGIC)),
        ("result", sparse(tmp_path / "big2" / "r.json", b'{"run_id": "x", ')),
        ("snapshot", sparse(tmp_path / "big2" / "snap" / "stage0-toy.pt", b"PK\x03\x04", 9 * GiB)),
        ("taxonomy", sparse(tmp_path / "big2" / "tax" / "taxonomy-classes-abc.json", b"{")),
    ]
    got = _in_children(cases)
    assert len(got) == len(cases)
    for reader, path, outcome, message, grew in got:
        assert grew < RSS_LIMIT_MIB, f"{reader} {path}: +{grew:.0f} MiB ({outcome}: {message})"
        if reader == "taxonomy":  # the cache reports the file and recomputes
            assert outcome == "read", (reader, path, outcome, message)
            continue
        assert outcome != "read", f"{reader} read {path}"
        if reader != "zoo":  # a zoo result that cannot be read is redone: nothing to say
            assert path in message or reader in ("parts",), (reader, message)
            one_line(message)
    said = {str(Path(p).relative_to(tmp_path)): m for _, p, _, m, _ in got}
    assert "more than 2 GiB" not in said["v2-bomb.narg"] and "more than 64 MiB once decompressed" in said["v2-bomb.narg"]
    assert "more than 64 MiB once decompressed" in said["v1-bomb.narg"]
    assert "not a narbench graph file" in said["big/g.narg"] and "more than 1 GiB on disk" in said["big2/g.narg"]


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _zip_bomb_snapshot(path: Path) -> Path:
    """A torch file whose storage is deflated: 64 KB on disk, 64 MiB and more in memory."""
    import zipfile

    buf = io.BytesIO()
    torch.save({"format": 2, "x": torch.zeros(16)}, buf)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = bytes(64 << 20) if info.filename.endswith("data/0") else src.read(info)
            dst.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    return path


# ---------------------------------------------------------------------------------- pickles


def test_a_planted_snapshot_pickle_runs_nothing(tmp_path):
    from narbench.train.resume import FORMAT, Snapshots, SnapshotWarning

    marker = tmp_path / "marker"
    snaps = Snapshots(tmp_path / "snap", "k")
    snaps.folder.mkdir()
    torch.save({"format": FORMAT, "key": "k", "stage": "toy", "x": Plant(marker)}, snaps.path(0, "toy"))
    with pytest.warns(SnapshotWarning) as seen:
        assert snaps.load(0, "toy") is None
    assert not marker.exists()
    message = one_line(str(seen[0].message))
    assert "weights_only=True" in message and "moved to stage0-toy.corrupt" in message
    assert snaps.path(0, "toy").with_suffix(".corrupt").is_file()


def test_a_planted_checkpoint_pickle_runs_nothing(tmp_path):
    from narbench.train.checkpoint import CheckpointError, read

    marker = tmp_path / "marker"
    path = tmp_path / "w.pt"
    torch.save({"encoder": "gcn", "vocab": [], "state_dict": {}, "x": Plant(marker)}, path)
    with pytest.raises(CheckpointError) as err:
        read(path, "gcn")
    assert not marker.exists() and "not a checkpoint torch can read" in one_line(str(err.value))
    torch.save({"encoder": "gcn", "vocab": [], "state_dict": {"w": 3}}, path)  # loads, but no tensor
    with pytest.raises(CheckpointError, match="a torch file but not a narbench checkpoint"):
        read(path, "gcn")


def test_pickles_in_every_other_reader_run_nothing(tmp_path):
    """A pickle where a graph file's, an index's, a sidecar's, a result's, a zoo result's, a parts
    row's, the taxonomy cache's or an embeddings file's content should be: nothing runs."""
    import pickle

    import zstandard

    from narbench.eval.result import RunResult
    from narbench.eval.validation import read_sidecar
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.index_file import MAGIC as INDEX_MAGIC, read_index
    from narbench.train._partcodec import decode_parts
    from narbench.zoo.results import read_result
    from narbench.zoo.taxonomy_cache import cached

    marker = tmp_path / "marker"
    blob = pickle.dumps(Plant(marker))
    obj = np.empty(1, dtype=object)
    obj[0] = Plant(marker)
    npy = io.BytesIO()
    np.lib.format.write_array(npy, obj, allow_pickle=True)  # an object array: numpy would unpickle it
    head = json.dumps({"format": 1, "arrays": ["embeddings"], "names": []}).encode()
    write_payload(tmp_path / "i.nari", INDEX_MAGIC + struct.pack("<Q", len(head)) + head + npy.getvalue())
    gh = json.dumps({"header": {}, "vocab": VOCAB, "records": []}).encode()
    write_payload(tmp_path / "g.narg", MAGIC + struct.pack("<Q", len(gh)) + gh + npy.getvalue() * 5)
    _write(tmp_path / "r.queries.json.gz", gzip.compress(blob))
    _write(tmp_path / "r.json", blob)
    for call, name, error in ((read_index, "i.nari", IndexFileError), (read_graphs, "g.narg", CorruptFileError),
                              (read_sidecar, "r.queries.json.gz", ValueError), (RunResult.read, "r.json", ValueError)):
        with pytest.raises(error) as err:
            call(tmp_path / name)
        one_line(str(err.value))
    _write(tmp_path / "zoo" / "results" / "x.json.zst", zstandard.ZstdCompressor().compress(blob))
    assert read_result(tmp_path / "zoo", types.SimpleNamespace(slug="x")) is None  # redone
    frame = zstandard.ZstdCompressor().compress(blob)
    with pytest.raises(ValueError):
        decode_parts(frame, hashlib.blake2b(blob, digest_size=16).digest())
    _write(tmp_path / "tax" / "taxonomy-classes-k.json", blob)
    assert cached(tmp_path / "tax", "classes", "k", lambda: [[1, 2]]) == [[1, 2]]
    assert cached(tmp_path / "tax", "classes", "k", lambda: 1 / 0) == [[1, 2]]  # kept, as JSON, read back
    np.savez(tmp_path / "e.npz", embeddings=obj, family=obj)
    from narbench.leaderboard.figures import _load_panel

    with pytest.raises(ValueError, match="allow_pickle"):
        _load_panel(tmp_path / "e.npz", 10)
    assert not marker.exists()


def test_the_taxonomy_cache_keeps_its_values_exactly(tmp_path):
    from collections import Counter

    from narbench.zoo.taxonomy_cache import cached

    values = {"classes": [[0, 3, 5], [1, 2]], "pairs": np.array([[0, 1], [4, 9]], dtype=np.int64),
              "empty": np.zeros((0, 2), dtype=np.int64), "merged": Counter({("a", "b"): 4, ("a", "z"): 2})}
    for name, value in values.items():
        cached(tmp_path, name, "k", lambda v=value: v)
        back = cached(tmp_path, name, "k", lambda: 1 / 0)
        if isinstance(value, np.ndarray):
            assert back.dtype == value.dtype and np.array_equal(back, value) and back.shape == value.shape
        else:
            assert back == value and type(back) is type(value)
    assert not list(tmp_path.glob("*.pkl"))


# ---------------------------------------------------------------------------------- headers and truncation


def test_wrong_headers_are_refused_without_quoting_the_file(tmp_path):
    from narbench.eval.result import RunResult
    from narbench.eval.validation import read_sidecar
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.index_file import read_index
    from narbench.train.checkpoint import CheckpointError, read

    for call, name, error, said in ((read_graphs, "g.narg", CorruptFileError, "not a narbench graph file"),
                                    (read_index, "i.nari", IndexFileError, "not a narbench index file"),
                                    (RunResult.read, "r.json", ValueError, "not a narbench result file"),
                                    (read_sidecar, "r.queries.json.gz", ValueError, "not a narbench per-query"),
                                    (read, "w.pt", CheckpointError, "is a text file, not a checkpoint")):
        with pytest.raises(error, match=said) as err:
            call(_write(tmp_path / name, SECRET * 10))
        one_line(str(err.value))
    other = _write(tmp_path / "other.json", json.dumps({"password": "hunter2", "user": "s3cr3t"}).encode())
    with pytest.raises(ValueError) as err:  # another program's JSON: its keys are not named
        RunResult.read(other)
    assert "password" not in str(err.value) and "hunter2" not in str(err.value)


def test_truncated_files_are_one_line(tmp_path):
    from narbench.eval.validation import read_sidecar
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.index_file import read_index
    from narbench.train.checkpoint import CheckpointError, read

    write_graphs(tmp_path / "g.narg", toy_graphs(per_family=2), VOCAB, {})
    _write(tmp_path / "v1.narg", (tmp_path / "g.narg").read_bytes()[len(CONTAINER_MAGIC) + 32:])
    _write(tmp_path / "r.queries.json.gz", gzip.compress(json.dumps({"map@20": [0.5] * 1000}).encode()))
    torch.save({"encoder": "gcn", "vocab": [], "state_dict": {"w": torch.zeros(1000)}}, tmp_path / "w.pt")
    for name in ("g.narg", "v1.narg", "r.queries.json.gz", "w.pt"):
        data = (tmp_path / name).read_bytes()
        _write(tmp_path / name, data[: len(data) // 2])
    for call, path, error in ((read_graphs, "g.narg", CorruptFileError), (read_graphs, "v1.narg", CorruptFileError),
                              (read_index, "g.narg", IndexFileError), (read_sidecar, "r.queries.json.gz", ValueError),
                              (read, "w.pt", CheckpointError)):
        with pytest.raises(error) as err:
            call(tmp_path / path)
        assert str(tmp_path / path) in one_line(str(err.value))


def test_a_zstd_window_or_a_declared_size_over_the_cap_is_refused_before_decompressing(tmp_path):
    import zstandard

    with pytest.raises(safeio.RefusedFileError, match=r"more than 64 MiB once decompressed"):
        safeio.zstd_decompress(zstd_bomb(declared=2 * GiB), "x.narg", "graph")
    big_window = safeio.ZSTD_MAGIC + bytes([0x00, (30 - 10) << 3]) + zstd_bomb(blocks=1)[6:]  # a 1 GiB window
    with pytest.raises(safeio.RefusedFileError, match="zstd window"):
        safeio.zstd_decompress(big_window, "x.narg", "graph")
    payload = bytes(range(256)) * 4096  # 1 MiB at a high ratio: below the floor, read
    assert safeio.zstd_decompress(zstandard.ZstdCompressor().compress(payload), "x", "graph") == payload


# ---------------------------------------------------------------------------------- the command line


def test_the_cli_refuses_planted_and_foreign_files_in_one_line(tmp_path, capsys, monkeypatch, no_training):
    from narbench.cli import main

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "marker"
    planted = tmp_path / "w.pt"
    torch.save({"encoder": "gcn", "vocab": [], "state_dict": {}, "x": Plant(marker)}, planted)
    assert main(["run", "--encoder", "gcn", "--profile", "smoke", "--init-from", str(planted), "--no-progress",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    one_line(err)
    assert "not a checkpoint torch can read" in err and not marker.exists()
    shadow = _write(tmp_path / "shadow", SECRET * 4)
    assert main(["search", str(shadow)]) == 2
    err = capsys.readouterr().err
    assert "not a narbench graph file" in one_line(err)
    bomb = _write(tmp_path / "up.narg", zstd_bomb())
    assert main(["search", str(bomb)]) == 2
    assert "more than" in one_line(capsys.readouterr().err)


def test_a_zip_whose_end_record_declares_too_many_entries_is_refused_before_its_directory_is_read(tmp_path):
    """The end record is parsed from the zip format (APPNOTE), not zipfile's private reader: a declared
    count over narbench's cap (or zip64's 0xFFFF marker) is refused; the same file with its true count passes."""
    import struct
    import zipfile

    from narbench.core.safeio import ZIP_MAX_ENTRIES, RefusedFileError, check_zip

    good = tmp_path / "w.embeddings.npz"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("a.npy", b"x" * 10)
    check_zip(good, "embeddings")
    data = bytearray(good.read_bytes())
    at = bytes(data).rfind(b"PK\x05\x06")
    for offset, fmt, declared in ((8, "<HH", (0xFFFF, 0xFFFF)), (12, "<L", (ZIP_MAX_ENTRIES * 256 + 1,))):
        bad_data = bytearray(data)
        struct.pack_into(fmt, bad_data, at + offset, *declared)  # entry counts (zip64 marker), directory size
        bad = tmp_path / f"many{offset}.embeddings.npz"
        bad.write_bytes(bytes(bad_data))
        with pytest.raises(RefusedFileError, match="entries"):
            check_zip(bad, "embeddings")
