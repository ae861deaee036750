"""How this lease's results were read from the last part of a cut gzip tar whose middle part never came back
(results.tar.gz.04 of .00-.05, over the 64 MiB a device call returns). Kept as the record of that recovery, not
as a tool: paper_sweep.sh now puts results and snapshots in separate files.

A deflate stream can be resumed at a block boundary with a 32 KiB window of zeros standing in for the lost
history: search the part's first bytes, at each of the 8 bit offsets, for a position from which zlib decodes
20 kB without error; decode from there to the end; cut the tar members out of the output. Each per-query sidecar
passed its own gzip CRC, and each result's nine metrics equal the mean of its sidecar's values to the sidecar's
8 decimals, so no byte of them came from the zeros.

    python recover_tail.py results.tar.gz.05 OUTDIR
"""

import gzip
import json
import sys
import zlib
from pathlib import Path

ZEROS = b"\0" * 32768


def shifted(buf: bytes, bits: int) -> bytes:
    return (int.from_bytes(buf, "little") >> bits).to_bytes(len(buf), "little")


def resume_point(data: bytes, search: int = 250_000) -> tuple[int, int]:
    for bits in range(8):
        s = shifted(data[:search + 30_000], bits)
        for p in range(search):
            d = zlib.decompressobj(-15, zdict=ZEROS)
            try:
                if len(d.decompress(s[p:p + 30_000])) > 20_000:
                    return p, bits  # this lease: byte 8917, bit 1 (the earliest of five found)
            except zlib.error:
                continue
    raise SystemExit("no resumable deflate block found")


def members(tail: bytes):
    i = tail.find(b"ustar") - 257
    long = None
    while i >= 0 and i + 512 <= len(tail) and tail[i + 257:i + 262] == b"ustar":
        size = int(tail[i + 124:i + 136].rstrip(b"\0 ") or b"0", 8)
        name = tail[i:i + 100].rstrip(b"\0").decode()
        body = tail[i + 512:i + 512 + size]
        i += 512 + (size + 511) // 512 * 512
        if name == "././@LongLink":
            long = body.rstrip(b"\0").decode()
            continue
        yield (long or name), body
        long = None


def main(part: str, outdir: str) -> None:
    data = Path(part).read_bytes()
    p, bits = resume_point(data)
    tail = zlib.decompressobj(-15, zdict=ZEROS).decompress(shifted(data, bits)[p:])
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for name, body in members(tail):
        fn = Path(name).name
        if fn.endswith(".gz"):
            json.loads(gzip.decompress(body))  # gzip checks its CRC
        elif fn.endswith(".json"):
            assert b"\0" not in body
            json.loads(body)
        else:
            continue
        (out / fn).write_bytes(body)
        print(fn)


if __name__ == "__main__":
    main(*sys.argv[1:3])
