"""Datasets: a versioned set of graphs with a fixed split, cached on disk and checksummed.

A dataset provider (registered under the entry-point group `narbench.datasets`) subclasses
`DatasetProvider` and implements `build()`; `load()` handles caching, the sha256 check and
the splits. Use `narbench.load_dataset(name)`.

Every dataset has the `standard` split (stratified by family); a provider may add others
(`real` adds `unseen`, whole zoo models on one side) by overriding `DatasetProvider.splits`.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.data.store import CorruptFileError, read_graphs, write_graphs
from narbench.core.cache import cache_dir  # noqa: F401 - re-exported


@dataclass(frozen=True)
class Split:
    """A fixed evaluation split: queries are `test` graphs, the corpus is `train` graphs."""

    train: np.ndarray
    test: np.ndarray
    seed: int
    test_size: float
    name: str = "standard"
    rule: str = ""  # one sentence saying how the split was made (for datasheets)
    #: named subsets of the queries, as positions into `test` (e.g. crossimpl's `exact` and
    #: `reimpl`); results report the metrics of each beside the whole split's
    subsets: dict[str, np.ndarray] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """Provenance for result files: name, rule parameters and sizes."""
        out = {"name": self.name, "seed": self.seed, "test_size": self.test_size,
               "train": int(len(self.train)), "test": int(len(self.test))}
        if self.subsets:
            out["subsets"] = {k: int(len(v)) for k, v in self.subsets.items()}
        return out


def stratified_split(labels: list[str], *, test_size: float = 0.1, seed: int = 0) -> Split:
    """Stratified train/test split by label (scikit-learn).

    Labels with fewer than 2 members cannot be queried meaningfully (a query needs at least
    one relevant corpus item), so they go to the corpus only.
    """
    from sklearn.model_selection import train_test_split

    labels_arr = np.asarray(labels)
    uniq, counts = np.unique(labels_arr, return_counts=True)
    rare = set(uniq[counts < 2].tolist())
    idx = np.arange(len(labels_arr))
    splittable = np.array([lab not in rare for lab in labels_arr], dtype=bool)
    train, test = train_test_split(
        idx[splittable], test_size=test_size, stratify=labels_arr[splittable], random_state=seed
    )
    train = np.sort(np.concatenate([train, idx[~splittable]]))
    rule = (f"stratified by family, {1 - test_size:g}/{test_size:g} (scikit-learn `train_test_split`, seed {seed}); "
            "families with one graph go to the corpus only")
    return Split(train=train.astype(np.int64), test=np.sort(test).astype(np.int64), seed=seed, test_size=test_size,
                 rule=rule)


def group_split(labels: list[str], groups: list[str], *, test_size: float = 0.1, seed: int = 0,
                name: str = "unseen", group_rule: str = "group") -> Split:
    """A split that keeps every group whole: a query's group has no member in the corpus.

    Per label with at least two distinct groups, the groups are ordered by sha256 of
    `"<seed>:<group>"` (fixed on any machine and library version) and taken for the test side
    in that order while the test side holds fewer than `test_size` of the label's graphs,
    always at least one group and never all of them, so every queried label keeps a relevant
    corpus item. Labels with a single group go to the corpus only.
    """
    labels_arr, groups_arr = np.asarray(labels, dtype=object), np.asarray(groups, dtype=object)
    if labels_arr.shape != groups_arr.shape:
        raise ValueError(f"{len(labels_arr)} labels but {len(groups_arr)} groups")
    sizes: dict[tuple[str, str], int] = {}
    for lab, grp in zip(labels_arr.tolist(), groups_arr.tolist()):
        sizes[(lab, grp)] = sizes.get((lab, grp), 0) + 1
    by_label: dict[str, list[str]] = {}
    for lab, grp in sizes:
        by_label.setdefault(lab, []).append(grp)
    test_groups: set[tuple[str, str]] = set()
    for lab, grps in by_label.items():
        if len(grps) < 2:
            continue
        total = sum(sizes[(lab, g)] for g in grps)
        ordered = sorted(grps, key=lambda g: hashlib.sha256(f"{seed}:{g}".encode()).hexdigest())
        taken = 0
        for g in ordered[:-1]:
            if taken >= test_size * total:
                break
            test_groups.add((lab, g))
            taken += sizes[(lab, g)]
    is_test = np.array([(lab, grp) in test_groups for lab, grp in zip(labels_arr.tolist(), groups_arr.tolist())],
                       dtype=bool)
    idx = np.arange(len(labels_arr), dtype=np.int64)
    rule = (f"whole groups ({group_rule}) on one side: per family with at least two groups, groups in the order of "
            f"sha256(\"{seed}:<group>\") go to the queries while they hold under {test_size:g} of the family's graphs "
            "(at least one group, never all); families with one group go to the corpus only")
    return Split(train=idx[~is_test], test=idx[is_test], seed=seed, test_size=test_size, name=name, rule=rule)


def stratified_subset(indices: np.ndarray, labels: np.ndarray, n: int | None, *, seed: int = 0) -> np.ndarray:
    """A seeded subset of `n` of `indices` with each label in proportion (all if n is None).

    Each label's members are shuffled and interleaved by their relative position in their
    label, so any prefix is stratified; unlike scikit-learn's splitters this accepts labels
    with a single member. Returns sorted indices.
    """
    indices = np.asarray(indices, dtype=np.int64)
    if n is None or n >= len(indices):
        return np.sort(indices)
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    key = np.empty(len(indices))
    for lab in np.unique(labels):
        members = np.flatnonzero(labels == lab)
        ranks = rng.permutation(len(members))
        key[members] = (ranks + rng.random()) / len(members)
    return np.sort(indices[np.argsort(key, kind="stable")[:n]])


class UnknownSplitError(KeyError):
    """A split name the dataset does not have; the message lists the ones it has."""

    def __str__(self) -> str:
        return self.args[0]


@dataclass
class GraphDataset:
    """A loaded dataset: graphs, op vocabulary, version, content hash and its fixed splits.

    `split` is the `standard` split; `splits` maps every split's name to its `Split` (at least
    `standard`). The last `query_only` graphs are queries of one split only (`real`'s
    `crossimpl`, `narbench.datasets.crossimpl`): outside every other split, the search index and
    the datasheet's counts; `core_graphs` are the others.
    """

    name: str
    version: str
    vocab: list[str]
    graphs: list[ArchGraph]
    sha256: str
    split: Split
    meta: dict[str, Any] = field(default_factory=dict)
    splits: dict[str, Split] = field(default_factory=dict)
    query_only: int = 0
    #: the dataset's validation set of models from packages outside its sources (`real`: `wildval`, docs/wildval.md),
    #: read on demand: () -> (graphs in their file's vocabulary, that vocabulary, each one's expected families, ()
    #: where none fits); None when it has none. Not part of the dataset's content or hash.
    outside: Callable[[], tuple[list[ArchGraph], list[str], list[tuple[str, ...]]]] | None = None
    #: the same for named sets of outside models, pooled (`real`: `wildval` ... `wildval24`): (names, upto=None) ->
    #: (graphs, vocabulary, expected families), each set's newest file under rules up to `upto` (an index's) where
    #: given; empty when a set ships no file under the dataset's rules. None when it has none.
    outside_sets: Callable[..., tuple[list[ArchGraph], list[str], list[tuple[str, ...]]]] | None = None

    def __post_init__(self) -> None:
        self.splits = {"standard": self.split, **{k: v for k, v in self.splits.items() if k != "standard"}}

    def __len__(self) -> int:
        return len(self.graphs)

    def get_split(self, name: str = "standard") -> Split:
        """The split called `name`; `UnknownSplitError` lists the dataset's splits."""
        if name not in self.splits:
            raise UnknownSplitError(f"dataset {self.name!r} has no split {name!r}; its splits: {', '.join(self.splits)}")
        return self.splits[name]

    @property
    def core_graphs(self) -> list[ArchGraph]:
        """The dataset's own graphs: all but the trailing `query_only` ones."""
        return self.graphs[:len(self.graphs) - self.query_only]

    @property
    def canonical_version(self) -> str | None:
        """The canonical rules its graphs follow (`real`'s op table, `meta["ops"]["version"]`; under
        `index_build.newest_corpus`, the rules they are read under); None for a dataset of raw op names (`nas`)."""
        ops = self.meta.get("ops")
        return ops.get("version") if isinstance(ops, dict) else None

    @property
    def families(self) -> list[str]:
        return sorted({g.family for g in self.graphs})

    @property
    def coarse_labels(self) -> list[str]:
        return sorted({g.coarse for g in self.graphs})

    def family_ids(self) -> np.ndarray:
        index = {f: i for i, f in enumerate(self.families)}
        return np.array([index[g.family] for g in self.graphs], dtype=np.int64)

    def coarse_ids(self) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.coarse_labels)}
        return np.array([index[g.coarse] for g in self.graphs], dtype=np.int64)

    def describe(self, split: str = "standard") -> dict[str, Any]:
        """Provenance for result files (with the split the run used)."""
        return {
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "num_graphs": len(self.graphs),
            "num_ops": len(self.vocab),
            "num_families": len(self.families),
            "split": self.get_split(split).describe(),
            **({"parts": self.meta["parts"]} if "parts" in self.meta else {}),
        }


class DatasetProvider:
    """Base for a registered dataset. Subclasses set `name`, `version` and implement `build`.

    `expected_sha256` pins the content of the default build; a mismatch after a fresh build
    means the generator is not deterministic and is reported as an error (and result files on
    other content are rejected by the leaderboard). `split_names` lists every split `splits()`
    returns, so result files can be checked without loading the data.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = ""
    expected_sha256: ClassVar[str | None] = None
    #: the names `splits()` returns, known without loading the data (result files are checked against them)
    split_names: ClassVar[tuple[str, ...]] = ("standard",)
    #: earlier versions whose result files stay readable (never ranked with this version's):
    #: version -> (pinned sha256, split names)
    previous_versions: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = {}
    split_seed: ClassVar[int] = 0
    test_size: ClassVar[float] = 0.1
    compress_level: ClassVar[int] = 3

    def build(self) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
        """Return (graphs, vocab, header) for this version; header is stored with the data."""
        raise NotImplementedError

    def splits(self, graphs: list[ArchGraph]) -> dict[str, Split]:
        """Every fixed split of this dataset by name; `standard` is stratified by family."""
        return {"standard": stratified_split([g.family for g in graphs], test_size=self.test_size, seed=self.split_seed)}

    def dataset(self, graphs: list[ArchGraph], vocab: list[str], header: dict[str, Any], digest: str) -> GraphDataset:
        """The loaded `GraphDataset` with its splits (exactly those `split_names` declares)."""
        splits = self.splits(graphs)
        if sorted(splits) != sorted(self.split_names):
            raise ValueError(f"dataset {self.name}: splits() returns {', '.join(splits)} but split_names declares "
                             f"{', '.join(self.split_names)}; declare every split in split_names")
        return GraphDataset(self.name, self.version, list(vocab), graphs, digest, splits["standard"], meta=header,
                            splits=splits)

    def cache_path(self, root: Path | None = None) -> Path:
        return (root or cache_dir()) / f"{self.name}-{self.version}.narg"

    def data_path(self) -> Path:
        """The graph file `load` reads (the cache for a generated dataset; it may not exist yet)."""
        return self.cache_path()

    def check_available(self) -> None:
        """Raise FileNotFoundError (saying how to get it) when the data cannot be loaded here.

        Checked before a run trains anything. A generated dataset is always available (`load`
        builds it when it is not cached); one read from a file overrides this.
        """

    def load(self, root: Path | None = None, *, refresh: bool = False) -> GraphDataset:
        """Load from the cache, (re)building it when missing, corrupt or `refresh` is set."""
        path = self.cache_path(root)
        loaded = None
        if path.exists() and not refresh:
            try:
                loaded = read_graphs(path, self.expected_sha256)
            except CorruptFileError as exc:
                warnings.warn(f"dataset cache {path} is corrupt ({exc}); rebuilding it", stacklevel=2)
        if loaded is None:
            graphs, vocab, header = self.build()
            for graph in graphs:  # a malformed record fails here, named, before anything is cached
                graph.validate(num_ops=len(vocab))
            digest = write_graphs(path, graphs, vocab, header, level=self.compress_level)
            if self.expected_sha256 is not None and digest != self.expected_sha256:
                raise CorruptFileError(
                    f"dataset {self.name} {self.version}: freshly built data has sha256 {digest}, "
                    f"expected {self.expected_sha256}; the build is not reproducible here"
                )
            loaded = (graphs, vocab, header, digest)
        return self.dataset(*loaded)


def evaluation_sides(families: np.ndarray, split: "Split", max_corpus: int | None, max_queries: int | None,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(corpus, queries): the indices a run scores on `split` of a dataset whose graphs have `families`,
    with a profile's `max_corpus` / `max_queries` and `seed` (stratified subsets of the fixed split). A
    query is kept only when its family has at least one corpus item. The one rule the runner, the
    leaderboard's bounds and its query clusters all read."""
    fam = np.asarray(families)
    corpus = stratified_subset(split.train, fam[split.train], max_corpus, seed=seed)
    queries = stratified_subset(split.test, fam[split.test], max_queries, seed=seed)
    return corpus, queries[np.isin(fam[queries], fam[corpus])]


def load_dataset(name: str, *, root: str | os.PathLike | None = None, refresh: bool = False) -> GraphDataset:
    """Load a registered dataset by name (`nas`, `real`, or a third party's)."""
    from narbench.core import registry

    provider_cls = registry.load("dataset", name)
    return provider_cls().load(Path(root) if root is not None else None, refresh=refresh)
