"""Reading result files and grouping them into leaderboard rows.

A `Record` is one validated result file; its `Key` says which row it belongs to. `collect`
reads and validates every result file under some folders (`narbench.eval.validation`: a file that
fails is rejected, never averaged in; impossible per-query scores included), optionally has each
re-made by a verifier (`narbench.harness.verify.FloorVerifier`, `narbench leaderboard --verify`:
deterministic floors re-run and compared exactly, `Record.verified`), and `select_runs` keeps one
run per (row, seed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from narbench.eval import validation
from narbench.eval.olddefaults import encoder_variant
from narbench.eval.result import RunResult
from narbench.eval.validation import InvalidResultError, KnownDataset, sidecar_path, validate_result

#: `init` of a run: trained from scratch, or initialised from another run (config.run.init_from)
SCRATCH, PRETRAINED = "scratch", "pretrained"

#: protocol of a training-free encoder's rows: it saw no labels, so it belongs to every protocol
ANY_PROTOCOL = "any"
DEFAULT_OBJECTIVE = "ce+cl"
EMB_SUFFIX = ".embeddings.npz"


class Key(NamedTuple):
    """What one leaderboard row (and one line of aggregate.csv) is a result of."""

    dataset: str
    split: str
    profile: str
    device: str
    protocol: str
    encoder: str
    splitter: str
    objective: str
    init: str
    #: the encoder parameters that differ from their defaults (`config.encoder.variant`, an
    #: ablation such as `stage1=False`); '' for the encoder as shipped
    variant: str = ""

    @property
    def setting(self) -> tuple[str, str, str, str, str]:
        """(dataset, split, profile, device, protocol): one block of each table."""
        return self[:5]


KEYS = Key._fields


@dataclass(frozen=True)
class Record:
    """One validated result file: the parsed `RunResult`, its per-query scores, its grouping fields."""

    path: Path
    result: RunResult
    #: metric -> per-query scores from the sidecar (`narbench.eval.validation` checked them against the means)
    per_query: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    #: set by `collect` when results of one dataset name come from different contents
    dataset_label: str | None = None
    #: True when a verifier re-made the file exactly (a deterministic floor re-run by `collect(verify=...)`)
    verified: bool = False

    @property
    def dataset(self) -> str:
        return self.dataset_label or str(self.result.dataset.get("name", "?"))

    @property
    def dataset_content(self) -> tuple[str, str]:
        return str(self.result.dataset.get("version", "?")), str(self.result.dataset.get("sha256", "?"))

    @property
    def query_part(self) -> str | None:
        """sha256 of the query-only part (crossimpl) the run's split scored, None for a split of the corpus file."""
        return (self.result.dataset.get("parts") or {}).get(self.result.split)

    @property
    def device(self) -> str:
        """Device kind: `cuda` or `cpu` (the GPU model and index dropped)."""
        return str(self.result.device).split()[0].split(":")[0] or "?"

    @property
    def objective(self) -> str:
        cfg = self.result.config or {}
        obj = ((cfg.get("encoder") or {}).get("train") or {}).get("objective")
        obj = obj or (cfg.get("run") or {}).get("objective") or ((cfg.get("profile") or {}).get("train") or {}).get("objective")
        return str(obj or DEFAULT_OBJECTIVE)

    @property
    def variant(self) -> str:
        """The run's non-default encoder parameters ('' for none, and for files written before them, but
        for the old value of a default that changed the numbers: `narbench.eval.olddefaults`), then
        `epochs=N` when the run overrode the profile's epochs and `curve=True` for a learning-curve run
        (trained without its validation split; `holdout=...` when that split is not the stratified
        one): rows of their own."""
        cfg = self.result.config or {}
        run = cfg.get("run") or {}
        parts = [encoder_variant(self.result)]
        if run.get("epochs") is not None:
            parts.append(f"epochs={int(run['epochs'])}")
        if run.get("curve"):
            parts.append("curve=True")
        if run.get("holdout", "family") != "family":
            parts.append(f"holdout={run['holdout']}")
        return ",".join(p for p in parts if p)

    @property
    def init(self) -> str:
        """`scratch`, or `pretrained` when the run was initialised from another (config.run.init_from)."""
        return PRETRAINED if ((self.result.config or {}).get("run") or {}).get("init_from") else SCRATCH

    @property
    def trained(self) -> bool:
        """False for a training-free encoder (its result file records no training labels)."""
        return (self.result.config or {}).get("labels") is not None

    @property
    def protocol(self) -> str:
        return str(self.result.protocol) if self.trained else ANY_PROTOCOL

    @property
    def key(self) -> Key:
        r = self.result
        return Key(self.dataset, str(r.split), r.profile, self.device, self.protocol, r.encoder, r.splitter,
                   self.objective, self.init, self.variant)

    @property
    def sidecar(self) -> Path:
        return sidecar_path(self.path)

    @property
    def embeddings(self) -> Path:
        return self.path.with_name(self.path.name[: -len(".json")] + EMB_SUFFIX)


class RejectedResultsError(ValueError):
    """Result files that failed validation; `errors` holds one `InvalidResultError` per file."""

    def __init__(self, errors: list[InvalidResultError]) -> None:
        self.errors = errors
        lines = [f"{len(errors)} result file{'s' if len(errors) > 1 else ''} rejected (nothing was aggregated):"]
        super().__init__("\n".join(lines + [f"  {e}" for e in errors]))


#: `collect`'s `verify`: (path, result, per-query scores, the datasets results may be on) -> True when the
#: file was re-made exactly, False when it cannot be checked; raises `InvalidResultError` when it differs
Verifier = Callable[[Path, RunResult, "dict[str, np.ndarray]", "list[KnownDataset]"], bool]


class NothingToShowError(ValueError):
    """No result file to show: none found, or all of profiles not shown (the message says which)."""


def _is_result_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(".json") and not path.name.endswith(".queries.json")


def read_record(path: str | Path, *, datasets: Iterable[KnownDataset] | None = None) -> Record:
    """Read and validate one result file (`narbench.eval.validation`); `InvalidResultError` says why not."""
    result, per_query = validate_result(path, datasets=datasets)
    return Record(Path(path), result, per_query)


def collect(dirs: Iterable[str | Path], *, datasets: Iterable[KnownDataset] | None = None,
            exclude: Iterable[str | Path] = (), verify: Verifier | None = None,
            keep: Callable[[Record], bool] | None = None) -> list[Record]:
    """Every result file under the given directories (recursively), validated, sorted by run_id then path.

    Sidecars (`.queries.json.gz`, `.embeddings.npz`) are read with their result file. A directory
    that does not exist is an error (FileNotFoundError); result files that fail validation, or two
    files of one run_id, raise `RejectedResultsError` naming every one of them and why.
    `datasets`: the datasets results may be on (default: the registered ones, see `narbench.eval.validation`).
    `exclude`: folders not read when met inside a directory being read (the leaderboard's own output
    folder inside `runs/`), unless that directory is itself inside one of them.
    `verify`: once every file is valid, called for each file `keep` accepts (default: all); one it
    raises `InvalidResultError` for is rejected like an invalid file, one it returns True for is
    `Record.verified`.
    """
    excluded = [Path(e).resolve() for e in exclude]
    datasets = validation.known_datasets() if datasets is None else list(datasets)
    seen: set[Path] = set()
    records: list[Record] = []
    errors: list[InvalidResultError] = []
    by_run_id: dict[str, Path] = {}
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise FileNotFoundError(f"results directory {d} does not exist")
        skip = [e for e in excluded if not d.resolve().is_relative_to(e)]
        for path in sorted(d.rglob("*.json")):
            if not _is_result_file(path) or path.resolve() in seen:
                continue
            if any(path.resolve().is_relative_to(e) for e in skip):
                continue
            seen.add(path.resolve())
            try:
                rec = read_record(path, datasets=datasets)
            except InvalidResultError as exc:
                errors.append(exc)
                continue
            if rec.result.run_id in by_run_id:
                errors.append(InvalidResultError(path, f"run_id {rec.result.run_id!r} is also "
                                                       f"{by_run_id[rec.result.run_id]}: one run, counted once"))
                continue
            by_run_id[rec.result.run_id] = path
            records.append(rec)
    if errors:
        raise RejectedResultsError(errors)
    if verify is not None:
        records = _verified(records, datasets, verify, keep)
    # Never average over different dataset contents: label such groups by version and sha256, and
    # a split with a query-only part (crossimpl) also by that part when runs on one content used several
    # (real 2.2's crossimpl 2.2 and real 2.1's crossimpl 2.1.1 are told apart by the corpus already).
    contents: dict[str, set[tuple[str, str]]] = {}
    parts: dict[tuple, set[str | None]] = {}
    for r in records:
        contents.setdefault(r.dataset, set()).add(r.dataset_content)
        parts.setdefault((r.dataset, r.dataset_content, r.result.split), set()).add(r.query_part)
    labelled = []
    for r in records:
        version, sha = r.dataset_content
        label = r.dataset if len(contents[r.dataset]) == 1 else f"{r.dataset} {version} ({sha[:8]})"
        if r.query_part and len(parts[(r.dataset, r.dataset_content, r.result.split)]) > 1:
            label += f" [{r.result.split} {r.query_part[:8]}]"
        labelled.append(r if label == r.dataset else replace(r, dataset_label=label))
    records = labelled
    records.sort(key=lambda r: (r.result.run_id, str(r.path)))
    return records


def _verified(records: list[Record], datasets: list[KnownDataset], verify: Verifier,
              keep: Callable[[Record], bool] | None) -> list[Record]:
    """The records, each re-made by `verify` where `keep` says so; RejectedResultsError for those that differ."""
    out, errors = [], []
    for rec in records:
        try:
            done = (keep is None or keep(rec)) and verify(rec.path, rec.result, rec.per_query, datasets)
        except InvalidResultError as exc:
            errors.append(exc)
            continue
        out.append(replace(rec, verified=True) if done else rec)
    if errors:
        raise RejectedResultsError(errors)
    return out


def select_runs(records: Iterable[Record]) -> dict[Key, dict[int, Record]]:
    """Group key -> {seed: record}; of several runs with one seed, the latest (created, run_id)."""
    out: dict[Key, dict[int, Record]] = {}
    for rec in sorted(records, key=lambda r: (r.result.created or "", r.result.run_id, str(r.path))):
        out.setdefault(rec.key, {})[int(rec.result.seed)] = rec
    return dict(sorted(out.items()))
