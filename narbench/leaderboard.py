"""Leaderboard: aggregate result files over seeds, mirror the paper's Tables 1-4, plot, publish.

`write_leaderboard(results_dirs, out_dir)` reads every result file under `<out_dir>/results/`
and the extra directories, and regenerates `<out_dir>/aggregate.csv`, `aggregate.json`,
`plots/*.png` and `README.md`. The output depends only on the result files: same inputs give
byte-identical markdown and CSV (no timestamps, sorted iteration, fixed float formatting).

Grouping: one leaderboard row per `Key` (dataset, split, profile, device kind, protocol,
encoder, splitter, objective, init); several runs of one row with the same seed count once
(the latest by `created`, then `run_id`). A table block is one *setting* (dataset, split,
profile, device kind, protocol): runs of different protocols are never ranked together. A
training-free encoder saw no labels, so its rows (protocol `any`) appear in the block of every
protocol of their dataset / split / profile / device kind. Significance (Tables 1 and 2):
ranx's paired Student's t-test between the row with the best mean NDCG@20 and every other
row of the block, on per-query scores from the `.queries.json.gz` sidecars, seed-matched
(only the seeds both rows have) with the queries pooled over those seeds.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import numpy as np

from narbench.metrics import METRICS
from narbench.result import RunResult
from narbench.store import atomic_write_bytes

#: `init` of a run: trained from scratch, or initialised from another run (config.run.init_from)
SCRATCH, PRETRAINED = "scratch", "pretrained"

#: protocol of a training-free encoder's rows: it saw no labels, so it belongs to every protocol
ANY_PROTOCOL = "any"


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
EXTRA = tuple(f"map_capped@{k}" for k in (20, 50, 100))
ALL_METRICS = METRICS + EXTRA
# Table columns: ranx's nine metrics, with the capped MAP next to ranx's MAP.
COLUMNS = (*METRICS[:6], *EXTRA, *METRICS[6:])
HEADERS = {**{m: m.upper() for m in METRICS}, **{m: f"MAPc@{m.split('@')[1]}" for m in EXTRA}}
ALPHA = 0.05
SIG_MARK = "†"
DEFAULT_OBJECTIVE = "ce+cl"
SIDE_SUFFIX = ".queries.json.gz"
EMB_SUFFIX = ".embeddings.npz"

# Published numbers of Pei et al. (ICLR 2024), Tables 1-4, on *their* data (not ours):
# MRR@20/50/100, MAP@20/50/100, NDCG@20/50/100 per row. Their MAP is the min(k, |R|)
# convention, comparable with our `map_capped@k`, not with ranx's `map@k`.
PAPER: dict[str, dict[str, dict[str, tuple[float, ...]]]] = {
    "table1": {
        "real": {
            "gcn": (0.737, 0.745, 0.774, 0.598, 0.560, 0.510, 0.686, 0.672, 0.628),
            "gat": (0.756, 0.776, 0.787, 0.542, 0.541, 0.538, 0.610, 0.598, 0.511),
            "ours+motif": (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
        },
        "nas": {
            "gcn": (1.000, 1.000, 1.000, 0.927, 0.854, 0.858, 0.953, 0.902, 0.906),
            "gat": (1.000, 1.000, 1.000, 0.941, 0.899, 0.901, 0.961, 0.933, 0.935),
            "ours+motif": (1.000, 1.000, 1.000, 0.952, 0.932, 0.935, 0.969, 0.960, 0.958),
        },
    },
    "table2": {
        "real": {
            "node-number": (0.807, 0.809, 0.809, 0.551, 0.539, 0.537, 0.694, 0.682, 0.667),
            "motif-number": (0.817, 0.820, 0.823, 0.591, 0.522, 0.518, 0.692, 0.669, 0.661),
            "random": (0.801, 0.802, 0.804, 0.589, 0.543, 0.536, 0.699, 0.675, 0.668),
            "motif": (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
        },
        "nas": {
            "node-number": (0.999, 0.999, 0.999, 0.941, 0.885, 0.883, 0.962, 0.926, 0.924),
            "motif-number": (0.998, 0.998, 0.998, 0.931, 0.872, 0.874, 0.956, 0.917, 0.919),
            "random": (1.000, 1.000, 1.000, 0.919, 0.826, 0.824, 0.949, 0.881, 0.883),
            "motif": (1.000, 1.000, 1.000, 0.952, 0.936, 0.935, 0.969, 0.957, 0.958),
        },
    },
    "table3": {
        "real": {
            "ce": (0.824, 0.828, 0.829, 0.583, 0.573, 0.539, 0.703, 0.693, 0.692),
            "cl": (0.565, 0.572, 0.573, 0.334, 0.348, 0.373, 0.502, 0.455, 0.451),
            "ce+cl": (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
        },
        "nas": {
            "ce": (1.000, 1.000, 1.000, 0.953, 0.921, 0.923, 0.969, 0.952, 0.950),
            "cl": (0.925, 0.925, 0.925, 0.750, 0.658, 0.656, 0.829, 0.762, 0.764),
            "ce+cl": (1.000, 1.000, 1.000, 0.952, 0.932, 0.935, 0.969, 0.955, 0.958),
        },
    },
    "table4": {
        "real": {
            SCRATCH: (0.825, 0.826, 0.826, 0.593, 0.577, 0.545, 0.705, 0.692, 0.678),
            PRETRAINED: (0.821, 0.838, 0.839, 0.596, 0.584, 0.573, 0.712, 0.703, 0.706),
        },
    },
}
PAPER_LABEL = "paper (their data)"
MAP_NOTE = (
    "MAP convention: `MAP@k` is ranx's AP@k (divides by all relevant items |R|, the TREC "
    "convention; on `nas` |R| is about 2,700, so MAP@20 <= 0.007 for any encoder). `MAPc@k` is "
    "`map_capped@k`, the same AP rescaled to divide by min(k, |R|): the paper's MAP column uses that "
    "convention, so the paper's MAP numbers are shown under MAPc, not MAP."
)


# ----------------------------------------------------------------------------- collecting


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


# ---------------------------------------------------------------------------- aggregating


def aggregate(records: Iterable[Record]):
    """A pandas DataFrame, one row per group (KEYS): n seeds, the seeds, mean and std per metric.

    std is the sample standard deviation (ddof=1) over seeds; NaN when n == 1.
    """
    import pandas as pd

    rows = []
    for key, by_seed in select_runs(records).items():
        row: dict[str, Any] = dict(zip(KEYS, key))
        seeds = sorted(by_seed)
        row["n"] = len(seeds)
        row["seeds"] = " ".join(str(s) for s in seeds)
        for m in ALL_METRICS:
            vals = [_score(by_seed[s], m) for s in seeds]
            vals = np.array([v for v in vals if v is not None], dtype=np.float64)
            row[f"{m} mean"] = float(vals.mean()) if len(vals) else math.nan
            row[f"{m} std"] = float(vals.std(ddof=1)) if len(vals) > 1 else math.nan
        rows.append(row)
    columns = [*KEYS, "n", "seeds", *[f"{m} {s}" for m in ALL_METRICS for s in ("mean", "std")]]
    return pd.DataFrame(rows, columns=columns)


def _score(rec: Record, metric: str) -> float | None:
    v = rec.result.metrics.get(metric, rec.result.metrics_extra.get(metric))
    return None if v is None else float(v)


def write_aggregate(df, out_dir: str | Path) -> tuple[Path, Path]:
    """`aggregate.csv` (6 decimals) and `aggregate.json` (a list of rows; NaN as null)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "aggregate.csv"
    atomic_write_bytes(csv, df.to_csv(index=False, float_format="%.6f", lineterminator="\n").encode())
    rows = []
    for rec in df.to_dict(orient="records"):
        rows.append({k: (None if isinstance(v, float) and math.isnan(v) else
                         round(v, 6) if isinstance(v, float) else
                         int(v) if isinstance(v, (np.integer,)) else v) for k, v in rec.items()})
    js = out_dir / "aggregate.json"
    atomic_write_bytes(js, (json.dumps(rows, indent=2, sort_keys=True) + "\n").encode())
    return csv, js


# -------------------------------------------------------------------------------- tables


@dataclass
class Row:
    label: str
    key: Key
    n: int
    mean: dict[str, float]
    std: dict[str, float]
    bold: set[str] = field(default_factory=set)
    marks: dict[str, str] = field(default_factory=dict)


@dataclass
class Block:
    """The rows of one table for one setting (or paper rows only, `setting` None)."""

    dataset: str
    setting: tuple[str, str, str, str, str] | None
    rows: list[Row]
    paper: list[tuple[str, tuple[float, ...]]]
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        if self.setting is None:
            return f"{self.dataset} (no narbench results yet)"
        ds, split, profile, device, protocol = self.setting
        return f"{ds} · split {split} · {profile} · {device} · protocol {protocol}"


@dataclass
class LeaderTable:
    number: int
    title: str
    blocks: list[Block]
    notes: list[str]
    empty_note: str | None = None


def _method_label(key: Key) -> str:
    if key.protocol == ANY_PROTOCOL:
        return f"{key.encoder} (floor)"
    return key.encoder if key.splitter == "none" else f"{key.encoder}+{key.splitter}"


# Each table: (number, title, row filter over group keys, row label, paper key of a row, sig test?)
_SPLITTER_ORDER = {"node-number": 0, "motif-number": 1, "random": 2, "motif": 3}
_OBJ_ORDER = {"ce": 0, "cl": 1, "ce+cl": 2}
_T1_ORDER = {"random (floor)": 0, "ophist (floor)": 1, "ophist-tfidf (floor)": 2, "wl (floor)": 3,
             "gcn": 4, "gat": 5, "ours+motif": 6}


def _table_specs():
    def t1(k: Key):
        if k.init != SCRATCH:
            return None
        if k.protocol == ANY_PROTOCOL:  # training-free floors
            return _method_label(k), None
        if k.objective != DEFAULT_OBJECTIVE:
            return None
        if k.encoder == "ours" and k.splitter != "motif":  # ours' other splitters are Table 2
            return None
        label = _method_label(k)  # any other encoder (gcn, gat, a submitted one) is a Table 1 row
        return label, label

    def t2(k: Key):
        if k.encoder == "ours" and k.objective == DEFAULT_OBJECTIVE and k.init == SCRATCH:
            return f"ours+{k.splitter}", k.splitter
        return None

    def t3(k: Key):
        if k.encoder == "ours" and k.splitter == "motif" and k.init == SCRATCH:
            return f"ours+motif, {k.objective}", k.objective
        return None

    def t4(k: Key):
        if k.encoder == "ours" and k.splitter == "motif" and k.objective == DEFAULT_OBJECTIVE:
            return ("ours+motif, from scratch" if k.init == SCRATCH else "ours+motif, initialised from nas"), k.init
        return None

    return [
        (1, "Encoders (paper Table 1)", t1, lambda lab: _T1_ORDER.get(lab, 9), "table1", True),
        (2, "Graph splitters with `ours` (paper Table 2)", t2,
         lambda lab: _SPLITTER_ORDER.get(lab.split("+", 1)[1], 9), "table2", True),
        (3, "Objectives with `ours+motif` (paper Table 3)", t3,
         lambda lab: _OBJ_ORDER.get(lab.split(", ")[1], 9), "table3", False),
        (4, "Transfer: `ours+motif` on real, from scratch vs initialised from nas (paper Table 4)", t4,
         lambda lab: 0 if "scratch" in lab else 1, "table4", False),
    ]


_PAPER_NAMES = {
    "table1": {"gcn": "GCN", "gat": "GAT", "ours+motif": "Ours"},
    "table2": {"node-number": "Node Num", "motif-number": "Motif Num", "random": "Random", "motif": "Ours"},
    "table3": {"ce": "CE", "cl": "CL", "ce+cl": "CE+CL"},
    "table4": {SCRATCH: "Training from Scratch", PRETRAINED: "Pre-training with NAS"},
}


def build_tables(records: list[Record], df=None, *, stat_test: str = "student") -> list[LeaderTable]:
    """The four tables, as data (rendered by `tables_markdown` and `print_tables`)."""
    if df is None:
        df = aggregate(records)
    selected = select_runs(records)
    sidecars: dict[Path, dict[str, np.ndarray] | None] = {}
    stats = {Key(*(r[k] for k in KEYS)): r for r in df.to_dict(orient="records")}
    tables = []
    for number, title, pick, order, paper_key, sig in _table_specs():
        by_setting = _by_setting(stats, pick)
        if number == 4:  # rows only where initialised results exist
            by_setting = {s: rows for s, rows in by_setting.items() if any(r.key.init != SCRATCH for r in rows)}
        blocks = []
        paper = PAPER[paper_key]
        for setting, rows in sorted(by_setting.items()):
            rows = sorted(rows, key=lambda r: (order(r.label), r.label))
            _mark_best(rows)
            block = Block(setting[0], setting, rows, _paper_rows(paper_key, setting[0]))
            if sig and len(rows) > 1:
                block.notes.extend(_significance(rows, selected, sidecars, stat_test))
            blocks.append(block)
        covered = {b.dataset for b in blocks}
        if number != 4:
            for ds in sorted(set(paper) - covered):
                blocks.append(Block(ds, None, [], _paper_rows(paper_key, ds)))
        notes = [MAP_NOTE, "Bold: the best of our rows in each column (mean over seeds, at the shown precision). "
                 "Cells: mean ± sample std over seeds; n = number of seeds."]
        empty = None
        if number == 4 and not blocks:
            empty = ("No results with `config.run.init_from` set yet; the paper's numbers for reference:")
            blocks.append(Block("real", None, [], _paper_rows(paper_key, "real")))
        tables.append(LeaderTable(number, title, blocks, notes, empty))
    return tables


def _by_setting(stats: dict[Key, dict], pick) -> dict[tuple, list[Row]]:
    """The rows `pick` selects, per setting; training-free rows join every protocol's setting.

    A setting with only training-free rows is a block of its own (protocol `any`).
    """
    trained: dict[tuple, list[Row]] = {}
    free: dict[tuple, list[Row]] = {}
    for key, st in sorted(stats.items()):
        picked = pick(key)
        if picked is None:
            continue
        row = Row(picked[0], key, int(st["n"]), {m: st[f"{m} mean"] for m in COLUMNS},
                  {m: st[f"{m} std"] for m in COLUMNS})
        (free if key.protocol == ANY_PROTOCOL else trained).setdefault(key.setting, []).append(row)
    out = {s: list(rows) for s, rows in trained.items()}
    for setting, rows in free.items():
        homes = [s for s in trained if s[:4] == setting[:4]]
        for home in homes or [setting]:
            out.setdefault(home, []).extend(rows)
    return out


def _paper_rows(paper_key: str, dataset: str) -> list[tuple[str, tuple[float, ...]]]:
    rows = PAPER.get(paper_key, {}).get(dataset, {})
    return [(f"{PAPER_LABEL}: {_PAPER_NAMES[paper_key][k]}", v) for k, v in rows.items()]


def _mark_best(rows: list[Row]) -> None:
    for m in COLUMNS:
        vals = [round(r.mean[m], 4) for r in rows if not math.isnan(r.mean[m])]
        if not vals:
            continue
        best = max(vals)
        for r in rows:
            if not math.isnan(r.mean[m]) and round(r.mean[m], 4) == best:
                r.bold.add(m)


def _load_sidecar(rec: Record, cache: dict) -> dict[str, np.ndarray] | None:
    path = rec.sidecar
    if path not in cache:
        if not path.is_file():
            cache[path] = None
        else:
            try:
                raw = json.loads(gzip.decompress(path.read_bytes()))
            except (OSError, ValueError) as exc:
                raise ValueError(f"{path}: not a valid per-query sidecar ({exc})") from exc
            cache[path] = {k: np.asarray(v, dtype=np.float64) for k, v in raw.items()}
    return cache[path]


def paired_scores(a: dict[int, Record], b: dict[int, Record], metric: str, cache: dict | None = None):
    """Seed-matched per-query scores of two rows, pooled over the seeds both have.

    Returns (scores_a, scores_b, seeds used); seeds whose sidecars are missing or whose query
    counts differ are left out.
    """
    cache = {} if cache is None else cache
    xs, ys, used = [], [], []
    for seed in sorted(set(a) & set(b)):
        sa, sb = _load_sidecar(a[seed], cache), _load_sidecar(b[seed], cache)
        if sa is None or sb is None or metric not in sa or metric not in sb or len(sa[metric]) != len(sb[metric]):
            continue
        xs.append(sa[metric])
        ys.append(sb[metric])
        used.append(seed)
    if not used:
        return np.empty(0), np.empty(0), []
    return np.concatenate(xs), np.concatenate(ys), used


def paired_test(control: np.ndarray, treatment: np.ndarray, stat_test: str = "student") -> float:
    """p-value of ranx's paired test (`student`: paired t-test; `fisher`: randomization, seed 0).

    Identical score vectors give p = 1.
    """
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    if len(control) < 2 or np.array_equal(control, treatment):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if stat_test == "student":
            p, _ = paired_student_t_test(control, treatment, ALPHA)
        elif stat_test == "fisher":
            p, _ = fisher_randomization_test(control, treatment, 10000, ALPHA, 0)
        else:
            raise ValueError(f"unknown statistical test {stat_test!r} (student, fisher)")
    p = float(p)
    return 1.0 if math.isnan(p) else p


def _significance(rows: list[Row], selected, cache: dict, stat_test: str) -> list[str]:
    best = max(rows, key=lambda r: (-math.inf if math.isnan(r.mean["ndcg@20"]) else r.mean["ndcg@20"], r.label))
    name = {"student": "two-sided paired Student's t-test (ranx `paired_student_t_test`)",
            "fisher": "Fisher's randomization test (ranx `fisher_randomization_test`, 10,000 permutations, seed 0)"}
    notes = [f"{SIG_MARK}: significantly worse than the best row by mean NDCG@20 (**{best.label}**) at p < {ALPHA}, "
             f"{name.get(stat_test, stat_test)} on per-query scores, seed-matched, queries pooled over the "
             "common seeds; not corrected for multiple comparisons."]
    for row in rows:
        if row is best:
            continue
        seeds_used: list[int] = []
        for m in COLUMNS:
            a, b, used = paired_scores(selected[best.key], selected[row.key], m, cache)
            if not used:
                continue
            seeds_used = used
            p = paired_test(a, b, stat_test)
            if p < ALPHA and b.mean() < a.mean():
                row.marks[m] = SIG_MARK
        if not seeds_used:
            notes.append(f"{row.label}: not tested (no per-query scores for a seed shared with {best.label}).")
        else:
            notes.append(f"{row.label} vs {best.label}: seeds {', '.join(map(str, seeds_used))}.")
    return notes


# ----------------------------------------------------------------------------- rendering


def _fmt(row: Row, m: str) -> str:
    mean, std = row.mean[m], row.std[m]
    if math.isnan(mean):
        return "–"
    text = f"{mean:.4f}" if math.isnan(std) else f"{mean:.4f}±{std:.4f}"
    return text + row.marks.get(m, "")


def _paper_cells(vals: tuple[float, ...]) -> list[str]:
    by_metric = dict(zip(METRICS, (f"{v:.3f}" for v in vals)))
    out = []
    for m in COLUMNS:
        if m.startswith("map@"):
            out.append("—")  # the paper's MAP is the min(k, |R|) convention: shown under MAPc
        elif m.startswith("map_capped@"):
            out.append(by_metric["map@" + m.split("@")[1]])
        else:
            out.append(by_metric[m])
    return out


def tables_markdown(tables: list[LeaderTable]) -> str:
    lines = []
    for t in tables:
        lines += [f"## Table {t.number}: {t.title}", ""]
        if t.empty_note:
            lines += [t.empty_note, ""]
        for b in t.blocks:
            lines += [f"### {b.title}", ""]
            lines.append("| method | n | " + " | ".join(HEADERS[m] for m in COLUMNS) + " |")
            lines.append("|---|---:|" + "---:|" * len(COLUMNS))
            for r in b.rows:
                cells = [f"**{_fmt(r, m)}**" if m in r.bold else _fmt(r, m) for m in COLUMNS]
                lines.append(f"| {r.label} | {r.n} | " + " | ".join(cells) + " |")
            for label, vals in b.paper:
                lines.append(f"| *{label}* | | " + " | ".join(f"*{c}*" for c in _paper_cells(vals)) + " |")
            lines.append("")
            for note in b.notes:
                lines += [f"- {note}"]
            if b.notes:
                lines.append("")
        for note in t.notes:
            lines += [f"*{note}*", ""]
    return "\n".join(lines)


def print_tables(tables: list[LeaderTable], console=None) -> None:
    """Render the tables in the terminal with rich."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    for t in tables:
        if t.empty_note:
            console.print(f"[bold]Table {t.number}: {escape(t.title)}[/bold]\n{escape(t.empty_note)}")
        for b in t.blocks:
            table = Table(title=f"Table {t.number}: {escape(t.title)} — {escape(b.title)}", title_justify="left")
            table.add_column("method")
            table.add_column("n", justify="right")
            for m in COLUMNS:
                table.add_column(HEADERS[m], justify="right")
            for r in b.rows:
                table.add_row(escape(r.label), str(r.n),
                              *[f"[bold]{escape(_fmt(r, m))}[/bold]" if m in r.bold else escape(_fmt(r, m)) for m in COLUMNS])
            for label, vals in b.paper:
                table.add_row(f"[dim]{escape(label)}[/dim]", "", *[f"[dim]{c}[/dim]" for c in _paper_cells(vals)])
            console.print(table)
            for note in b.notes:
                console.print(f"  {escape(note.replace('**', ''))}")
    console.print(escape(MAP_NOTE))


# --------------------------------------------------------------------------------- plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "narbench", "path.simplify": True})
    return plt


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None}, bbox_inches="tight")


def plot_ndcg(df, out_dir: str | Path) -> list[Path]:
    """One bar chart per setting: NDCG@20/50/100 per row, std error bars."""
    plt = _plt()
    out = []
    stats = {Key(*(r[k] for k in KEYS)): r for r in df.to_dict(orient="records")}
    for setting, rows in sorted(_by_setting(stats, lambda k: (_row_label(k), None)).items()):
        rows = sorted(rows, key=lambda r: r.key)
        labels = [r.label for r in rows]
        x = np.arange(len(labels))
        fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.2))
        width = 0.27
        for i, k in enumerate((20, 50, 100)):
            means = np.array([stats[r.key][f"ndcg@{k} mean"] for r in rows], dtype=float)
            stds = np.array([stats[r.key][f"ndcg@{k} std"] for r in rows], dtype=float)  # NaN (one seed): no bar
            ax.bar(x + (i - 1) * width, means, width, yerr=stds, capsize=2, label=f"NDCG@{k}")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("NDCG (mean ± std over seeds)")
        ax.set_title(" · ".join(setting))
        ax.legend(fontsize=8, loc="upper center", ncol=3, frameon=False)
        ax.grid(axis="y", alpha=0.3)
        path = Path(out_dir) / f"ndcg-{'-'.join(setting)}.png"
        _save(fig, path)
        plt.close(fig)
        out.append(path)
    return out


def _row_label(key: Key) -> str:
    label = _method_label(key)
    if key.protocol != ANY_PROTOCOL and key.objective != DEFAULT_OBJECTIVE:
        label += f" ({key.objective})"
    if key.init != SCRATCH:
        label += f" [{key.init}]"
    return label


TSNE_MAX_POINTS = 1500


def plot_tsne(records: list[Record], out_dir: str | Path, *, max_points: int = TSNE_MAX_POINTS) -> list[Path]:
    """t-SNE maps of saved query embeddings, coloured by coarse label (the class on nas).

    One figure per dataset / profile / device kind with a panel for each of gcn, gat and
    ours+motif (default objective, from scratch) that has an `.embeddings.npz`; the lowest seed.
    """
    from sklearn.manifold import TSNE

    plt = _plt()
    wanted = {("gcn", "none"): "gcn", ("gat", "none"): "gat", ("ours", "motif"): "ours+motif"}
    panels: dict[tuple[str, ...], list[tuple[str, Path]]] = {}
    for key, by_seed in select_runs(records).items():
        name = wanted.get((key.encoder, key.splitter))
        if name is None or key.objective != DEFAULT_OBJECTIVE or key.init != SCRATCH:
            continue
        for seed in sorted(by_seed):
            if by_seed[seed].embeddings.is_file():
                panels.setdefault(key.setting, []).append((name, by_seed[seed].embeddings))
                break
    out = []
    order = {"gcn": 0, "gat": 1, "ours+motif": 2}
    for setting, items in sorted(panels.items()):
        items.sort(key=lambda it: order[it[0]])
        fig, axes = plt.subplots(1, len(items), figsize=(4.2 * len(items), 4.2), squeeze=False)
        for ax, (name, path) in zip(axes[0], items):
            with np.load(path) as z:
                emb, coarse = z["embeddings"].astype(np.float32), z["coarse"].astype(str)
            if len(emb) > max_points:
                idx = np.sort(np.random.default_rng(0).choice(len(emb), max_points, replace=False))
                emb, coarse = emb[idx], coarse[idx]
            perplexity = float(min(30.0, max(2.0, (len(emb) - 1) / 3)))
            xy = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=0).fit_transform(emb)
            cmap = plt.get_cmap("tab10" if len(set(coarse)) <= 10 else "tab20")
            for i, lab in enumerate(sorted(set(coarse))):
                sel = coarse == lab
                ax.scatter(xy[sel, 0], xy[sel, 1], s=4, color=cmap(i % cmap.N), label=lab, alpha=0.8, linewidths=0)
            ax.set_title(name)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0][-1].legend(fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle(f"t-SNE of query embeddings: {' · '.join(setting)}")
        path = Path(out_dir) / f"tsne-{'-'.join(setting)}.png"
        _save(fig, path)
        plt.close(fig)
        out.append(path)
    return out


# ------------------------------------------------------------------------------ publish


def write_leaderboard(results_dirs: Iterable[str | Path] = (), out_dir: str | Path = "leaderboard", *,
                      plots: bool = True, tsne: bool = True, stat_test: str = "student",
                      console=None) -> Path:
    """Regenerate `<out_dir>/README.md`, `aggregate.csv/json` and `plots/` from the result files.

    Reads `<out_dir>/results/` (when it exists) and `results_dirs`. Returns the README path.
    With `console` (a rich Console) the tables are also printed.
    """
    out_dir = Path(out_dir)
    dirs = [out_dir / "results"] if (out_dir / "results").is_dir() else []
    dirs += [Path(d) for d in results_dirs]
    records = collect(dirs)
    df = aggregate(records)
    write_aggregate(df, out_dir)
    tables = build_tables(records, df, stat_test=stat_test)
    plot_paths: list[Path] = []
    if plots and len(df):
        plot_paths += plot_ndcg(df, out_dir / "plots")
        if tsne:
            plot_paths += plot_tsne(records, out_dir / "plots")
    text = _readme(records, df, tables, plot_paths, out_dir)
    readme = out_dir / "README.md"
    atomic_write_bytes(readme, text.encode())
    if console is not None:
        print_tables(tables, console)
    return readme


def _readme(records, df, tables, plot_paths, out_dir: Path) -> str:
    datasets = sorted({(r.dataset, r.result.dataset.get("version", "?"), r.result.dataset.get("sha256", "")[:12])
                       for r in records})
    lines = [
        "# narbench leaderboard",
        "",
        "Generated by `narbench leaderboard` from the result files; do not edit by hand. "
        f"{len(records)} result files, {len(df)} configurations (dataset, profile, device kind, encoder, "
        "splitter, objective, init). Per-configuration means and stds: [aggregate.csv](aggregate.csv), "
        "[aggregate.json](aggregate.json).",
        "",
    ]
    if datasets:
        lines += ["Datasets: " + ", ".join(f"`{n}` {v} (sha256 {s}…)" for n, v, s in datasets) + ".", ""]
    lines += [f"The *{PAPER_LABEL}* rows are the numbers published by Pei et al. (ICLR 2024) on their own "
              "data sets, which narbench does not reproduce exactly: they are a reference, not a comparison "
              "on equal terms.", "", MAP_NOTE, ""]
    lines.append(tables_markdown(tables))
    if plot_paths:
        lines += ["## Plots", ""]
        for p in sorted(plot_paths, key=lambda p: p.name):
            rel = p.relative_to(out_dir).as_posix()
            lines += [f"![{p.stem}]({rel})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------- CLI


def add_parser(subparsers):
    """Register `narbench leaderboard` on the CLI's subparsers; returns the parser."""
    p = subparsers.add_parser("leaderboard", help="aggregate result files into the leaderboard (tables, plots)")
    p.add_argument("--results", action="append", default=[], metavar="DIR",
                   help="extra directory of result files (repeatable; <out>/results is always read)")
    p.add_argument("--out", default="leaderboard", help="leaderboard directory (default: leaderboard)")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--no-tsne", action="store_true", help="skip the t-SNE maps (slowest part)")
    p.add_argument("--test", default="student", choices=("student", "fisher"), help="paired significance test")
    return p


def main(args) -> int:
    """Run `narbench leaderboard` with parsed `args`; 0 on success, 2 on bad input."""
    from rich.console import Console
    from rich.markup import escape

    console, err = Console(), Console(stderr=True)
    try:
        readme = write_leaderboard(args.results, args.out, plots=not getattr(args, "no_plots", False),
                                   tsne=not getattr(args, "no_tsne", False),
                                   stat_test=getattr(args, "test", "student"), console=console)
    except (ValueError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    console.print(f"leaderboard written to [bold]{readme}[/bold]")
    return 0
