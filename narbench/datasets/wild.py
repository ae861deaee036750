"""The wild set's graphs: models from pip packages narbench has never looked at, each with the family its
design expects (docs/wild.md), as canonical graphs, so the wild benchmark runs without those packages.

`wild-1.0.narg` (package data, pinned by `EXPECTED_SHA256`) holds one graph per row of
`narbench/data/wild-1.0.csv`, named `wild/<package>/<model>`, extracted as crossimpl's queries are
(canonical 2.2, with design attributes) by `python -m narbench.cli.wild --out DIR`
(`narbench.zoo.wild_graphs`, which needs the packages). The same rows under canonical 2.3 (re-extracted:
convolution groups and dimensions, custom autograd functions traced through) are `wild-1.0-canonical-2.3.narg`
(`--canonical-version 2.3`): `SHIPPED` maps canonical rules to the file, as crossimpl's does; the rows and
their expectations are the ones frozen in 1.0, so an index searches the newest file its rules allow (`readable`;
`wild-1.0-canonical-2.16.narg` since canonical 2.16, whose rule reads raw names). Each graph's `meta` keeps the row's
`package`, pinned `version` and `expected_family` (a family of `real`, several joined by `|`, or
`none`). It is a test set: reported, never used to choose a rule, a setting or an encoder.

`wildval` (docs/wildval.md) is a second table of the same kind, from other packages, and a *validation* set:
rules, settings and the out-of-family flag's threshold are chosen on it, so the wild set stays unread; `wildval2` to
`wildval37` are more, each built after a choice made on the ones before (`wildval19` on, code from GitHub repositories
pinned at commits, `narbench.zoo.wild_sources`). `SETS` names every set, read from the table
`narbench/data/outside-sets.csv` (one row per shipped file, its sha256 pinned there); every function here takes the
set's `name` (default `wild`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narbench.data.store import CorruptFileError, read_graphs as read_graph_file

if TYPE_CHECKING:
    from narbench.data.graph import ArchGraph

#: the test set's name (its files and every other set's: `narbench/data/outside-sets.csv`)
NAME = "wild"
#: the expected family of a model whose design fits no family of the corpus
NONE = "none"
#: the first validation set's name: models from other packages, chosen on (docs/wildval.md)
VALIDATION = "wildval"
#: the table of the sets of outside models and their shipped graph files, one row per file: name, version, role
#: (`test`: reported, never chosen on; `validation`: chosen on), canonical rules, the file's version as it names it,
#: the file, its pinned payload sha256, and what the set was built after (OGB's `master.csv`, as a table)
TABLE = "outside-sets.csv"


@dataclass(frozen=True)
class WildFile:
    """A set's rows' graphs under one set of canonical rules: the set's version as the file names it, the file
    name and its pinned payload sha256."""

    version: str
    artifact: str
    sha256: str | None


@dataclass(frozen=True)
class OutsideSet:
    """A table of models from packages outside the zoos, each with the family its design expects: its name
    (identity prefix and file stem), version, role (`test`: reported, never chosen on; `validation`: chosen
    on), the canonical rules of its first file and its shipped graph files by canonical rules."""

    name: str
    version: str
    role: str
    canonical: str
    files: dict[str, WildFile]

    @property
    def table(self) -> str:
        return f"{self.name}-{self.version}.csv"


def _read_sets(path: str | Path | None = None) -> dict[str, OutsideSet]:
    """Every set of `TABLE` (or of the table at `path`), in its order (a set's first row names the canonical rules of
    its first file); ValueError naming the line of a set given two versions or roles, or two files of one rules."""
    import csv

    path = Path(path) if path is not None else Path(str(resources.files("narbench"))) / "data" / TABLE
    sets: dict[str, OutsideSet] = {}
    with open(path, newline="") as fh:
        for line, rec in enumerate(csv.DictReader(fh), start=2):
            name = rec["name"]
            if name not in sets:
                sets[name] = OutsideSet(name, rec["version"], rec["role"], rec["canonical"], {})
            elif (rec["version"], rec["role"]) != (sets[name].version, sets[name].role):
                raise ValueError(f"{path}:{line}: set {name!r} has two versions or roles")
            if rec["canonical"] in sets[name].files:
                raise ValueError(f"{path}:{line}: set {name!r} has two files under canonical {rec['canonical']}")
            sets[name].files[rec["canonical"]] = WildFile(rec["file_version"], rec["artifact"], rec["sha256"] or None)
    return sets


#: every set of outside models, by name
SETS: dict[str, OutsideSet] = _read_sets()
#: every validation set of outside models, oldest first (what the benchmarks' `--set` choices list)
VALIDATIONS: tuple[str, ...] = tuple(n for n, s in SETS.items() if s.role == "validation")
#: the test set's version, canonical rules of its first file, that file and its sha256, and its files by rules
VERSION = SETS[NAME].version
CANONICAL = SETS[NAME].canonical
SHIPPED: dict[str, WildFile] = SETS[NAME].files
ARTIFACT = SHIPPED[CANONICAL].artifact
#: sha256 of the payload of the shipped `wild-1.0.narg`
EXPECTED_SHA256: str | None = SHIPPED[CANONICAL].sha256


def outside_set(name: str = NAME) -> OutsideSet:
    """The set called `name`; ValueError naming the sets there are."""
    try:
        return SETS[name]
    except KeyError:
        raise ValueError(f"no set of outside models called {name!r}; there are: {', '.join(SETS)}") from None


def shipped_file(canonical: str | None = None, name: str = NAME) -> WildFile:
    """The set's shipped file under canonical `canonical` (default: its first); ValueError naming the versions
    there are."""
    chosen = outside_set(name)
    canonical = chosen.canonical if canonical is None else canonical
    try:
        return chosen.files[canonical]
    except KeyError:
        raise ValueError(f"no {name} graphs under canonical {canonical!r}; there are: {', '.join(chosen.files)}") from None


def readable(name: str = NAME, rules: str | None = None, vocab=None) -> list[str]:
    """The canonical rules of the set's shipped files that an index of canonical `rules` (default: any) reads, newest
    first: none after `rules`, and with `vocab` only those whose canonical vocabulary is `vocab`. A search reads the
    first, a set's newest file it can: a rule on raw names (2.10, 2.11, 2.16) reaches a set's models only through a
    file re-extracted under it, never by passes over an older file."""
    from narbench.data.canonical import VERSIONS, at_least, canonical_vocabulary

    files = [c for c in outside_set(name).files if rules is None or at_least(rules, c)]
    if vocab is not None:
        files = [c for c in files if list(canonical_vocabulary(c)) == list(vocab)]
    return sorted(files, key=VERSIONS.index, reverse=True)


def read_newest(name: str, rules: str, vocab) -> WildGraphs:
    """The set's graphs from its newest shipped file an index of canonical `rules` over `vocab` reads (`readable`'s
    first); ValueError naming the set when it ships none."""
    files = readable(name, rules, vocab)
    if not files:
        raise ValueError(f"{name} ships no file an index of canonical {rules} reads in its vocabulary")
    return read_graphs(canonical=files[0], name=name)


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


def shipped_path(canonical: str | None = None, name: str = NAME) -> Path:
    return Path(str(resources.files("narbench"))) / "data" / shipped_file(canonical, name).artifact


def read_graphs(path: str | Path | None = None, canonical: str | None = None, name: str = NAME) -> WildGraphs:
    """The set's graphs (default: the wild set): the shipped file under canonical `canonical` (default: the
    set's first; checked against its pin) or, given `path`, a local build (unchecked). Needs none of the
    set's packages."""
    chosen = outside_set(name)
    canonical = chosen.canonical if canonical is None else canonical
    pinned = path is None
    path = shipped_path(canonical, name) if path is None else Path(path)
    label = f"{name} {chosen.version}"
    if not path.is_file():
        raise FileNotFoundError(f"{label}: {path} does not exist; build it with the set's packages installed: "
                                f"`python -m narbench.cli.wild --set {name} --canonical-version {canonical} --out DIR` "
                                f"(docs/{name}.md)")
    try:
        graphs, vocab, header, digest = read_graph_file(path, shipped_file(canonical, name).sha256 if pinned else None)
    except CorruptFileError as exc:
        raise CorruptFileError(f"{label}: {exc}; "
                               + ("reinstall narbench to restore the shipped file" if pinned else "rebuild it")) from exc
    families = [families_of(str((g.meta or {}).get("expected_family", g.family))) for g in graphs]
    return WildGraphs(graphs, families, list(vocab), header, digest)
