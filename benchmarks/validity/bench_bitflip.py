"""Flip every bit of a small graph file, one at a time, and count what `read_graphs` does.

`python -m benchmarks.validity.bench_bitflip` prints, for the file format narbench writes (version 2:
checksummed) and the old one (version 1: a bare zstd frame, still read), how many flipped files
load silently (and how many of those load other graphs), raise `CorruptFileError`, or raise
anything else. The goal for version 2: no silent load, no other exception.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from narbench.data.store import CorruptFileError, encode_graphs, read_graphs, write_graphs
from tests.conftest import toy_graphs


def flip_all(path: Path, graphs) -> dict[str, int]:
    data = path.read_bytes()
    out = {"bits": len(data) * 8, "silent": 0, "silent, other graphs": 0, "CorruptFileError": 0, "other error": 0}
    for bit in range(len(data) * 8):
        b = bytearray(data)
        b[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(b))
        try:
            back = read_graphs(path)[0]
        except CorruptFileError:
            out["CorruptFileError"] += 1
            continue
        except Exception:  # noqa: BLE001 - counted: the goal is none
            out["other error"] += 1
            continue
        out["silent"] += 1
        same = len(back) == len(graphs) and all(
            np.array_equal(a.ops, c.ops) and np.array_equal(a.edges, c.edges) and a.name == c.name
            and a.family == c.family for a, c in zip(graphs, back))
        out["silent, other graphs"] += not same
    path.write_bytes(data)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--per-family", type=int, default=5, help="toy graphs per family (4 families)")
    args = ap.parse_args()
    import zstandard

    graphs, vocab = toy_graphs(per_family=args.per_family), [f"op{i}" for i in range(8)]
    with tempfile.TemporaryDirectory() as tmp:
        v2, v1 = Path(tmp) / "v2.narg", Path(tmp) / "v1.narg"
        write_graphs(v2, graphs, vocab, {"v": 1})
        v1.write_bytes(zstandard.ZstdCompressor(level=19).compress(encode_graphs(graphs, vocab, {"v": 1})))
        for name, path in (("version 2 (checksummed)", v2), ("version 1 (bare zstd)", v1)):
            t0 = time.perf_counter()
            counts = flip_all(path, graphs)
            print(f"{name}, {path.stat().st_size} bytes: " + ", ".join(f"{k} {v:,}" for k, v in counts.items())
                  + f" ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
