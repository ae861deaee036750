"""Which queries of a result depend on each other: the cluster (the bootstrap's resampling unit) and the
family of every query it scored, derived from the dataset's own metadata.

Queries are not independent draws: `real` unseen's 2,032 queries come from 177 held-out models, and a
method scores one model's variants nearly all alike. The leaderboard's bootstrap
(`narbench.leaderboard.significance`) therefore resamples whole clusters, one unit per split (`UNITS`):

- `real` standard and unseen: the source model, every variant and task head of it (the taxonomy's
  model identity, `meta["identity"]`, which `real`'s `unseen` split keeps whole);
- `real` crossimpl (and its subsets `reimpl`, `exact`, `package:<name>`): package x family;
- `nas`: the edit-distance class (its family: `cluster-<c>`, 10 of them).

A dataset outside the table declares its unit with a provider method `query_cluster(graph, split) ->
str`; data no registered provider holds (a test's hand-made files) is declared in `DECLARED`. A query
whose cluster cannot be found is an error (`ClusterError`), never a silent fall back to single queries.

The queries of a result are those the runner selected (`narbench.harness.runner.select`, repeated
here: a split's test side, a profile's stratified subset, only families with a corpus item), checked
against the file's query count. Each (dataset content, split, selection) is derived once per process
and kept in the cache folder (`clusters/`, JSON), so a leaderboard loads each dataset once ever.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from narbench.eval.validation import InvalidResultError
from narbench.leaderboard.records import Record

#: bump when a rule of `UNITS` changes: the cached files of the old rules are not read
RULES = 1
SUBSET_SEP = "/"


def _model(graph) -> str:
    """The model a `real` graph derives from: the taxonomy identity, else `<family>/<zoo model name>`."""
    meta = graph.meta or {}
    return str(meta.get("identity") or f"{graph.family}/{meta.get('model', graph.name)}")


def _package_family(graph) -> str:
    meta = graph.meta or {}
    return f"{meta.get('package') or graph.source} x {graph.family}"


def _family(graph) -> str:
    return str(graph.family)


@dataclass(frozen=True)
class Unit:
    """A resampling unit: its name (as the docs and notes say it) and each graph's cluster label."""

    name: str
    label: Callable[[object], str]


MODEL = Unit("source model", _model)
PACKAGE_FAMILY = Unit("package x family", _package_family)
CLASS = Unit("edit-distance class", _family)
#: (dataset name, split) -> the unit its queries are resampled by (a subset `crossimpl/reimpl`: its split's)
UNITS: dict[tuple[str, str], Unit] = {
    ("real", "standard"): MODEL,
    ("real", "unseen"): MODEL,
    ("real", "crossimpl"): PACKAGE_FAMILY,
    ("nas", "standard"): CLASS,
}


@dataclass(frozen=True)
class QueryGroups:
    """The cluster and family of each query of a result, in the order of its per-query scores.

    `ids`: cluster ids 0..C-1 numbered by first appearance (so one query per cluster is 0, 1, 2, ...);
    `key` names the layout (two results are paired only on one layout)."""

    unit: str
    clusters: tuple[str, ...]
    families: tuple[str, ...]
    ids: np.ndarray = field(init=False, repr=False, compare=False)
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.clusters) != len(self.families):
            raise ValueError(f"{len(self.clusters)} cluster labels but {len(self.families)} families")
        ids = first_appearance_ids(self.clusters)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "key", layout_key(ids))

    @property
    def n_clusters(self) -> int:
        return int(self.ids.max()) + 1 if len(self.ids) else 0


def first_appearance_ids(labels: Sequence) -> np.ndarray:
    """Integer ids of `labels` (any hashable values), numbered in the order each first appears."""
    index: dict = {}
    ids = np.fromiter((index.setdefault(lab, len(index)) for lab in labels), dtype=np.int64, count=len(labels))
    ids.setflags(write=False)
    return ids


def layout_key(ids: np.ndarray) -> str:
    """A name of a cluster layout (ids per query): equal names, equal layouts."""
    return hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest()[:16]


@lru_cache(maxsize=64)
def one_per_query(split: str, n_queries: int) -> QueryGroups:
    """Every query a cluster of its own, one family: for data declared independent (`DECLARED`)."""
    return QueryGroups("query", tuple(map(str, range(n_queries))), ("",) * n_queries)


#: (name, version, sha256) of data no registered provider holds -> (split, number of queries) -> its groups
DECLARED: dict[tuple[str, str, str], Callable[[str, int], QueryGroups]] = {}


class ClusterError(InvalidResultError):
    """A result whose queries' clusters cannot be found: the message says why and what to do."""


def query_groups(record: Record) -> QueryGroups:
    """The clusters and families of the queries `record` scored (see the module docstring).

    Raises ClusterError when the dataset or split is not found, declares no unit, or selects another
    number of queries than the file scored."""
    r = record.result
    ds = r.dataset or {}
    base, _, subset = str(r.split).partition(SUBSET_SEP)
    part = str((ds.get("parts") or {}).get(base) or "")
    try:
        from narbench.train.profiles import get_profile

        profile = get_profile(r.profile)
    except KeyError:
        profile = None
    sel = (None, None, None) if profile is None else (profile.max_corpus, profile.max_queries, r.seed)
    if sel[0] is None and sel[1] is None:  # the whole split: no seed decides the queries
        sel = (None, None, None)
    name, version, sha = str(ds.get("name", "?")), str(ds.get("version", "?")), str(ds.get("sha256", "?"))
    try:
        declared = DECLARED.get((name, version, sha))
        if declared is not None:  # read anew each time: a declaration may change (tests)
            return _checked(declared(str(r.split), int(r.num_queries)), int(r.num_queries), f"dataset {name} {version}")
        if profile is None:
            raise _NotFound(f"profile {r.profile!r} is not known here, so its queries are not either")
        return _groups(name, version, sha, part, base, subset, sel, int(r.num_queries))
    except _NotFound as exc:
        raise ClusterError(record.path, f"cannot find the cluster of its queries: {exc}; the leaderboard's "
                                        "test resamples clusters of dependent queries (`narbench leaderboard "
                                        "--test bootstrap-query` tests single queries instead)") from None


class _NotFound(Exception):
    pass


#: cache path -> the groups derived in this process beside the one asked for (a folder not writable)
_MEMO: dict = {}


@lru_cache(maxsize=None)
def _groups(name: str, version: str, sha: str, part: str, split: str, subset: str, sel: tuple,
            n_queries: int) -> QueryGroups:
    path = _cache_path(name, version, sha, part, split, subset, sel)
    groups = _MEMO.get(path) or _read_cache(path)
    if groups is None:  # load the dataset once: every split and subset it has, derived and kept
        provider, ds = _load(name, version, sha)
        groups = _derive(provider, ds, part, split, subset, sel)
        _write_cache(path, groups)
        _derive_rest(provider, ds, sha, sel)
    return _checked(groups, n_queries, f"dataset {name} {version} split {split}{'/' + subset if subset else ''}")


def _derive_rest(provider, ds, sha: str, sel: tuple) -> None:
    """Derive and keep the groups of every split and subset of `ds` not kept yet (those with a unit)."""
    for split, sp in ds.splits.items():
        part = str((ds.meta.get("parts") or {}).get(split) or "")
        for subset in ("", *sp.subsets):
            path = _cache_path(ds.name, str(ds.version), sha, part, split, subset, sel)
            if path in _MEMO or path.is_file():
                continue
            try:
                _MEMO[path] = _derive(provider, ds, part, split, subset, sel)
            except _NotFound:
                continue
            _write_cache(path, _MEMO[path])


def _checked(groups: QueryGroups, n_queries: int, what: str) -> QueryGroups:
    if len(groups.clusters) != n_queries:
        raise _NotFound(f"{what} selects {len(groups.clusters)} queries, the file scored {n_queries}")
    return groups


def _derive(provider, ds, part: str, split: str, subset: str, sel: tuple) -> QueryGroups:
    """Label the queries of `split` (`subset`) of the loaded dataset `ds` that the runner selected."""
    from narbench.data.dataset import UnknownSplitError, evaluation_sides

    name, version = ds.name, ds.version
    if part and (ds.meta.get("parts") or {}).get(split) != part:
        raise _NotFound(f"its {split} queries (sha256 {part[:16]}...) are not the installed {name} {version}'s")
    hook = getattr(provider, "query_cluster", None)
    unit = UNITS.get((name, split))
    if hook is None and unit is None:
        raise _NotFound(f"dataset {name} declares no cluster of its {split} queries (a `query_cluster(graph, split)` "
                        f"method of its provider, or a row of narbench.leaderboard.clusters.UNITS)")
    try:
        sp = ds.get_split(split)
    except UnknownSplitError as exc:
        raise _NotFound(str(exc)) from None
    fam = np.array([g.family for g in ds.graphs])
    max_corpus, max_queries, seed = sel
    _, queries = evaluation_sides(fam, sp, max_corpus, max_queries, seed or 0)
    if subset:  # positions into the run's queries, as the runner records them (`runrecord.subset_positions`)
        if subset not in sp.subsets:
            raise _NotFound(f"split {split} of {name} {version} has no query subset {subset!r}")
        where = {int(q): i for i, q in enumerate(queries.tolist())}
        queries = queries[[where[q] for q in sp.test[sp.subsets[subset]].tolist() if q in where]]
    graphs = [ds.graphs[i] for i in queries.tolist()]
    label = (lambda g: str(hook(g, split))) if hook is not None else unit.label
    return QueryGroups("cluster" if hook is not None else unit.name, tuple(label(g) for g in graphs),
                       tuple(str(g.family) for g in graphs))


def _load(name: str, version: str, sha: str):
    """(provider, dataset) of the registered provider holding `name` `version` with content `sha` (not kept:
    the graphs are large; `_groups` derives every split of it at once)."""
    from narbench.core import registry

    for entry in registry.names("dataset"):
        try:
            cls = registry.load("dataset", entry)
        except registry.RegistryError:
            continue
        if (cls.name or entry) != name or str(cls.version) != version or cls.expected_sha256 not in (None, sha):
            continue
        provider = cls()
        try:
            ds = provider.load()
        except (OSError, ValueError) as exc:
            raise _NotFound(f"dataset {name} {version} does not load ({exc})") from None
        if ds.sha256 != sha:
            raise _NotFound(f"the installed {name} {version} has sha256 {ds.sha256[:16]}..., the file's "
                            f"{sha[:16]}...")
        return provider, ds
    raise _NotFound(f"no installed dataset provider holds {name} {version} (sha256 {sha[:16]}...)")


def _cache_path(name, version, sha, part, split, subset, sel):
    from narbench.core.cache import cache_dir

    text = json.dumps([RULES, name, version, sha, part, split, subset, list(sel)])
    slug = f"{name}-{version}-{split}{'-' + subset if subset else ''}".replace("/", "~").replace(":", "~")
    return cache_dir() / "clusters" / f"{slug}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"


#: the largest cache file read back (a split of 100,000 queries is far below it)
MAX_CACHE_BYTES = 64 << 20


def _read_cache(path) -> QueryGroups | None:
    """The groups a cache file holds; None when it is missing, too large or not what this module writes."""
    try:
        if path.stat().st_size > MAX_CACHE_BYTES:
            return None
        raw = json.loads(path.read_text())
        groups = QueryGroups(str(raw["unit"]), tuple(raw["clusters"]), tuple(raw["families"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ok = all(isinstance(x, str) for x in (*groups.clusters, *groups.families))
    return groups if ok else None


def _write_cache(path, groups: QueryGroups) -> None:
    """Keep `groups` in the cache folder (atomically); a folder that cannot be written is skipped."""
    from narbench.data.store import atomic_write_bytes

    data = {"unit": groups.unit, "clusters": list(groups.clusters), "families": list(groups.families)}
    try:
        atomic_write_bytes(path, json.dumps(data).encode())
    except OSError:
        pass


def describe_units() -> str:
    """The units of `UNITS` in words: `source model on real standard and unseen, package x family on ...`."""
    by_unit: dict[str, dict[str, list[str]]] = {}
    for (name, split), unit in UNITS.items():
        by_unit.setdefault(unit.name, {}).setdefault(name, []).append(split)
    return ", ".join(f"{unit} on " + ", ".join(f"{name} {' and '.join(splits)}" for name, splits in where.items())
                     for unit, where in by_unit.items())
