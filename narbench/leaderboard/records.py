"""Reading result files and grouping them into leaderboard rows.

A `Record` is one result file; its `Key` says which row it belongs to. `collect` reads every
result file under some folders, `select_runs` keeps one run per (row, seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple

from narbench.metrics import METRICS
from narbench.result import RunResult

#: `init` of a run: trained from scratch, or initialised from another run (config.run.init_from)
SCRATCH, PRETRAINED = "scratch", "pretrained"

#: protocol of a training-free encoder's rows: it saw no labels, so it belongs to every protocol
ANY_PROTOCOL = "any"
DEFAULT_OBJECTIVE = "ce+cl"
SIDE_SUFFIX = ".queries.json.gz"
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

    @property
    def setting(self) -> tuple[str, str, str, str, str]:
        """(dataset, split, profile, device, protocol): one block of each table."""
        return self[:5]


KEYS = Key._fields


@dataclass(frozen=True)
class Record:
    """One result file: the parsed `RunResult` plus the leaderboard's grouping fields."""

    path: Path
    result: RunResult
    #: set by `collect` when results of one dataset name come from different contents
    dataset_label: str | None = None

    @property
    def dataset(self) -> str:
        return self.dataset_label or str(self.result.dataset.get("name", "?"))

    @property
    def dataset_content(self) -> tuple[str, str]:
        return str(self.result.dataset.get("version", "?")), str(self.result.dataset.get("sha256", "?"))

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
                   self.objective, self.init)

    @property
    def sidecar(self) -> Path:
        return self.path.with_name(self.path.name[: -len(".json")] + SIDE_SUFFIX)

    @property
    def embeddings(self) -> Path:
        return self.path.with_name(self.path.name[: -len(".json")] + EMB_SUFFIX)


def _is_result_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(".json") and not path.name.endswith(".queries.json")


def read_record(path: Path) -> Record:
    """Parse one result file; anything malformed raises ValueError naming the file."""
    result = RunResult.read(path)  # ValueError naming the file on bad JSON / fields
    scores = {**(result.metrics if isinstance(result.metrics, dict) else {}),
              **(result.metrics_extra if isinstance(result.metrics_extra, dict) else {})}
    missing = [m for m in METRICS if m not in scores]
    if missing or not isinstance(result.dataset, dict) or not isinstance(result.config, dict):
        raise ValueError(f"{path}: not a valid narbench result file (missing metrics {missing or ''}"
                         f"{'' if isinstance(result.dataset, dict) else ' dataset'}"
                         f"{'' if isinstance(result.config, dict) else ' config'})")
    for m, v in scores.items():
        if not isinstance(v, (int, float)):
            raise ValueError(f"{path}: not a valid narbench result file (metric {m} is {v!r})")
    return Record(path, result)


def collect(dirs: Iterable[str | Path]) -> list[Record]:
    """Every result file under the given directories (recursively), sorted by run_id then path.

    Sidecars (`.queries.json.gz`, `.embeddings.npz`) are skipped; a directory that does not
    exist is an error (FileNotFoundError); a malformed result file raises ValueError naming it.
    """
    seen: set[Path] = set()
    records = []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise FileNotFoundError(f"results directory {d} does not exist")
        for path in sorted(d.rglob("*.json")):
            if not _is_result_file(path) or path.resolve() in seen:
                continue
            seen.add(path.resolve())
            records.append(read_record(path))
    # Never average over different dataset contents: label such groups by version and sha256.
    contents: dict[str, set[tuple[str, str]]] = {}
    for r in records:
        contents.setdefault(r.dataset, set()).add(r.dataset_content)
    records = [r if len(contents[r.dataset]) == 1 else
               Record(r.path, r.result, f"{r.dataset} {r.dataset_content[0]} ({r.dataset_content[1][:8]})")
               for r in records]
    records.sort(key=lambda r: (r.result.run_id, str(r.path)))
    return records


def select_runs(records: Iterable[Record]) -> dict[Key, dict[int, Record]]:
    """Group key -> {seed: record}; of several runs with one seed, the latest (created, run_id)."""
    out: dict[Key, dict[int, Record]] = {}
    for rec in sorted(records, key=lambda r: (r.result.created or "", r.result.run_id, str(r.path))):
        out.setdefault(rec.key, {})[int(rec.result.seed)] = rec
    return dict(sorted(out.items()))
