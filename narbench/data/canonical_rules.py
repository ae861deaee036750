"""The documented canonical rules: `narbench/data/canonical-rules.csv`, one row per design-level
rewrite (or deliberate non-rewrite) added after 2.0's op table and folds, with its version and
reason (docs/canonical-graphs.md). The rewrite itself (`narbench.data.canonical`) does not read the
table; datasets built under 2.2 or later record the sha256 of their version's rows (`rules_sha256`).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from narbench.data.canonical import VERSIONS, CanonicalError, at_least


@dataclass(frozen=True)
class Rule:
    """A row of `canonical-rules.csv`: a rewrite (or a deliberate non-rewrite) and its reason."""

    rule: str
    version: str
    what: str
    why: str


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The documented canonical rules added after 2.0's op table and folds (`canonical-rules.csv`)."""
    path = Path(str(resources.files("narbench"))) / "data" / "canonical-rules.csv"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["rule", "version", "what", "why"]:
            raise CanonicalError(f"{path}: expected columns rule,version,what,why; got {reader.fieldnames}")
        out = []
        for line, row in enumerate(reader, start=2):
            if None in row or not all((row[k] or "").strip() for k in ("rule", "version", "what", "why")):
                raise CanonicalError(f"{path}:{line}: malformed row {row}")
            if row["version"] not in VERSIONS:
                raise CanonicalError(f"{path}:{line}: unknown version {row['version']!r}")
            out.append(Rule(**{k: row[k].strip() for k in ("rule", "version", "what", "why")}))
    return tuple(out)


def rules_sha256(version: str | None = None) -> str:
    """sha256 of `canonical-rules.csv` as canonical version `version` reads it: its header and the
    rows of that version or older, in file order (None: the whole file). Recorded with a dataset
    built under 2.2 or later. The file only grows by rows of a newer version, so the rules of 2.2
    hash as they did when real 2.2 and crossimpl 2.2 were built (`9c494ea8...`), whatever 2.3 adds."""
    data = (Path(str(resources.files("narbench"))) / "data" / "canonical-rules.csv").read_bytes()
    if version is None:
        return hashlib.sha256(data).hexdigest()
    if version not in VERSIONS:
        raise CanonicalError(f"unknown canonical version {version!r}; known: {', '.join(VERSIONS)}")
    head, *rows = data.splitlines(keepends=True)
    kept = [r for r in rows if at_least(version, next(csv.reader([r.decode()]))[1])]
    return hashlib.sha256(head + b"".join(kept)).hexdigest()
