"""The ceiling tables (`leaderboard/ceiling.csv`, `leaderboard/ceiling-families.csv`): the oracle's scores
(`narbench.eval.ceiling`) on a split beside the best committed result on the same content.

`committed` reads the result files of exactly one split's content (all queries, whole corpus) and
groups them by configuration as the leaderboard does; `ceiling_rows` and `family_rows` are the
rows of the two tables; `write_csv` keeps the rows of splits that were not re-run. The structure
classes and the splits themselves come from `python -m narbench.cli.ceiling`, which needs the
datasets and the harness.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from narbench.eval.ceiling import (BEST_METRICS, HOPELESS, KINDS, RESULTS_DIR, SPLITS, SUBSETS, TABLE_METRICS,
                                   VARIANTS, Ceiling)
from narbench.leaderboard.headline import version_key

# ----------------------------------------------------------------------------- committed results


@dataclass
class Committed:
    """Per configuration (the leaderboard's row key), the per-query scores of each seed."""

    label: str
    runs: dict[int, dict[str, np.ndarray]]

    def mean(self, metric: str) -> np.ndarray:
        return np.mean([pq[metric] for pq in self.runs.values()], axis=0)


def method_label(key) -> str:
    """`encoder[+variant][/splitter] (protocol[, objective][, pretrained])` of a leaderboard key."""
    name = key.encoder + (f"+{key.variant}" if key.variant else "") + (f"/{key.splitter}" if key.splitter != "none" else "")
    extra = [key.protocol] + ([key.objective] if key.objective != "ce+cl" else []) + \
        (["pretrained"] if key.init != "scratch" else [])
    return f"{name} ({', '.join(extra)})"


def tracked(results_dir: Path) -> set[str] | None:
    """Names of the files under `results_dir` that git tracks (None: not in a git checkout)."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "-z", "."], cwd=results_dir, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {Path(p).name for p in out.stdout.decode().split("\0") if p}


def committed(name: str, split: str, want: dict[str, Any], num_queries: int, num_corpus: int,
              results_dir: Path = RESULTS_DIR, *, uncommitted: bool = False) -> dict[str, Committed]:
    """The committed results on exactly this content and split (all queries, whole corpus), by configuration.

    Committed: tracked by git where `results_dir` is in a checkout (every file with `uncommitted`).
    Of several runs of one configuration and seed, the latest counts (as the leaderboard's `select_runs`).
    """
    from narbench.eval.result import RunResult
    from narbench.eval.validation import read_sidecar, sidecar_path
    from narbench.leaderboard.records import Record, select_runs

    records = []
    known = None if uncommitted else tracked(Path(results_dir))
    for path in sorted(Path(results_dir).glob("*.json")):
        if known is not None and path.name not in known:
            continue
        try:
            res = RunResult.read(path)
        except ValueError:
            continue
        ds = res.dataset or {}
        if ds.get("name") != name or res.split != split or ds.get("version") != want["version"] \
                or ds.get("sha256") != want["sha256"] or ("parts" in want and ds.get("parts") != want["parts"]):
            continue
        if res.num_queries != num_queries or res.num_corpus != num_corpus or not sidecar_path(path).is_file():
            continue
        per_query = read_sidecar(sidecar_path(path))
        if any(len(v) != num_queries for v in per_query.values()):
            continue
        records.append(Record(path, res, per_query))
    out = {}
    for key, seeds in select_runs(records).items():
        label = method_label(key) + (f" [{key.profile}, {key.device}]" if (key.profile, key.device) != ("quick", "cpu") else "")
        out[label] = Committed(label, {seed: rec.per_query for seed, rec in seeds.items()})
    return out


def best_committed(configs: dict[str, Committed], metric: str, where: np.ndarray | None = None) -> tuple[float, str]:
    """(best seed-mean of `metric` over configurations, its label); over the queries `where` if given."""
    best, label = float("nan"), ""
    for lab, cfg in sorted(configs.items()):
        vals = cfg.mean(metric)
        score = float(vals[where].mean() if where is not None else vals.mean())
        if not best >= score:  # nan-safe: the first sets it
            best, label = score, lab
    return best, label


def max_single_run(configs: dict[str, Committed], metric: str, where: np.ndarray) -> float:
    """The highest mean of `metric` over the queries `where` that any one committed run reached."""
    return max((float(pq[metric][where].mean()) for c in configs.values() for pq in c.runs.values()), default=float("nan"))


# ----------------------------------------------------------------------------- tables


@dataclass
class SplitReport:
    """One split's oracle results at each resolution, and its committed results."""

    dataset: str
    split: str
    content: dict[str, Any]
    corpus: np.ndarray
    queries: np.ndarray
    ceilings: dict[tuple[str, str], Ceiling]  # (resolution, rule) -> the oracle's scores
    classes: dict[str, np.ndarray]  # resolution -> class id per graph of the dataset
    configs: dict[str, Committed]
    #: named query subsets reported apart (crossimpl's `exact` and `reimpl`): positions into `queries`
    subsets: dict[str, np.ndarray] = field(default_factory=dict)


def cross_family_classes(classes: np.ndarray, families: np.ndarray, idx: np.ndarray) -> int:
    """Classes of the graphs `idx` that hold two or more families."""
    fam_by_class: dict[int, set] = {}
    for c, f in zip(classes[idx].tolist(), families[idx].tolist()):
        fam_by_class.setdefault(c, set()).add(f)
    return sum(len(s) > 1 for s in fam_by_class.values())


#: a row of `ceiling.csv` is replaced by a re-run of the same content version, split and oracle
CEILING_KEY = ("dataset", "version", "split", "resolution", "rule")

CEILING_COLUMNS = ("dataset", "version", "content", "split", "resolution", "rule", "kind", "queries", "corpus",
                   "query_groups", "cross_family_classes", *TABLE_METRICS, "exact_gap", "draws", "configurations",
                   *(c for m in BEST_METRICS for c in (f"best {m}", f"best {m} method")))


def ceiling_rows(rep: SplitReport, families: np.ndarray) -> list[dict[str, Any]]:
    rows = []
    idx = np.concatenate([rep.corpus, rep.queries])
    sha = rep.content["sha256"][:8] + ("+" + rep.content["parts"].get("crossimpl", "")[:8] if "parts" in rep.content else "")
    parts = [(rep.split, np.arange(len(rep.queries)))] + \
        [(f"{rep.split}/{name}", pos) for name, pos in sorted(rep.subsets.items(), key=lambda kv: SUBSETS.index(kv[0]))]
    for split, where in parts:
        for (res, rule), c in rep.ceilings.items():
            means = {m: float(c.per_query[m][where].mean()) for m in TABLE_METRICS}
            gap = max(abs(means[m] - float(c.exact_per_query[m][where].mean())) for m in TABLE_METRICS)
            groups = len(set(rep.classes[res][rep.queries[where]].tolist()))
            row = {"dataset": rep.dataset, "version": rep.content["version"], "content": sha, "split": split,
                   "resolution": res, "rule": rule, "kind": KINDS[res], "queries": len(where), "corpus": len(rep.corpus),
                   "query_groups": groups, "cross_family_classes": cross_family_classes(rep.classes[res], families, idx),
                   **{m: f"{v:.4f}" for m, v in means.items()},
                   "exact_gap": f"{gap:.4f}", "draws": c.draws, "configurations": len(rep.configs)}
            for m in BEST_METRICS:
                best, label = best_committed(rep.configs, m, where) if rep.configs else (float("nan"), "")
                row[f"best {m}"] = "" if np.isnan(best) else f"{best:.4f}"
                row[f"best {m} method"] = label
            rows.append(row)
    return rows


FAMILY_COLUMNS = ("version", "family", "queries", *(f"iso-label {m}" for m in BEST_METRICS),
                  *(f"{r}-{u} ndcg@20" for r, u in VARIANTS[1:]),
                  "best ndcg@20", "best ndcg@20 method", "max run ndcg@20", "max run ndcg@100", "configurations at 0", "hopeless",
                  "queries with iso twin elsewhere", "queries with nd twins only elsewhere", "nd other families")


def family_rows(rep: SplitReport, dataset) -> list[dict[str, Any]]:
    """Per query family: the ceilings, the best committed score, and the near-duplicates in other families."""
    fam = np.array([g.family for g in dataset.graphs], dtype=object)
    q_fam = fam[rep.queries]
    corpus_by_class = {res: _members(cls[rep.corpus], rep.corpus) for res, cls in rep.classes.items()}
    rows = []
    for f in sorted(set(q_fam.tolist())):
        where = np.flatnonzero(q_fam == f)
        row: dict[str, Any] = {"family": f, "queries": len(where)}
        for (res, rule), c in rep.ceilings.items():
            for m in BEST_METRICS if (res, rule) == ("iso", "label") else ("ndcg@20",):
                row[f"{res}-{rule} {m}"] = f"{c.per_query[m][where].mean():.4f}"
        if rep.configs:
            best, label = best_committed(rep.configs, "ndcg@20", where)
            at_zero = sum(float(c.mean("ndcg@20")[where].mean()) == 0 for c in rep.configs.values())
            row.update({"best ndcg@20": f"{best:.4f}", "best ndcg@20 method": label if best > 0 else "",
                        "max run ndcg@20": f"{max_single_run(rep.configs, 'ndcg@20', where):.4f}",
                        "max run ndcg@100": f"{max_single_run(rep.configs, 'ndcg@100', where):.4f}",
                        "configurations at 0": f"{at_zero}/{len(rep.configs)}",
                        "hopeless": "yes" if best < HOPELESS else ""})
        iso_twin, nd_only, near_other = 0, 0, set()
        for q in rep.queries[where].tolist():
            twins = corpus_by_class["iso"].get(int(rep.classes["iso"][q]), np.zeros(0, np.int64))
            iso_twin += bool(len(twins)) and bool((fam[twins] != f).any())
            if "nd" in rep.classes:
                near = corpus_by_class["nd"].get(int(rep.classes["nd"][q]), np.zeros(0, np.int64))
                near_f = fam[near]
                nd_only += bool(len(near)) and not (near_f == f).any()
                near_other.update(near[near_f != f].tolist())
        row["queries with iso twin elsewhere"] = iso_twin
        row["queries with nd twins only elsewhere"] = nd_only if "nd" in rep.classes else ""
        others = Counter(fam[sorted(near_other)].tolist())
        row["nd other families"] = " ".join(f"{k}:{v}" for k, v in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
        rows.append(row)
    return rows


def _members(classes: np.ndarray, idx: np.ndarray) -> dict[int, np.ndarray]:
    out: dict[int, list[int]] = {}
    for c, i in zip(classes.tolist(), idx.tolist()):
        out.setdefault(c, []).append(i)
    return {c: np.asarray(v, dtype=np.int64) for c, v in out.items()}


def write_csv(path: Path, columns: Sequence[str], rows: list[dict[str, Any]], *, replace: Iterable[tuple] = (),
              key: Sequence[str] = ()) -> None:
    """Write `rows`; with `key`, keep the existing file's rows whose key is not in `replace` (re-runs of some splits)."""
    replace = set(replace)
    kept = []
    if key and path.is_file():
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            if list(reader.fieldnames or ()) == list(columns):  # a file of another layout is not kept
                kept = [r for r in reader if tuple(r[k] for k in key) not in replace]
    order = {s: i for i, s in enumerate(SPLITS)}
    order.update({(d, f"{s}/{sub}"): i + (j + 1) / 10 for i, (d, s) in enumerate(SPLITS) for j, sub in enumerate(SUBSETS)})
    every = kept + [{c: str(r.get(c, "")) for c in columns} for r in rows]
    variants = {f"{res}-{rule}": i for i, (res, rule) in enumerate(VARIANTS)}
    if key and "dataset" in columns:
        every.sort(key=lambda r: (order.get((r["dataset"], r["split"]), len(order)), version_key(r.get("version", "")),
                                  variants.get(f"{r.get('resolution')}-{r.get('rule', 'label')}", len(variants))))
    elif key:
        every.sort(key=lambda r: tuple(version_key(r[k]) if k == "version" else r[k] for k in key))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
        w.writeheader()
        for r in every:
            w.writerow({c: r.get(c, "") for c in columns})
