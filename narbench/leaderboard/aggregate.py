"""Aggregation over seeds: one row per `Key` with n, the seeds, mean and std of every metric.

`ndcg_paper@k` (the authors' NDCG convention, `narbench.eval.metrics`) is in result files written since
it was added only: a row gets its mean only when every one of its seeds has it (NaN otherwise), so
a mean never covers fewer seeds than the row's n.

`verified` says how far a row's numbers were checked beyond validation (every file's values possible and
equal to its per-query scores): `re-run` when every seed's file was re-made exactly
(`narbench leaderboard --verify`, training-free encoders only, `narbench.harness.verify`), else
`unverified`: a trained encoder's result, or a floor not re-run. A self-consistent forgery of a trained
run cannot be told from a real one without training it again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from narbench.leaderboard.records import KEYS, Record, select_runs
from narbench.eval.metrics import METRICS, PAPER_NDCG
from narbench.data.store import atomic_write_bytes

EXTRA = tuple(f"map_capped@{k}" for k in (20, 50, 100))
#: metrics older result files lack: the row's mean is NaN unless every seed has them
OPTIONAL = PAPER_NDCG
ALL_METRICS = METRICS + EXTRA + OPTIONAL
#: the `verified` column: every seed re-made exactly, or not
RERUN, UNVERIFIED = "re-run", "unverified"


def aggregate(records: Iterable[Record]):
    """A pandas DataFrame, one row per group (KEYS): n seeds, the seeds, `verified`, mean and std per metric.

    std is the sample standard deviation (ddof=1) over seeds; NaN when n == 1. A metric that
    some seed's result file lacks (`OPTIONAL`) is NaN for the whole row.
    """
    import pandas as pd

    rows = []
    for key, by_seed in select_runs(records).items():
        row: dict[str, Any] = dict(zip(KEYS, key))
        seeds = sorted(by_seed)
        row["n"] = len(seeds)
        row["seeds"] = " ".join(str(s) for s in seeds)
        row["verified"] = RERUN if all(by_seed[s].verified for s in seeds) else UNVERIFIED
        for m in ALL_METRICS:
            vals = [_score(by_seed[s], m) for s in seeds]
            vals = np.array([] if None in vals else vals, dtype=np.float64)
            row[f"{m} mean"] = float(vals.mean()) if len(vals) else math.nan
            row[f"{m} std"] = float(vals.std(ddof=1)) if len(vals) > 1 else math.nan
        rows.append(row)
    columns = [*KEYS, "n", "seeds", "verified", *[f"{m} {s}" for m in ALL_METRICS for s in ("mean", "std")]]
    return pd.DataFrame(rows, columns=columns)


def _score(rec: Record, metric: str) -> float | None:
    v = rec.result.metrics.get(metric, rec.result.metrics_extra.get(metric))
    return None if v is None else float(v)


def write_aggregate(df, out_dir: str | Path,
                    write: Callable[[Path, bytes], None] = atomic_write_bytes) -> tuple[Path, Path]:
    """`aggregate.csv` (6 decimals) and `aggregate.json` (a list of rows; NaN as null), each by `write`."""
    out_dir = Path(out_dir)  # `write` makes the folder
    csv = out_dir / "aggregate.csv"
    write(csv, df.to_csv(index=False, float_format="%.6f", lineterminator="\n").encode())
    rows = []
    for rec in df.to_dict(orient="records"):
        rows.append({k: (None if isinstance(v, float) and math.isnan(v) else
                         round(v, 6) if isinstance(v, float) else
                         int(v) if isinstance(v, (np.integer,)) else v) for k, v in rec.items()})
    js = out_dir / "aggregate.json"
    write(js, (json.dumps(rows, indent=2, sort_keys=True) + "\n").encode())
    return csv, js
