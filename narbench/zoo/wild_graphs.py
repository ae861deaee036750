"""Extracting the wild set's graphs into `wild-1.0.narg`, so the wild benchmark runs without its packages.

Every row of `narbench/data/wild-1.0.csv` goes through crossimpl's extraction (`narbench.zoo.crossimpl.build`
with the wild set's `QuerySet`): built offline with random weights (`narbench.zoo.wild.build_model`) on the
meta device (the CPU where meta fails), run once on the row's inputs (`make_inputs`: token ids, keyword
inputs), custom autograd functions renamed by `crossimpl-functions.csv`, canonicalised under crossimpl 2.2's
rules with design attributes (or 2.3's, `canonical="2.3"`), named `wild/<package>/<model>`. Unlike crossimpl, no graph is compared with the
corpus (no corpus twins: it is a test set) and none is refused for its share of `other` nodes: the set is
frozen, so a graph that says little is reported (`report`), never dropped. Needs the wild packages
(docs/wild.md); `python -m narbench.cli.wild --out DIR` runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from narbench.datasets.wild import NAME, outside_set, shipped_file
from narbench.zoo.crossimpl import QuerySet, build as build_queries
from narbench.zoo.wild import WildRow, build_model, make_inputs, no_network, read_table, table_path, zoo_modules

#: a graph with fewer nodes than this is listed as tiny: it shows little of the design
TINY = 20
#: a graph with more than this share of `other` nodes (ops no table maps) is listed as mostly unknown
MOSTLY_UNKNOWN = 0.5


def make(row: WildRow, device: str) -> tuple[Any, tuple, dict[str, Any]]:
    """The row's model built on `device` (seed 0 for torch, numpy and `random`, no network) and its inputs
    there. numpy too: s3prl's wav2vec2 draws its pretraining masks from numpy's global generator."""
    import random

    import numpy as np
    import torch

    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    with torch.device(device):
        model = build_model(row)
    zoo = zoo_modules(model)
    if zoo:
        raise RuntimeError(f"it is built from modules of {', '.join(zoo)}")
    args, kwargs = make_inputs(row.inputs, device)
    return model, args, kwargs


def row_meta(row: WildRow) -> dict[str, Any]:
    """What a wild graph's meta adds to crossimpl's: the pinned version and the expected family."""
    return {"version": row.version, "expected_family": row.family}


def query_set(canonical: str | None = None, name: str = NAME) -> QuerySet:
    """The set's rows as crossimpl's build writes them under canonical `canonical` (default: the set's first;
    its file: `SETS`'s; rules the set ships no file of: `<name>-<version>-canonical-<rules>.narg`, a local build
    that nothing pins, e.g. a validation set read under rules newer than its file's)."""
    chosen = outside_set(name)
    canonical = chosen.canonical if canonical is None else canonical
    version = (shipped_file(canonical, name).version if canonical in chosen.files
               else f"{chosen.version}-canonical-{canonical}")
    return QuerySet(name, version, table_path(name), make=make, max_other_share=None, corpus_twins=False,
                    row_meta=row_meta, read_masks=True)


def build(out: str | Path, rows: list[WildRow] | None = None, *, canonical: str | None = None, name: str = NAME,
          progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Extract every row (default: the set's shipped table) under canonical `canonical` (default: the set's
    first) into `<out>/<its file>` (wild, 2.2: `wild-1.0.narg`); crossimpl's summary. A row that fails stops
    the build, named; the network is refused throughout."""
    rows = read_table(name=name) if rows is None else rows
    canonical = outside_set(name).canonical if canonical is None else canonical
    queries = query_set(canonical, name)
    with no_network():
        return build_queries(out, rows, progress=progress, version=canonical, queries=queries)


def notes(record: dict[str, Any]) -> str:
    """`tiny` and `mostly unknown` where they apply, with the most frequent unknown ops."""
    out = []
    if record["nodes"] < TINY:
        out.append(f"tiny (< {TINY} nodes)")
    if record["other_share"] > MOSTLY_UNKNOWN:
        out.append("mostly unknown ops")
    unknown = sorted(record["unknown_ops"].items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    if unknown:
        out.append("unknown: " + ", ".join(f"{op} x{n}" for op, n in unknown))
    return "; ".join(out)


def report(records: list[dict[str, Any]]) -> str:
    """A markdown table: per graph its nodes, share of unknown ops, seconds, device and notes."""
    lines = ["| graph | nodes | unknown ops | seconds | device | notes |", "| --- | ---: | ---: | ---: | --- | --- |"]
    for r in records:
        lines.append(f"| `{r['name']}` | {r['nodes']:,} | {r['other_share']:.1%} | {r['seconds']:.2f} | "
                     f"{r['device']} | {notes(r)} |")
    return "\n".join(lines)


def run_cli(out: Path, canonical: str | None = None, name: str = NAME) -> int:
    """What `python -m narbench.cli.wild` runs: `build` into `out` (progress on stderr), then the file and
    the per-graph table on stdout; 0."""
    summary = build(out, canonical=canonical, name=name, progress=lambda s: print(s, file=sys.stderr, flush=True))
    print(f"wrote {summary['path']}: {summary['graphs']} graphs, sha256 {summary['sha256']}")
    print(report(summary["rows"]))
    return 0
