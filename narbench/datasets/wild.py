"""The wild set's graphs: models from pip packages narbench has never looked at, each with the family its
design expects (docs/wild.md), as canonical graphs, so the wild benchmark runs without those packages.

`wild-1.0.narg` (package data, pinned by `EXPECTED_SHA256`) holds one graph per row of
`narbench/data/wild-1.0.csv`, named `wild/<package>/<model>`, extracted as crossimpl's queries are
(canonical 2.2, with design attributes) by `python -m narbench.cli.wild --out DIR`
(`narbench.zoo.wild_graphs`, which needs the packages). The same rows under canonical 2.3 (re-extracted:
convolution groups and dimensions, custom autograd functions traced through) are `wild-1.0-canonical-2.3.narg`
(`--canonical-version 2.3`): `SHIPPED` maps canonical rules to the file, as crossimpl's does; the rows and
their expectations are the ones frozen in 1.0, so an index searches the file of its own rules. Each graph's `meta` keeps the row's
`package`, pinned `version` and `expected_family` (a family of `real`, several joined by `|`, or
`none`). It is a test set: reported, never used to choose a rule, a setting or an encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narbench.data.store import CorruptFileError, read_graphs as read_graph_file

if TYPE_CHECKING:
    from narbench.data.graph import ArchGraph

NAME = "wild"
VERSION = "1.0"
#: the expected family of a model whose design fits no family of the corpus
NONE = "none"
#: the canonical rules the graphs are written under (crossimpl 2.2's, against `real` 2.2)
CANONICAL = "2.2"
ARTIFACT = f"{NAME}-{VERSION}.narg"
#: sha256 of the payload of the shipped `wild-1.0.narg`
EXPECTED_SHA256: str | None = "bc2166f15c5080ba5deddd7a7d9b8e200e97a6bf604b3e78668f573ce7093f26"


@dataclass(frozen=True)
class WildFile:
    """The wild rows' graphs under one set of canonical rules: the set's version as the file names it, the file
    name and its pinned payload sha256."""

    version: str
    artifact: str
    sha256: str | None


#: canonical rules -> the shipped file of the wild rows' graphs under them
SHIPPED: dict[str, WildFile] = {
    CANONICAL: WildFile(VERSION, ARTIFACT, EXPECTED_SHA256),
    "2.3": WildFile(f"{VERSION}-canonical-2.3", f"{NAME}-{VERSION}-canonical-2.3.narg",
                    "e345b23346600ae7aba07c9a3a7089d986946fe5401ad316af9556ba024f68a6"),
}


def shipped_file(canonical: str = CANONICAL) -> WildFile:
    """The shipped file under canonical `canonical`; ValueError naming the versions there are."""
    try:
        return SHIPPED[canonical]
    except KeyError:
        raise ValueError(f"no {NAME} graphs under canonical {canonical!r}; there are: {', '.join(SHIPPED)}") from None


def families_of(family: str) -> tuple[str, ...]:
    """The families of a `family` cell (`a|b`); () for `none` (no family of the corpus fits)."""
    return () if family == NONE else tuple(family.split("|"))


@dataclass(frozen=True)
class WildGraphs:
    """The wild set's graphs, each one's expected families (() where none fits), their op vocabulary,
    the file's header and its payload sha256."""

    graphs: list[ArchGraph]
    families: list[tuple[str, ...]]
    vocab: list[str]
    header: dict[str, Any]
    sha256: str


def shipped_path(canonical: str = CANONICAL) -> Path:
    return Path(str(resources.files("narbench"))) / "data" / shipped_file(canonical).artifact


def read_graphs(path: str | Path | None = None, canonical: str = CANONICAL) -> WildGraphs:
    """The wild set's graphs: the shipped file under canonical `canonical` (checked against its pin) or,
    given `path`, a local build (unchecked). Needs none of the wild packages."""
    pinned = path is None
    path = shipped_path(canonical) if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{NAME} {VERSION}: {path} does not exist; build it with the wild packages "
                                f"installed: `python -m narbench.cli.wild --canonical-version {canonical} --out DIR` "
                                "(docs/wild.md)")
    try:
        graphs, vocab, header, digest = read_graph_file(path, shipped_file(canonical).sha256 if pinned else None)
    except CorruptFileError as exc:
        raise CorruptFileError(f"{NAME} {VERSION}: {exc}; "
                               + ("reinstall narbench to restore the shipped file" if pinned else "rebuild it")) from exc
    families = [families_of(str((g.meta or {}).get("expected_family", g.family))) for g in graphs]
    return WildGraphs(graphs, families, list(vocab), header, digest)
