"""The ledger of re-run results: which result files a verifier re-made exactly, by their bytes' sha256.

`narbench leaderboard --verify` re-runs every shown result of a training-free encoder
(`narbench.harness.verify.FloorVerifier`): hours of CPU for the whole leaderboard. Each file it re-makes
exactly is written to `<leaderboard>/verified.csv` (the result file's and its sidecar's sha256, what
was run, the narbench commit that re-ran it, the date) as soon as it is checked, so an interrupted
`--verify` loses nothing and the next one re-runs only what is not in the ledger. A plain
`narbench leaderboard` reads the ledger too: a file whose bytes (result and sidecar) are in it counts as
re-run, any other file (changed by one byte, or new) does not. The ledger vouches for bytes, not for
names: a file someone hands you is `re-run` only when it is byte-identical to one this project re-ran.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from narbench.core import safeio
from narbench.eval.result import RunResult, git_commit
from narbench.eval.validation import KnownDataset, sidecar_path

#: the ledger's file name inside the leaderboard folder
FILE_NAME = "verified.csv"


@dataclass(frozen=True)
class Entry:
    """One result file re-made exactly: its bytes (sha256 of the file and of its sidecar) and what ran."""

    file: str
    sha256: str
    sidecar_sha256: str
    encoder: str
    dataset: str
    split: str
    profile: str
    seed: int
    rerun_commit: str
    verified_on: str


COLUMNS = [f.name for f in fields(Entry)]


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(path: str | Path) -> tuple[str, str]:
    """(sha256 of the result file, sha256 of its sidecar, or '' when it has none)."""
    side = sidecar_path(path)
    return file_sha256(path), file_sha256(side) if side.is_file() else ""


class Ledger:
    """The entries of `path` (a CSV with `COLUMNS`; missing: empty). `add` appends one and writes it at once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.entries: dict[tuple[str, str], Entry] = {}
        if self.path.is_file():
            text = safeio.read_file(self.path, "ledger").decode("utf-8")
            rows = list(csv.DictReader(io.StringIO(text)))
            if rows and set(COLUMNS) - set(rows[0]):
                raise ValueError(f"{self.path}: not a ledger of re-run results (columns {', '.join(COLUMNS)})")
            for row in rows:
                entry = Entry(**{**{k: row[k] for k in COLUMNS}, "seed": int(row["seed"])})
                self.entries[(entry.sha256, entry.sidecar_sha256)] = entry

    def __len__(self) -> int:
        return len(self.entries)

    def knows(self, path: str | Path) -> bool:
        """True when this file and its sidecar, byte for byte, were re-run exactly."""
        return fingerprint(path) in self.entries

    def add(self, path: str | Path, result: RunResult) -> Entry:
        """Record `path` (re-made exactly just now) and append it to the file."""
        sha, side = fingerprint(path)
        entry = Entry(Path(path).name, sha, side, result.encoder, str(result.dataset.get("name", "?")),
                      result.split, result.profile, int(result.seed), git_commit() or "",
                      _dt.date.today().isoformat())
        self.entries[(sha, side)] = entry
        new = not self.path.is_file() or self.path.stat().st_size == 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
            if new:
                writer.writeheader()
            writer.writerow(asdict(entry))
            fh.flush()
            os.fsync(fh.fileno())
        return entry

    def verifier(self, verify=None, progress=None):
        """A `narbench.leaderboard.records.Verifier`: True for a file in the ledger; otherwise `verify`'s
        answer (None: False), and a file `verify` re-made exactly is added."""

        def check(path: Path, result: RunResult, per_query: dict[str, np.ndarray],
                  datasets: Iterable[KnownDataset]) -> bool:
            if self.knows(path):
                return True
            if verify is None:
                return False
            t = time.perf_counter()
            done = verify(path, result, per_query, datasets)
            if done:
                self.add(path, result)
                if progress is not None:
                    progress(f"ledger: {path.name} re-run exactly ({time.perf_counter() - t:.1f} s), "
                             f"{len(self)} files in {self.path}")
            return done

        return check


def merge(paths: Iterable[str | Path], out: str | Path) -> int:
    """Write the union of several ledgers (e.g. of `--verify` runs made side by side) to `out`, sorted by
    file name; returns the number of entries."""
    entries: dict[tuple[str, str], Entry] = {}
    for p in paths:
        entries.update(Ledger(p).entries)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for entry in sorted(entries.values(), key=lambda e: (e.file, e.sha256)):
        writer.writerow(asdict(entry))
    Path(out).write_text(buf.getvalue())
    return len(entries)
