"""The `real` dataset: computational graphs of real-world architectures (paper section 4.1).

The graphs are extracted from the timm, torchvision and transformers model zoos by
`narbench.zoo.build.build_real` (`narbench build-real --out DIR`), which needs the optional
`zoo` extra, and rewritten onto the canonical op vocabulary (`narbench.data.canonical`).

Registered versions: `real` is 2.3 (`Real23Dataset`, canonical rules 2.3), also registered as `real-2.3`;
2.2 (`Real22Dataset`) and 2.1 (`RealDataset`) stay registered as `real-2.2` and `real-2.1`, so their
committed results stay readable and re-runnable, ranked apart by version. Version 2.1 ships as package
data, `narbench/data/real-2.1.narg`, derived from the raw graphs of the 1.0 extraction
(`narbench/data/real-1.0.narg`, kept as the raw record) with its 1,227 graphs that hold an in-place op
on a view re-extracted (`narbench/data/real-1.0-reextracted.narg`, `narbench.zoo.reextract`) by `narbench
build-real --from narbench/data/real-1.0.narg --patch narbench/data/real-1.0-reextracted.narg --out DIR`;
loading it needs none of the zoo packages; its content is pinned by `expected_sha256`. 2.0 (the same
derivation without the patch) had the same graphs, names, labels and splits; 837 of the 1,227
re-extracted raw graphs changed.

The `crossimpl` split queries the real graphs with independent reimplementations of zoo
architectures (`narbench.datasets.crossimpl`, appended after the real graphs at load time).

`NARBENCH_REAL_FILE=/path/to/real-2.1.narg` loads a locally built file instead (its sha256 is
then reported, not checked against the pin, because zoo versions change graphs).
"""

from __future__ import annotations

import os
import warnings
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from narbench.data.dataset import DatasetProvider, GraphDataset, Split, group_split
from narbench.data.graph import ArchGraph
from narbench.data.store import CorruptFileError, read_graphs
from narbench.datasets.families import model_group

ARTIFACT = "real-2.1.narg"
ENV_FILE = "NARBENCH_REAL_FILE"


class ArtifactMissingError(FileNotFoundError):
    """The shipped `real` dataset file is not in this installation."""


def shipped_path(artifact: str = ARTIFACT) -> Path:
    """Where a packaged artifact lives (default `narbench/data/real-2.1.narg`)."""
    return Path(str(resources.files("narbench"))) / "data" / artifact


class RealDataset(DatasetProvider):
    """Real-world architectures from the model zoos; family = defining module / model type.

    This class is version 2.1, registered as `real-2.1` since `real` moved to 2.2 (`Real22Dataset`)."""

    name = "real"
    version = "2.1"
    #: the packaged file (`narbench/data/`) and the canonical rules its graphs follow
    artifact: ClassVar[str] = ARTIFACT
    canonical_version: ClassVar[str] = "2.1"
    #: the re-extracted raw graphs that replace 1.0's when the artifact is derived (`narbench.zoo.derive`)
    patch_artifact: ClassVar[str] = "real-1.0-reextracted.narg"
    #: sha256 of the payload of the shipped artifact: canonical graphs (op table 2.1) of the 1.0
    #: extraction (72,246 specs, torch 2.14.1, timm 1.0.31, torchvision 0.29.1, transformers 5.23.0)
    #: with its in-place ops on views re-extracted (same torch and zoos).
    expected_sha256: ClassVar[str | None] = "98efc55d90ddf314076dae7301ee5c0931891f1bee325fce12f55784fd2c62e2"
    split_names = ("standard", "unseen", "crossimpl")
    #: Results of earlier versions stay readable and are ranked apart. 1.0: raw autograd graphs,
    #: zoo-layout families. 2.0: 2.1 without the re-extraction (in-place ops on views stored as
    #: `CopySlices`, which torch 2.15 records otherwise); rebuilt by `narbench build-real --from
    #: narbench/data/real-1.0.narg` at a commit whose op table is 2.0.
    previous_versions = {"1.0": ("5dcf0458a4026e6d994563b20293d76b3017035035e994cf2597ee29dcf527ff",
                                 ("standard", "unseen")),
                         "2.0": ("7730ddd8ecee0e2673e46826421b03345e0addf4b6e5484775fb03b185dca8ae",
                                 ("standard", "unseen", "crossimpl"))}

    def artifact_path(self) -> tuple[Path, bool]:
        """(path, pinned): the env override if set (not pinned), else the shipped file."""
        override = os.environ.get(ENV_FILE)
        if override:
            return Path(override), False
        return shipped_path(self.artifact), True

    def data_path(self) -> Path:
        return self.artifact_path()[0]

    def check_available(self) -> None:
        path, pinned = self.artifact_path()
        if not path.is_file():
            where = f"${ENV_FILE} points to {path}, which does not exist" if not pinned else \
                f"the packaged artifact {path} is missing from this installation"
            raise ArtifactMissingError(
                f"dataset {self.name} {self.version}: {where}. Build it with "
                f"`pip install 'narbench[zoo]' && narbench build-real --out DIR` (hours of CPU time; "
                f"resumable), then copy DIR/{self.artifact} to {shipped_path(self.artifact)} or set "
                f"{ENV_FILE}=DIR/{self.artifact}."
            )

    def _read(self) -> tuple[list[ArchGraph], list[str], dict[str, Any], str]:
        self.check_available()
        path, pinned = self.artifact_path()
        expected = self.expected_sha256 if pinned else None
        if pinned and expected is None:
            warnings.warn(f"dataset {self.name} {self.version}: no sha256 is pinned yet; "
                          f"loading {path} unchecked", stacklevel=3)
        try:
            return read_graphs(path, expected)
        except CorruptFileError as exc:
            hint = ("reinstall narbench to restore the shipped file" if pinned else
                    f"rebuild it with `narbench build-real` or unset {ENV_FILE}")
            raise CorruptFileError(f"dataset {self.name} {self.version}: {exc}; {hint}") from exc

    def build(self) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
        graphs, vocab, header, _ = self._read()
        return graphs, vocab, header

    def splits(self, graphs: list[ArchGraph]) -> dict[str, Split]:
        """`standard` (stratified by family) and `unseen` (whole models on one side).

        `unseen` groups graphs by `model_group`: since 2.0 the taxonomy's model identity (aliases
        across zoos and renamed copies merged), every graph derived from it (all its variants:
        depth, stage depth, heads, activation, bias, pooling, headless, task heads) on the same
        side, so a query is a model none of whose variants is in the corpus; a family keeps
        queries only where it has at least two identities.
        """
        out = super().splits(graphs)
        identity = all("identity" in g.meta for g in graphs)
        rule = ("a group is one model identity from the taxonomy: aliases across zoos and renamed copies merged, "
                "every variant and task head included") if identity else \
            "a group is one zoo model: `<family>/<model name>`, every variant and task head of it included"
        out["unseen"] = group_split([g.family for g in graphs], [model_group(g) for g in graphs],
                                    test_size=self.test_size, seed=self.split_seed, name="unseen", group_rule=rule)
        return out

    def identity_unseen(self, graphs: list[ArchGraph]) -> tuple[list[ArchGraph], Split]:
        """`unseen` grouped by the taxonomy's model identity (`narbench.datasets.taxonomy`), for real 2.0.

        Returns the graphs relabelled by `narbench/data/taxonomy-real.csv` (family per paper,
        coarse, `meta['identity']`) and the split that keeps every identity (aliases across zoos
        and renamed copies merged) on one side. real 1.0's committed `unseen` (`splits`) is
        unchanged; a new dataset version switches to this.
        """
        from narbench.datasets import taxonomy

        relabelled = taxonomy.relabel(graphs)
        return relabelled, taxonomy.identity_split(relabelled, test_size=self.test_size, seed=self.split_seed)

    def dataset(self, graphs: list[ArchGraph], vocab: list[str], header: dict[str, Any], digest: str) -> GraphDataset:
        """The splits of `graphs`, plus the `crossimpl` queries appended after them (`narbench.datasets.crossimpl`)."""
        from narbench.datasets import crossimpl

        return crossimpl.attach(self, graphs, vocab, header, digest)

    def load(self, root: Path | None = None, *, refresh: bool = False) -> GraphDataset:
        """Read the artifact directly (it is already a checksummed file; nothing is cached)."""
        return self.dataset(*self._read())


class Real22Dataset(RealDataset):
    """`real` 2.2, registered as `real-2.2` (it was `real` until 2.3).

    The same 21,630 specs under canonical rules 2.2 (design-level equivalences: a Linear written as a
    non-overlapping convolution, patch embeddings, split and fused projections are one pattern; a
    causal mask is kept; docs/canonical-graphs.md), derived from the raw graphs of the 1.0 extraction
    re-extracted with design attributes (`narbench/data/real-1.0-reextracted-2.2.narg`) by `narbench
    build-real --from narbench/data/real-1.0.narg --patch narbench/data/real-1.0-reextracted-2.2.narg
    --canonical-version 2.2 --out DIR`, and labelled by the taxonomy table as of 2.2 (memberships
    fixed: docs/datasets.md). Its `crossimpl` split queries crossimpl 2.2 (`narbench/data/crossimpl-2.2.narg`:
    the widened table, 600 queries from 17 packages, built under 2.2, with 2.1.1's 101 as the subset
    `v2.1.1`); results record `real` version 2.2.
    """

    version = "2.2"
    artifact = "real-2.2.narg"
    canonical_version = "2.2"
    #: sha256 of the payload of `narbench/data/real-2.2.narg`
    expected_sha256 = "115ecfa4e50ea97b7e82376d213b207859725e56ab67b2e718540eeca8c0bbee"
    patch_artifact = "real-1.0-reextracted-2.2.narg"
    #: 2.1 and the versions before it are registered with `real-2.1` (`RealDataset.previous_versions`)
    previous_versions = {}
    split_names = (*RealDataset.split_names, "novel")

    def splits(self, graphs: list[ArchGraph]) -> dict[str, Split]:
        """2.1's splits, and `novel`: whole families held out (`narbench.datasets.novel`; 2.2 on)."""
        from narbench.datasets.novel import NAME, novel_split

        return {**super().splits(graphs), NAME: novel_split(graphs, seed=self.split_seed)}


class Real23Dataset(Real22Dataset):
    """`real` 2.3, the current version: registered as `real` (and as `real-2.3`, to pin it by name).

    Canonical rules 2.3, and a graph that specs of several families share keeps them all (`ArchGraph.families`,
    primary first: the first spec's family, the one 2.2 kept; a hit is relevant to a query when they share a
    family, `narbench.eval.relevance`). Derived like 2.2 by `narbench
    build-real --from narbench/data/real-1.0.narg --patch <2.3 re-extraction> --canonical-version 2.3`
    (`narbench.zoo.derive` keeps families from 2.3 on). `unseen` keeps whole the model identities that share
    a graph (`narbench.datasets.families`); `standard` is stratified by the primary family, as before.
    """

    version = "2.3"
    artifact = "real-2.3.narg"
    canonical_version = "2.3"
    #: sha256 of the payload of `narbench/data/real-2.3.narg`
    expected_sha256 = "ec83856c9cd3ca94079bb9fe0d669052b4f1cb02b76e4fd846a33206fcb5db36"
    #: 2.2's re-extraction with the graphs holding a convolution or a custom function re-extracted under 2.3's
    #: extraction (groups and dimensions; functions traced through): `narbench.zoo.reextract.overlay`
    patch_artifact = "real-1.0-reextracted-2.3.narg"

    def dataset(self, graphs: list[ArchGraph], vocab: list[str], header: dict[str, Any], digest: str) -> GraphDataset:
        """2.2's, with the validation set of outside models (`wildval`) read on demand (`GraphDataset.outside`)."""
        ds = super().dataset(graphs, vocab, header, digest)
        ds.outside = partial(outside_models, self.canonical_version)
        ds.outside_sets = partial(outside_models, self.canonical_version)
        return ds

    def splits(self, graphs: list[ArchGraph]) -> dict[str, Split]:
        """2.2's splits, `unseen` grouped by identities that share a graph (`families.identity_groups`), the groups
        whose families chose different sides in the corpus (`families.whole_group_split`)."""
        from narbench.datasets.families import identity_groups, whole_group_split

        out = super().splits(graphs)
        out["unseen"] = whole_group_split(
            [g.family for g in graphs], identity_groups(graphs), test_size=self.test_size, seed=self.split_seed,
            name="unseen", group_rule="a group is the model identities (taxonomy: aliases and renamed copies merged, "
                                      "every variant and task head included) joined by a graph they share")
        return out


#: the `real` version the taxonomy tables (`narbench.datasets.taxonomy`) describe: the newest shipped
NEWEST = Real23Dataset


def outside_models(canonical: str, names: tuple[str, ...] | None = None, upto: str | None = None
                   ) -> tuple[list[ArchGraph], list[str], list[tuple[str, ...]]]:
    """The graphs of the sets of outside models `names` (default `wildval` alone) under canonical rules `canonical`,
    pooled, their vocabulary and each one's expected families (() where none fits); all empty when one of them ships
    no file under those rules or their vocabularies differ. `upto` (an index's rules): each set's newest file under
    rules up to those, in `canonical`'s vocabulary (`narbench.datasets.wild.readable`), so a rule on raw names reaches
    the models through the file re-extracted under it; a set first extracted after `canonical` is read so too, and a
    set with no file those rules read is left out (all empty when none has one)."""
    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets.wild import VALIDATION, outside_set, read_graphs as read_outside, readable

    graphs: list[ArchGraph] = []
    vocab: list[str] | None = None
    families: list[tuple[str, ...]] = []
    for name in names or (VALIDATION,):
        if upto is None and canonical not in outside_set(name).files:
            return [], [], []
        newest = [canonical] if upto is None else readable(name, upto, canonical_vocabulary(canonical))
        if not newest:  # rules older than the set's file: not read
            continue
        val = read_outside(canonical=newest[0], name=name)
        if vocab is not None and list(val.vocab) != vocab:
            return [], [], []
        vocab = list(val.vocab)
        graphs += list(val.graphs)
        families += list(val.families)
    return graphs, vocab or [], families
