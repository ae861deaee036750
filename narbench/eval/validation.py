"""Validation of result files: nothing is aggregated or compared before it passes.

A result file is trusted only when it is consistent in itself and names what it ran on:

- it parses as a `RunResult` of a schema this narbench reads, and its name is `<run_id>.json`;
- every metric (the nine of the paper's tables and `map_capped@k`) is a finite number in [0, 1];
  so is each optional metric the file holds (`ndcg_paper@k`, absent from files written before it);
  a metric name that is neither (`recall@7`) is refused, not ignored;
- its per-query sidecar `<run_id>.queries.json.gz` holds every metric the file holds for
  `num_queries` queries, each in [0, 1], and their means equal the file's metrics within the
  sidecar's rounding;
- the dataset is a registered provider's name and version with that provider's pinned sha256
  (a provider that pins none, such as a third party's toy dataset, is accepted by name and
  version), and the split is one the provider declares (`DatasetProvider.split_names`);
- the protocol and the profile are ones narbench knows; the seed agrees with `config.run.seed`
  and with the seed written into the run_id;
- where the dataset's content can be loaded here (a registered provider's current version,
  `KnownDataset.load`): its per-query scores are ones a ranking can give (`narbench.eval.bounds`:
  MRR a reciprocal rank, AP@k not falling with k), `num_queries` and `num_corpus` are what the
  profile and seed select on that split, and no score exceeds what the query's relevant count
  allows (MAP@20 = 1.0 on `nas` cannot happen). Data that cannot be loaded here (an earlier
  version, a hand-made declaration such as the tests' arbitrary scores) gets every other check.

A check that fails raises `InvalidResultError` naming the file and the reason. Code that
writes hand-made results on data no provider registers (tests, tools) declares that data by
passing `datasets=`, a collection of `KnownDataset`, instead of the registry's `known_datasets()`
(the test suite declares its hand-made contents this way in `tests/conftest.py`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from narbench.core import safeio
from narbench.eval import bounds
from narbench.eval.metrics import KS, METRICS, PAPER_NDCG
from narbench.eval.relevance import RULE as RELEVANCE_RULE, relevance_labels
from narbench.train.profiles import PROFILES
from narbench.train.protocol import PROTOCOLS
from narbench.eval.result import MIXED_PROTOCOL, SCHEMA_VERSION, SIDECAR_SUFFIX, RunResult

#: the metrics every result file and sidecar must hold: the paper's nine and the capped MAP
REQUIRED_METRICS = (*METRICS, *(f"map_capped@{k}" for k in KS))
#: metrics checked like the required ones when a file holds them (older files do not)
OPTIONAL_METRICS = PAPER_NDCG
#: sidecar values are rounded to 6 decimals (at most 5e-7 off each), so their mean is too
SIDECAR_TOLERANCE = 1e-6
#: float slack above 1.0 for a metric computed as a ratio (NDCG, the rescaled MAP)
_RANGE_SLACK = 1e-9
_SEED_IN_RUN_ID = re.compile(r"-s(\d+)-\d{8}T\d{6}\d*Z$")


class InvalidResultError(ValueError):
    """A result file that must not be used: `path` and `reason` say which and why."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class KnownDataset:
    """A dataset results may be on: its name, version, pinned content (None: not pinned), splits, and
    `load`, a function returning its `GraphDataset` when this machine can load that content (the per-query
    bounds and `narbench leaderboard --verify` need the graphs; None: only the other checks)."""

    name: str
    version: str
    sha256: str | None
    splits: tuple[str, ...] = ("standard",)
    load: Callable[[], Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class _Registered:
    """`KnownDataset.load` of a registered provider (equal for equal names, so its content is cached once)."""

    name: str

    def __call__(self):
        from narbench.data.dataset import load_dataset

        return load_dataset(self.name)


def known_datasets() -> list[KnownDataset]:
    """The registered dataset providers (entry points), as `KnownDataset`s; one that fails to load is left out."""
    from narbench.core import registry

    out = []
    for name in registry.names("dataset"):
        try:
            cls = registry.load("dataset", name)
        except registry.RegistryError:
            continue
        out.append(KnownDataset(cls.name or name, str(cls.version), cls.expected_sha256, tuple(cls.split_names),
                                load=_Registered(name)))
        out += [KnownDataset(cls.name or name, str(v), sha, tuple(splits))
                for v, (sha, splits) in getattr(cls, "previous_versions", {}).items()]
    return out


def sidecar_path(path: str | Path) -> Path:
    """The per-query sidecar of result file `path` (`<run_id>.json` -> `<run_id>.queries.json.gz`)."""
    path = Path(path)
    return path.with_name(path.name[: -len(".json")] + SIDECAR_SUFFIX)


def read_sidecar(path: str | Path) -> dict[str, np.ndarray]:
    """Per-query scores of a sidecar, metric -> float64 array; ValueError naming the file when unreadable."""
    try:
        raw = json.loads(safeio.read_gzip(path, "per-query sidecar"))  # header first, decompression capped
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except safeio.RefusedFileError as exc:
        reason = exc.reason if exc.reason.startswith("not a") else f"not a valid per-query sidecar ({exc.reason})"
        raise ValueError(f"{path}: {reason}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a valid per-query sidecar (not UTF-8 JSON)") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a valid per-query sidecar ({exc})") from exc
    try:
        return {str(k): np.asarray(v, dtype=np.float64) for k, v in raw.items()}
    except (ValueError, TypeError):  # the values are not quoted: the file may be anyone's
        raise ValueError(f"{path}: not a valid per-query sidecar (scores that are not lists of numbers)") from None


def validate_result(path: str | Path, *, datasets: Iterable[KnownDataset] | None = None, check_bounds: bool = True,
                    ) -> tuple[RunResult, dict[str, np.ndarray]]:
    """Read and check result file `path` (see the module docstring); returns (result, per-query scores).

    `datasets`: the data results may be on (default: `known_datasets()`, the registered providers).
    `check_bounds`: also check the scores against the split's relevant counts (loads the dataset once
    per process and content: seconds; `narbench runs` leaves it out). Raises `InvalidResultError` (a
    ValueError) with the file's path and the first problem found.
    """
    path = Path(path)
    try:
        result = RunResult.read(path)
    except ValueError as exc:
        raise InvalidResultError(path, str(exc).removeprefix(f"{path}: ")) from exc
    _check_metrics(path, result)
    _check_fields(path, result)
    matching = _check_dataset(path, result, known_datasets() if datasets is None else datasets)
    per_query = _check_sidecar(path, result)
    if check_bounds:
        _check_bounds(path, result, per_query, matching)
    return result, per_query


def _checked(scores: dict) -> tuple[str, ...]:
    """The metrics a file must have valid values (and per-query scores) for: the required ones and
    the optional ones it holds."""
    return (*REQUIRED_METRICS, *(m for m in OPTIONAL_METRICS if m in scores))


def _check_fields(path: Path, r: RunResult) -> None:
    def bad(reason: str):
        raise InvalidResultError(path, reason)

    if not isinstance(r.schema, int) or not 1 <= r.schema <= SCHEMA_VERSION:
        bad(f"schema {r.schema!r}: this narbench reads result schemas 1 to {SCHEMA_VERSION}")
    if not isinstance(r.run_id, str) or path.name != f"{r.run_id}.json":
        bad(f"the file name does not match its run_id {r.run_id!r} (expected {r.run_id}.json)")
    for name in ("encoder", "splitter", "device", "split", "protocol", "profile"):
        if not isinstance(getattr(r, name), str) or not getattr(r, name):
            bad(f"{name} is {getattr(r, name)!r}, not a name")
    if not isinstance(r.config, dict) or not isinstance(r.dataset, dict):
        bad("config and dataset must be JSON objects")
    if r.profile not in PROFILES:
        bad(f"unknown profile {r.profile!r}; known profiles: {', '.join(PROFILES)}")
    protocols = [*PROTOCOLS, *([MIXED_PROTOCOL] if r.schema == 1 else [])]
    if r.protocol not in protocols:
        bad(f"unknown protocol {r.protocol!r}; known protocols: {', '.join(protocols)}")
    if not isinstance(r.seed, int) or isinstance(r.seed, bool):
        bad(f"seed is {r.seed!r}, not an integer")
    run_seed = (r.config.get("run") or {}).get("seed", r.seed)
    id_seed = _SEED_IN_RUN_ID.search(r.run_id)
    if run_seed != r.seed or (id_seed and int(id_seed.group(1)) != r.seed):
        bad(f"seed {r.seed} disagrees with config.run.seed {run_seed} or the run_id {r.run_id!r}")
    for name in ("num_queries", "num_corpus"):
        value = getattr(r, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            bad(f"{name} is {value!r}, not a positive integer")


def _check_metrics(path: Path, r: RunResult) -> None:
    if not isinstance(r.metrics, dict) or not isinstance(r.metrics_extra, dict):
        raise InvalidResultError(path, "metrics and metrics_extra must be JSON objects")
    known = (*REQUIRED_METRICS, *OPTIONAL_METRICS)
    for where, names in (("metrics", r.metrics), ("metrics_extra", r.metrics_extra)):
        unknown = [m for m in names if m not in known]
        if unknown:
            raise InvalidResultError(path, f"{where} has unknown metric{'s' if len(unknown) > 1 else ''} "
                                           f"{', '.join(map(str, unknown))}; the metrics narbench knows: "
                                           f"{', '.join(known)}")
    scores = {**r.metrics, **r.metrics_extra}
    missing = [m for m in REQUIRED_METRICS if m not in scores]
    if missing:
        raise InvalidResultError(path, f"missing metrics {', '.join(missing)}")
    for m in _checked(scores):
        v = scores[m]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not 0.0 <= v <= 1.0 + _RANGE_SLACK:
            raise InvalidResultError(path, f"metric {m} is {v!r}, outside its range [0, 1]")


def _check_dataset(path: Path, r: RunResult, datasets: Iterable[KnownDataset]) -> list[KnownDataset]:
    name, version, sha = (r.dataset.get(k) for k in ("name", "version", "sha256"))
    datasets = list(datasets)
    named = [d for d in datasets if d.name == name]
    if not named:
        known = sorted({d.name for d in datasets})
        raise InvalidResultError(path, f"dataset {name!r} is not a registered dataset (known: {', '.join(known) or 'none'})")
    versioned = [d for d in named if d.version == str(version)]
    if not versioned:
        raise InvalidResultError(path, f"dataset {name} version {version!r} is not the registered version "
                                       f"{' or '.join(repr(d.version) for d in named)}")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise InvalidResultError(path, f"dataset sha256 {sha!r} is not a sha256 digest")
    matching = [d for d in versioned if d.sha256 in (None, sha)]
    if not matching:
        pins = " or ".join(f"{d.sha256[:16]}..." for d in versioned if d.sha256)
        raise InvalidResultError(path, f"dataset {name} {version} has sha256 {sha[:16]}..., not the pinned {pins} "
                                       "(results on other data are not comparable)")
    splits = sorted({s for d in matching for s in d.splits})
    if r.split not in splits:
        raise InvalidResultError(path, f"dataset {name} has no split {r.split!r}; its splits: {', '.join(splits)}")
    recorded = r.dataset.get("split")
    if isinstance(recorded, dict) and recorded.get("name", r.split) != r.split:
        raise InvalidResultError(path, f"split {r.split!r} disagrees with dataset.split.name {recorded['name']!r}")
    relevance = r.dataset.get("relevance")
    if relevance is not None and relevance != RELEVANCE_RULE:
        raise InvalidResultError(path, f"dataset.relevance {relevance!r} is not this narbench's rule "
                                       f"({RELEVANCE_RULE!r}); results judged otherwise are not comparable")
    return [d for d in matching if r.split in d.splits]


def _check_sidecar(path: Path, r: RunResult) -> dict[str, np.ndarray]:
    side = sidecar_path(path)
    if not side.is_file():
        raise InvalidResultError(path, f"its per-query sidecar {side.name} is missing "
                                       "(the means cannot be checked, nor significance tested)")
    try:
        per_query = read_sidecar(side)
    except ValueError as exc:
        raise InvalidResultError(path, f"sidecar {side.name} is unreadable ({exc.__cause__ or exc})") from exc
    scores = {**r.metrics, **r.metrics_extra}
    for m in _checked(scores):
        values = per_query.get(m)
        if values is None or values.ndim != 1 or len(values) != r.num_queries:
            got = "none" if values is None else f"{values.size}"
            raise InvalidResultError(path, f"sidecar {side.name} has {got} {m} scores for {r.num_queries} queries")
        if not np.all(np.isfinite(values)) or values.min() < 0.0 or values.max() > 1.0 + _RANGE_SLACK:
            raise InvalidResultError(path, f"sidecar {side.name}: a per-query {m} is outside [0, 1]")
        if abs(float(values.mean()) - float(scores[m])) > SIDECAR_TOLERANCE:
            raise InvalidResultError(path, f"metric {m} is {scores[m]!r} but the mean of its {len(values)} per-query "
                                           f"scores in {side.name} is {values.mean():.6f}")
    return per_query


#: (loader, name, version, sha256) -> (family per graph, splits, relevance labels) of that content, or None where
#: it cannot be loaded
_CONTENTS: dict[tuple, tuple[np.ndarray, dict, np.ndarray] | None] = {}
#: (content key, split, max_corpus, max_queries, seed) -> `bounds.Evaluated`
_EVALUATED: dict[tuple, bounds.Evaluated] = {}
#: what a dataset provider's `load` may raise when its data is not here or not loadable
_LOAD_ERRORS = (OSError, ValueError, LookupError, ImportError, RuntimeError)


def load_content(r: RunResult, matching: Iterable[KnownDataset]):
    """The `GraphDataset` result `r` ran on, loaded by the first matching `KnownDataset.load` whose content
    has the result's sha256; None when none can be loaded here. Not cached (the graphs are large)."""
    for known in matching:
        dataset = _load(known, r.dataset.get("sha256"))
        if dataset is not None:
            return dataset
    return None


def _load(known: KnownDataset, sha: str | None):
    if known.load is None:
        return None
    try:
        dataset = known.load()
    except _LOAD_ERRORS:
        return None
    return dataset if getattr(dataset, "sha256", None) == sha else None


def _evaluated(r: RunResult, matching: list[KnownDataset]) -> bounds.Evaluated | None:
    """What `r`'s profile and seed select on its split, from the first loadable content; None if none is."""
    from narbench.train.profiles import get_profile

    sha = r.dataset.get("sha256")
    for known in matching:
        key = (known.load, known.name, known.version, sha)
        if key not in _CONTENTS:
            dataset = _load(known, sha)
            _CONTENTS[key] = None if dataset is None else (
                np.array([g.family for g in dataset.graphs]), dict(dataset.splits), relevance_labels(dataset.graphs))
        if _CONTENTS[key] is None:
            continue
        families, splits, labels = _CONTENTS[key]
        profile = get_profile(r.profile)
        at = (key, r.split, profile.max_corpus, profile.max_queries, r.seed)
        if at not in _EVALUATED:
            _EVALUATED[at] = bounds.evaluated(families, splits[r.split], profile.max_corpus, profile.max_queries, r.seed,
                                              labels)
        return _EVALUATED[at]
    return None


def _check_bounds(path: Path, r: RunResult, per_query: dict[str, np.ndarray], matching: list[KnownDataset]) -> None:
    ev = _evaluated(r, matching)
    if ev is None:
        return
    problem = bounds.shape_problem(per_query)
    if problem:
        raise InvalidResultError(path, f"per-query scores no ranking gives: {problem}")
    where = f"a {r.profile} run with seed {r.seed} on {r.dataset.get('name')} {r.dataset.get('version')} {r.split}"
    if len(ev.relevant) != r.num_queries or ev.num_corpus != r.num_corpus:
        raise InvalidResultError(path, f"num_queries {r.num_queries} and num_corpus {r.num_corpus}, but {where} scores "
                                       f"{len(ev.relevant)} queries against {ev.num_corpus} corpus graphs")
    problem = bounds.bound_problem(per_query, ev.relevant)
    if problem:
        raise InvalidResultError(path, f"{problem} ({where})")
