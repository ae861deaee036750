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

`wildval` (docs/wildval.md) is a second table of the same kind, from other packages, and a *validation* set:
rules, settings and the out-of-family flag's threshold are chosen on it, so the wild set stays unread. `SETS`
names both; every function here takes the set's `name` (default `wild`).
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
EXPECTED_SHA256: str | None = "d0d880cf78eef0542ea3a617204977cd5c7ef1c6f6b3bdca6bcae73486af8f39"


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
                    "5adc4457c825ca8826d738f04ae3b101bf2aae89ba44ef2cda732af0c8f27b7a"),
}


#: the validation set's name: models from other packages, chosen on (docs/wildval.md)
VALIDATION = "wildval"
#: a second validation set from further packages, built after `wildval`'s rules so that no rule was written from it
#: (docs/wildval.md, "wildval2")
VALIDATION2 = "wildval2"
#: a third, from further packages, built after canonical 2.7 (docs/wildval.md, "wildval3")
VALIDATION3 = "wildval3"
#: a fourth, from further packages, built after canonical 2.9 (docs/wildval.md, "wildval4")
VALIDATION4 = "wildval4"
#: a fifth, from further packages, built after the input guesses chosen on wildval 1-4 (docs/wildval.md, "wildval5")
VALIDATION5 = "wildval5"
#: a sixth, from further packages, built after the session that read wildval5 (docs/wildval.md, "wildval6")
VALIDATION6 = "wildval6"
#: a seventh, from further packages, built after the mask and step completions chosen on wildval 1-5 (docs/wildval.md,
#: "wildval7")
VALIDATION7 = "wildval7"
#: an eighth, from further packages, built after the small-image, volume and wide-spectrogram guesses chosen on
#: wildval 1-7 (docs/wildval.md, "wildval8")
VALIDATION8 = "wildval8"
#: every validation set of outside models, oldest first (what the benchmarks' `--set` choices list)
VALIDATIONS = (VALIDATION, VALIDATION2, VALIDATION3, VALIDATION4, VALIDATION5, VALIDATION6, VALIDATION7, VALIDATION8)


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


#: every set of outside models, by name
SETS: dict[str, OutsideSet] = {
    NAME: OutsideSet(NAME, VERSION, "test", CANONICAL, SHIPPED),
    VALIDATION: OutsideSet(VALIDATION, "1.1", "validation", "2.3",
                           {"2.3": WildFile("1.1", f"{VALIDATION}-1.1.narg",
                                                   "43eee260cce77b49cf2dd0400b286898298358af91250d8a184f7224c0d1a947")}),
    VALIDATION2: OutsideSet(VALIDATION2, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION2}-1.0.narg",
                                                    "c550f7611e2b7f7453dec111db961960d5f978c3eb2888fb800193105db9eae3")}),
    VALIDATION3: OutsideSet(VALIDATION3, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION3}-1.0.narg",
                                                    "40d1ae7883ae40f7ac22403832ea4ccab5078d978fa39ce4ff8d54816b577508")}),
    VALIDATION4: OutsideSet(VALIDATION4, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION4}-1.0.narg",
                                                    "8097b7433494a13e583708daad06b6177948476151e7251cb2eb34d5a4984768")}),
    VALIDATION5: OutsideSet(VALIDATION5, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION5}-1.0.narg",
                                                    "954ec088b9930b468b818e5e659e10a8daa49a1416dedfd8fcd1db9cb6d1ca95")}),
    VALIDATION6: OutsideSet(VALIDATION6, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION6}-1.0.narg",
                                                    "97582340852366c3aa41ad57c9195debc8ceb958c945043dd789b980981331e4")}),
    VALIDATION7: OutsideSet(VALIDATION7, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION7}-1.0.narg",
                                                    "3528c81400149a9bd795090ab028e297f411363bde596d2a85766b1127db20f5")}),
    VALIDATION8: OutsideSet(VALIDATION8, "1.0", "validation", "2.3",
                            {"2.3": WildFile("1.0", f"{VALIDATION8}-1.0.narg",
                                                    "17d6852c7aed819da804d51b4a5a7b2f585cfec18ac25992bc664ffe7ccf38f5")}),
}


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
