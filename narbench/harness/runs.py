"""Result files as a list a user can look at (`narbench runs`): one row per run.

Each row: the run's configuration (dataset, split, encoder, splitter, profile, protocol,
objective, seed), its headline metrics, wall time, device, git commit, configuration hash and
file. Each file is validated as `narbench leaderboard` validates it (`narbench.eval.validation`, less
the per-query bounds that need the dataset loaded): a file with a NaN, infinite or negative metric, a
schema this narbench does not read, or any other fault is reported with its reason and not listed;
a folder that does not exist is fatal.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from narbench.harness.confighash import result_fields, result_hash
from narbench.eval.result import RunResult

METRICS = ("ndcg@20", "mrr@20", "map_capped@20", "map@20")
#: column headers: MAPc is the capped MAP (AP / min(k, |R|)), the uncut one (AP / |R|) says so (docs/protocol.md)
LABELS = {"map_capped@20": "MAPc@20", "map@20": "MAP@20 uncut"}


def run_row(result: RunResult, path: Path) -> dict[str, Any]:
    """One result as a flat dict (JSON-ready)."""
    fields = result_fields(result)
    return {
        "run_id": result.run_id, "path": str(path), "created": result.created,
        "dataset": fields["dataset"], "split": result.split, "encoder": result.encoder, "splitter": result.splitter,
        "profile": result.profile, "protocol": fields["protocol"], "objective": fields["objective"],
        "init": fields["init"], "seed": result.seed,
        "metrics": dict(result.metrics), "metrics_extra": dict(result.metrics_extra or {}), "seconds": (result.timings or {}).get("total"), "device": result.device,
        "git_commit": result.git_commit, "config_hash": result_hash(result),
    }


def list_runs(dirs: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows sorted by creation time, problems): every result file under `dirs`, recursively.

    A folder (or file) that does not exist raises FileNotFoundError naming it, before any is read.
    """
    dirs = [Path(d) for d in dirs]
    for d in dirs:
        if not d.exists():
            raise FileNotFoundError(f"results folder {d} does not exist")
    from narbench.eval.validation import known_datasets, validate_result

    rows, problems, datasets = [], [], known_datasets()
    for d in dirs:
        paths = [d] if d.is_file() else sorted(d.rglob("*.json"))
        for path in paths:
            try:
                rows.append(run_row(validate_result(path, datasets=datasets, check_bounds=False)[0], path))
            except (ValueError, TypeError, KeyError, OSError) as exc:
                problems.append(str(exc))
    rows.sort(key=lambda r: (r["created"] or "", r["run_id"]))
    return rows, problems


def runs_table(rows: list[dict[str, Any]]):
    """The rows as a rich table."""
    from rich.table import Table

    table = Table(title=f"{len(rows)} runs")
    for col, justify in (("created", "left"), ("dataset", "left"), ("split", "left"), ("encoder+splitter", "left"),
                         ("profile", "left"), ("protocol", "left"), ("objective", "left"), ("seed", "right"),
                         *((LABELS.get(m, m), "right") for m in METRICS), ("time s", "right"), ("device", "left"),
                         ("commit", "left"), ("hash", "left")):
        table.add_column(col, justify=justify)
    for r in rows:
        init = " (pretrained)" if r["init"] == "pretrained" else ""
        table.add_row((r["created"] or "")[:19], r["dataset"], r["split"], f"{r['encoder']}+{r['splitter']}{init}",
                      r["profile"], r["protocol"], r["objective"], str(r["seed"]),
                      *(_metric(r, m) for m in METRICS),
                      f"{r['seconds']:.0f}" if r["seconds"] is not None else "-", r["device"],
                      (r["git_commit"] or "-")[:12], r["config_hash"])
    return table


def _metric(row: dict[str, Any], metric: str) -> str:
    value = row["metrics"].get(metric, row.get("metrics_extra", {}).get(metric))
    return f"{value:.4f}" if isinstance(value, (int, float)) else "-"
