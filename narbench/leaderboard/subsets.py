"""Query subsets as leaderboard rows: a split's named subsets (crossimpl's `reimpl`, `exact`,
`package:<name>`) shown as splits of their own.

A run on a split with subsets (`Split.subsets`) records, per subset, its query positions and the
metrics over them (`RunResult.subsets`). `subset_records` turns each such record into one record
per subset, of split `<split>/<subset>`, whose metrics and per-query scores are the subset's, so
the tables, their significance tests and the aggregate treat a subset like any split. The
headline's crossimpl column is `crossimpl/reimpl`: the queries not isomorphic to a corpus graph
(an isomorphic one measures copy detection, not reimplementation).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from narbench.leaderboard.records import Record, select_runs
from narbench.leaderboard.tables import TABLES, row_labels

#: the subsets shown as splits (a package's subset is shown in the per-package table instead)
SHOWN = ("reimpl", "exact")
PACKAGE = "package:"
SEP = "/"


def subset_records(records: list[Record], names: tuple[str, ...] | None = SHOWN) -> list[Record]:
    """One record per (record, subset) for the subsets in `names` (all when None), split `<split>/<subset>`.

    A subset the run recorded without positions (older files) or with no query is skipped.
    """
    out = []
    for rec in records:
        for name, sub in sorted((rec.result.subsets or {}).items()):
            if names is not None and name not in names:
                continue
            positions = sub.get("positions")
            if positions is None or not positions:
                continue
            pos = np.asarray(positions, dtype=np.int64)
            metrics = sub.get("metrics", {})
            result = replace(rec.result, split=f"{rec.result.split}{SEP}{name}", num_queries=len(pos), subsets={},
                             metrics={m: metrics[m] for m in rec.result.metrics if m in metrics},
                             metrics_extra={m: metrics[m] for m in rec.result.metrics_extra if m in metrics})
            per_query = {m: np.asarray(v)[pos] for m, v in rec.per_query.items()}
            out.append(replace(rec, result=result, per_query=per_query))
    return out


def with_subsets(records: list[Record]) -> list[Record]:
    """`records` followed by their `SHOWN` subset records."""
    return [*records, *subset_records(records)]


def package_markdown(records: list[Record], metric: str = "ndcg@20") -> str:
    """Per package of each split with package subsets: `metric` mean over seeds per Table-1 row and package.

    Empty when no record has package subsets. Rows are labelled as in the tables; n: seeds.
    """
    subs = subset_records(records, None)
    packs = [r for r in subs if PACKAGE in r.result.split]
    if not packs:
        return ""
    selected = {k: v for k, v in select_runs(packs).items() if TABLES[0].pick(k)}
    base = {}  # (dataset, split, profile, device) -> row key -> package -> the seeds' scores
    for key, runs in selected.items():
        split, _, package = key.split.partition(SEP + PACKAGE)
        row = key._replace(split=split)
        for rec in runs.values():
            v = rec.result.metrics.get(metric, rec.result.metrics_extra.get(metric))
            if v is not None and not math.isnan(v):
                base.setdefault((key.dataset, split, key.profile, key.device), {}).setdefault(row, {}).setdefault(
                    package, []).append(float(v))
    sizes = {}
    for r in packs:
        split, _, package = r.result.split.partition(SEP + PACKAGE)
        sizes[(r.dataset, split, package)] = r.result.num_queries
    lines = ["## Per package", "",
             f"{metric.upper()} per package of the cross-implementation queries (mean over seeds; "
             "`exact` queries included: the package columns hold every query of the package). A package's "
             "queries are few, so these are for reading where a method fails, not for ranking.", ""]
    for (dataset, split, profile, device), rows in sorted(base.items()):
        packages = sorted({p for scores in rows.values() for p in scores})
        labels = row_labels(rows)
        lines += [f"### {dataset} · split {split} · {profile} · {device}", "",
                  "| method | " + " | ".join(f"{p} ({sizes.get((dataset, split, p), '?')})" for p in packages) + " |",
                  "|---|" + "---:|" * len(packages)]
        for row in sorted(rows, key=lambda k: labels[k]):
            cells = [f"{np.mean(rows[row][p]):.3f}" if p in rows[row] else "–" for p in packages]
            lines.append(f"| {labels[row]} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)

