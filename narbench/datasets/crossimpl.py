"""Cross-implementation queries of `real`: zoo architectures as other packages implement them.

`narbench/data/crossimpl.csv` lists independent reimplementations of architectures that `real`
holds (pytorchcv, vit-pytorch, MONAI, efficientnet-pytorch): per row the package, the builder
(import path and keyword arguments), the input, the taxonomy family of the architecture it
implements, the zoo model it corresponds to and the reason where a judgment was made.
`narbench build-crossimpl --out DIR` (the optional `crossimpl` extra, `narbench.zoo.crossimpl`)
extracts each row, renames the nodes of custom autograd functions by what they compute
(`narbench/data/crossimpl-functions.csv`: raw name -> the standard autograd node of the same
computation), canonicalises it and writes `crossimpl-2.1.1.narg`, shipped as package data and
pinned by `EXPECTED_SHA256`; loading it needs none of those packages. The build fails on a query
whose share of `other` nodes (raw ops no table knows) exceeds `MAX_OTHER_SHARE`.

Version 2.1.1 (for `real` 2.1) cleaned 2.0: efficientnet-pytorch's memory-efficient Swish (a custom
autograd function, 49-163 nodes per query) was `other` and is now `silu`. Queries isomorphic to a
corpus graph (`exact`: they measure copy detection, not reimplementation) are a subset of their own
(`Split.subsets`), reported apart from the rest (`reimpl`) and per package.

The `crossimpl` split of `real` queries these graphs against every `real` graph: what a search
user does with a model written outside the zoos. Its queries are never tuned against. `attach`
appends them to the loaded `real` graphs (after them, so the indices and the `standard` and
`unseen` splits of the real graphs are unchanged) and sets `GraphDataset.query_only`, which keeps
them out of the search index and the datasheet's counts. The dataset's sha256 then covers both
files' payload digests, kept in `meta["parts"]`; the dataset's sha256 stays the corpus file's.

`NARBENCH_CROSSIMPL_FILE=/path/to/crossimpl-2.1.1.narg` loads a locally built file instead (reported,
not checked against the pin).
"""

from __future__ import annotations

import csv
import json
import os
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from narbench.data.dataset import GraphDataset, Split
from narbench.data.store import CorruptFileError, read_graphs

if TYPE_CHECKING:
    from narbench.data.dataset import DatasetProvider
    from narbench.data.graph import ArchGraph

NAME = "crossimpl"
VERSION = "2.1.1"
TABLE = "crossimpl.csv"
#: the widened table (issue 38): `TABLE`'s 101 rows and 499 more from 13 more packages (600 rows,
#: 17 packages), built under canonical 2.2 against `real` 2.2 (`narbench build-crossimpl
#: --canonical-version 2.2`); how it was curated: docs/crossimpl-2.2-curation.md
WIDE_TABLE = "crossimpl-2.2.csv"
#: custom autograd functions of the packages, renamed by what they compute before canonicalisation
FUNCTIONS_TABLE = "crossimpl-functions.csv"
#: a query with more than this share of `other` nodes fails the build: its graph says too little
#: (2.0's EfficientNets had 20%; after the cleaning no query has any)
MAX_OTHER_SHARE = 0.02
ARTIFACT = f"{NAME}-{VERSION}.narg"
ENV_FILE = "NARBENCH_CROSSIMPL_FILE"
#: sha256 of the payload of the shipped `crossimpl-2.1.1.narg`
EXPECTED_SHA256: str | None = "8c49f7ea6e0159cb4f9cf1321fdcd1cb07e45ef79b3d99601c71bedb85b72ed9"


@dataclass(frozen=True)
class QueryFile:
    """A shipped file of cross-implementation queries: its version, file name and pinned payload sha256."""

    version: str
    artifact: str
    sha256: str | None


#: canonical rules -> the query file built under them (the `crossimpl` split of the `real` of those rules)
SHIPPED: dict[str, QueryFile] = {
    "2.1": QueryFile(VERSION, ARTIFACT, EXPECTED_SHA256),
    # the widened table (600 queries, 17 packages) under canonical 2.2, against real 2.2 (torch 2.14.1)
    "2.2": QueryFile("2.2", f"{NAME}-2.2.narg", "73667b9ba39a87fdca01e0373473c08bcf02c94e0670538989afd8133cd031a6"),
    # the same table under canonical 2.3 (convolution groups and dimensions; custom functions traced through), against
    # real 2.3 (torch 2.14.1, the packages of crossimpl-2.2-requirements.txt)
    "2.3": QueryFile("2.3", f"{NAME}-2.3.narg", "18421b82d4b33e90cf078589200e1eaa3008116577f93032c54af2c7d498a46c"),
}
#: subset of a widened crossimpl: its queries that are 2.1.1's 101 rows (the comparison with 2.1.1)
FIRST_TABLE_SUBSET = "v2.1.1"
COLUMNS = ("package", "model", "builder", "kwargs", "input", "family", "zoo_model", "reason")


@dataclass(frozen=True)
class Row:
    """One reimplemented model: how to build it and what it is."""

    package: str
    model: str
    builder: str  # "module:attribute[.attribute]"
    kwargs: dict[str, Any] = field(default_factory=dict)
    input: str = "image:1x3x224x224"  # "<kind>:<shape, x-separated>"
    family: str = ""
    zoo_model: str = ""  # "<source>/<model>" of the zoo model it corresponds to, if any
    reason: str = ""

    @property
    def identity(self) -> str:
        return f"{NAME}/{self.package}/{self.model}"

    @property
    def input_shape(self) -> tuple[int, ...]:
        kind, _, shape = self.input.partition(":")
        if kind != "image" or not shape:
            raise ValueError(f"{self.identity}: input {self.input!r} is not `image:<shape>`")
        return tuple(int(s) for s in shape.split("x"))


def table_path(version: str = "2.1") -> Path:
    """The row table of the crossimpl built under canonical `version` (2.1: 101 rows; 2.2: widened)."""
    return Path(str(resources.files("narbench"))) / "data" / (TABLE if version == "2.1" else WIDE_TABLE)


def read_table(path: str | os.PathLike | None = None) -> list[Row]:
    """The rows of `crossimpl.csv`; ValueError naming the line for a malformed or repeated row."""
    path = Path(path) if path is not None else table_path()
    rows: list[Row] = []
    seen: set[str] = set()
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: columns {reader.fieldnames}, expected {list(COLUMNS)}")
        for line, rec in enumerate(reader, start=2):
            try:
                row = Row(package=rec["package"], model=rec["model"], builder=rec["builder"],
                          kwargs=json.loads(rec["kwargs"]) if rec["kwargs"] else {}, input=rec["input"],
                          family=rec["family"], zoo_model=rec["zoo_model"], reason=rec["reason"])
                row.input_shape  # noqa: B018 - validates the input column
            except (ValueError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}:{line}: {exc}") from exc
            if not (row.package and row.model and ":" in row.builder and row.family):
                raise ValueError(f"{path}:{line}: package, model, builder (module:attribute) and family are required")
            if row.identity in seen:
                raise ValueError(f"{path}:{line}: {row.package} {row.model} is listed twice")
            seen.add(row.identity)
            rows.append(row)
    return rows


def functions_path() -> Path:
    return Path(str(resources.files("narbench"))) / "data" / FUNCTIONS_TABLE


def read_functions(path: str | os.PathLike | None = None) -> dict[str, str]:
    """Custom autograd function node -> the raw autograd name of what it computes (`crossimpl-functions.csv`).

    ValueError naming the line for a malformed or repeated row, or a target the op table does not map.
    """
    from narbench.data.ops import load_table

    path = Path(path) if path is not None else functions_path()
    known = load_table()
    out: dict[str, str] = {}
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != ("raw", "as", "package", "reason"):
            raise ValueError(f"{path}: columns {reader.fieldnames}, expected ['raw', 'as', 'package', 'reason']")
        for line, rec in enumerate(reader, start=2):
            raw, target = rec["raw"], rec["as"]
            if not (raw and target and rec["reason"]):
                raise ValueError(f"{path}:{line}: raw, as and reason are required")
            if raw in out:
                raise ValueError(f"{path}:{line}: {raw} is listed twice")
            if target not in known:
                raise ValueError(f"{path}:{line}: {target} is not in the op table (narbench/data/ops.csv)")
            out[raw] = target
    return out


def other_share(graph: ArchGraph, vocab: list[str]) -> float:
    """The share of `graph`'s nodes that are `other` (raw ops no table maps)."""
    if "other" not in vocab or graph.num_nodes == 0:
        return 0.0
    return float((np.asarray(graph.ops) == vocab.index("other")).sum()) / graph.num_nodes


def query_subsets(queries: list[ArchGraph], first: set[str] | None = None) -> dict[str, np.ndarray]:
    """Positions (in query order) of each subset: `exact` (isomorphic to a corpus graph, from the
    build's `meta["corpus_twins"]`), `reimpl` (the others), `package:<name>` per package and, given
    `first` (the identities of 2.1.1's rows) for a widened file, `FIRST_TABLE_SUBSET`."""
    exact = np.array([bool((g.meta or {}).get("corpus_twins")) for g in queries], dtype=bool)
    subsets = {"exact": np.flatnonzero(exact), "reimpl": np.flatnonzero(~exact)}
    if first is not None:
        subsets[FIRST_TABLE_SUBSET] = np.array([i for i, g in enumerate(queries) if g.name in first], dtype=np.int64)
    for package in sorted({g.source for g in queries}):
        subsets[f"package:{package}"] = np.array([i for i, g in enumerate(queries) if g.source == package], dtype=np.int64)
    return subsets


def shipped_path(canonical: str = "2.1") -> Path:
    return Path(str(resources.files("narbench"))) / "data" / SHIPPED[canonical].artifact


def artifact_path(canonical: str = "2.1") -> tuple[Path, bool]:
    """(path, pinned): `$NARBENCH_CROSSIMPL_FILE` if set (not pinned), else the file shipped for `canonical`."""
    override = os.environ.get(ENV_FILE)
    return (Path(override), False) if override else (shipped_path(canonical), True)


def read(canonical: str = "2.1") -> tuple[list[ArchGraph], list[str], dict[str, Any], str]:
    """The cross-implementation graphs built under canonical rules `canonical`, their vocabulary, header and
    payload sha256 (checked against the pin)."""
    path, pinned = artifact_path(canonical)
    version = SHIPPED[canonical].version
    if not path.is_file():
        raise FileNotFoundError(f"{NAME} {version}: {path} does not exist; build it with "
                                f"`pip install 'narbench[crossimpl]' && narbench build-crossimpl --out DIR`"
                                + ("" if pinned else f" or unset {ENV_FILE}"))
    try:
        return read_graphs(path, SHIPPED[canonical].sha256 if pinned else None)
    except CorruptFileError as exc:
        raise CorruptFileError(f"{NAME} {version}: {exc}; " + (
            "reinstall narbench to restore the shipped file" if pinned else f"rebuild it or unset {ENV_FILE}")) from exc


def crossimpl_split(num_real: int, num_queries: int, subsets: dict[str, np.ndarray] | None = None,
                    canonical: str = "2.1") -> Split:
    """Queries: the `num_queries` graphs after the first `num_real`; corpus: every real graph."""
    source = ("pytorchcv, vit-pytorch, MONAI, efficientnet-pytorch; `narbench/data/crossimpl.csv`" if canonical == "2.1"
              else f"17 packages outside the zoos; `narbench/data/{WIDE_TABLE}`")
    return Split(subsets=dict(subsets or {}), train=np.arange(num_real, dtype=np.int64),
                 test=np.arange(num_real, num_real + num_queries, dtype=np.int64), seed=0, test_size=0.0,
                 name=NAME, rule=f"queries are independent reimplementations of zoo architectures ({source}), "
                                 "labelled by the taxonomy family of the architecture they implement; the corpus is "
                                 "every real graph; never tuned against")


def attach(provider: DatasetProvider, graphs: list[ArchGraph], vocab: list[str], header: dict[str, Any],
           digest: str, extra: tuple[list[ArchGraph], list[str], dict[str, Any], str] | None = None) -> GraphDataset:
    """`provider`'s dataset of `graphs` with the cross-implementation graphs appended as the `crossimpl` split.

    The provider's own splits are computed on `graphs` alone. The queries are canonical graphs,
    so they are attached only to a dataset on the same vocabulary (real 2.0); any other (real
    1.0's raw names, a hand-made file) loads without the `crossimpl` split, and so, with a warning,
    does one that lacks a query's family (a locally built `real` of a few models). `extra` is the
    cross-implementation data (default: `read()`).
    """
    splits = provider.splits(graphs)
    undeclared = set(splits) - set(provider.split_names)
    if "standard" not in splits or undeclared:
        raise ValueError(f"dataset {provider.name}: splits() returns {', '.join(splits)} but split_names declares "
                         f"{', '.join(provider.split_names)}; declare every split in split_names")
    canonical = str(getattr(provider, "canonical_version", "2.1"))
    if extra is None and (canonical not in SHIPPED or list(vocab) != list(_canonical_vocabulary(canonical))):
        return GraphDataset(provider.name, provider.version, list(vocab), graphs, digest, splits["standard"],
                            meta=header, splits=splits)
    queries, q_vocab, q_header, q_digest = extra if extra is not None else read(canonical)
    if list(q_vocab) != list(vocab):
        raise ValueError(f"{NAME}: its graphs use another op vocabulary than dataset {provider.name} "
                         f"{provider.version}; rebuild it with `narbench build-crossimpl`")
    missing = sorted({g.family for g in queries} - {f for g in graphs for f in g.families})  # 2.3: any family a graph keeps
    if missing:  # a locally built `real` of a few families: usable, without this split
        warnings.warn(f"dataset {provider.name} {provider.version} has no split {NAME}: its query families "
                      f"{', '.join(missing)} have no graph in this dataset (a query needs relevant corpus graphs, "
                      "and a new family would change every split's family ids)", stacklevel=3)
        return GraphDataset(provider.name, provider.version, list(vocab), graphs, digest, splits["standard"],
                            meta=header, splits=splits)
    recorded = any("corpus_twins" in (g.meta or {}) for g in queries)  # 2.1.1 on: the build recorded them
    first = {row.identity for row in read_table(table_path("2.1"))} if canonical != "2.1" else None  # widened only
    splits[NAME] = crossimpl_split(len(graphs), len(queries), query_subsets(queries, first) if recorded else None,
                                   canonical)
    meta = {**header, "parts": {"real": digest, NAME: q_digest},
            NAME: {"num_graphs": len(queries), "version": q_header.get("version"),
                   "versions": q_header.get("versions", {})}}
    return GraphDataset(provider.name, provider.version, list(vocab), [*graphs, *queries],
                        digest, splits["standard"], meta=meta, splits=splits,
                        query_only=len(queries))


def _canonical_vocabulary(version: str = "2.1") -> tuple[str, ...]:
    from narbench.data.canonical import canonical_vocabulary

    return canonical_vocabulary(version)
