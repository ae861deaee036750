"""The canonical op vocabulary: a table from raw autograd node names to canonical ops.

The table is data, `narbench/data/ops.csv` (one row per raw name; OGB's `master.csv` is the
model): `raw` is the autograd node type name as torch records it, `op` the canonical op, and
`unary` the op when the node has at most one data input (the other operand is a constant or a
parameter), where that differs: `-` means the node is elided (spliced through). `note` says why
where a judgment was made. Rules the table encodes:

* aliases of one op are one op: every convolution kernel, `Addmm`/`Mm`-with-a-weight/`Linear`
  (nn.Linear on 2-d and n-d input), `Softmax`/`SafeSoftmax`/`XSoftmax`, `Gelu`/`GeLUFunction`;
* layout is not structure: views, reshapes, permutes, transposes, expands, clones, casts and
  constant padding are elided, so 2.14's `ViewBackward0` and 2.15's `UnsafeViewBackward0` agree;
* scaling does not create structure: add/sub/mul/div/where with one data input are elided;
* `split`/`chunk`/`unbind`/`select`/`slice` are one op, `slice`.

Patterns that a compiler folds (decomposed GELU, the attention core, RMSNorm, LayerNorm) are
folded by `narbench.data.canonical`. A raw name the table does not know maps to `other`
(`UNKNOWN_OP`): never dropped, and reported (`narbench search` names it).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

#: Version of the canonical vocabulary and rewrite rules (`real` 2.0 is built with it).
OPS_VERSION = "2.1"
#: torch versions (major.minor) under which canonical graphs were checked to be identical
#: (tests/test_canonical_models.py pins, benchmarks/validity/bench_reextract.py); the index records them
#: and `narbench search` warns outside them. pyproject.toml's torch range is the same.
TORCH_CHECKED = ("2.13", "2.14", "2.15")
#: The canonical op of a raw name that is not in the table.
UNKNOWN_OP = "other"
#: Marks an elided raw node in the table.
ELIDED = "-"


class OpTableError(ValueError):
    """The op table is malformed; the message names the row."""


@dataclass(frozen=True)
class OpRule:
    raw: str
    op: str  # canonical op, or ELIDED
    unary: str  # op when the node has <= 1 data input ("" = same as op)
    note: str = ""

    def resolve(self, data_inputs: int) -> str:
        """The canonical op (or ELIDED) of a node with `data_inputs` distinct data inputs."""
        if data_inputs <= 1 and self.unary:
            return self.unary
        return self.op


def table_path() -> Path:
    return Path(str(resources.files("narbench"))) / "data" / "ops.csv"


@lru_cache(maxsize=1)
def load_table() -> dict[str, OpRule]:
    """raw name -> rule, read from the packaged table (checked: unique raw names, known columns)."""
    path = table_path()
    rules: dict[str, OpRule] = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["raw", "op", "unary", "note"]:
            raise OpTableError(f"{path}: expected columns raw,op,unary,note; got {reader.fieldnames}")
        for line, row in enumerate(reader, start=2):
            raw, op = row["raw"].strip(), row["op"].strip()
            if not raw or not op or None in row:
                raise OpTableError(f"{path}:{line}: malformed row {row}")
            if raw in rules:
                raise OpTableError(f"{path}:{line}: raw name {raw!r} listed twice")
            rules[raw] = OpRule(raw, op, row["unary"].strip(), row["note"].strip())
    return rules


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """The canonical vocabulary: every op of the table (sorted), then `UNKNOWN_OP`."""
    ops = {r.op for r in load_table().values()} | {r.unary for r in load_table().values()}
    ops -= {ELIDED, ""}
    return tuple(sorted(ops)) + (UNKNOWN_OP,)


@lru_cache(maxsize=1)
def table_sha256() -> str:
    """sha256 of the table file: recorded with every dataset built from it."""
    return hashlib.sha256(table_path().read_bytes()).hexdigest()


def rule(raw: str) -> OpRule | None:
    """The table's rule for a raw autograd name, or None when the table does not know it."""
    return load_table().get(raw)
