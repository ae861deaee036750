"""Run the paper's Table 1-3 cells for several seeds and print mean +- std of the nine metrics.

    python benchmarks/tables.py --dataset nas --profile quick --seeds 0 1 2 --jobs 2 --out runs/tables
    python benchmarks/tables.py --summarize runs/tables       # only aggregate existing results

Cells: Table 1 = ours+motif, gcn, gat (and the random floor); Table 2 = ours with each
splitter; Table 3 = ours with each objective. Each cell is one `narbench run` subprocess;
existing results for a cell and seed in --out are reused, so an interrupted sweep resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from narbench.metrics import METRICS
from narbench.profiles import TrainConfig

DEFAULT_OBJECTIVE = TrainConfig().objective

CELLS = {
    "table1": [("ours", "motif", None), ("gcn", "none", None), ("gat", "none", None), ("random", "none", None)],
    "table2": [("ours", s, None) for s in ("node-number", "motif-number", "random", "motif")],
    "table3": [("ours", "motif", o) for o in ("ce", "cl", "ce+cl")],
}


def cell_key(encoder: str, splitter: str, objective: str | None) -> str:
    return f"{encoder}+{splitter}" + (f" ({objective})" if objective else "")


def existing(out: Path) -> set[tuple]:
    """(dataset, encoder, splitter, objective, seed) of the results already in `out`."""
    found = set()
    for path in out.glob("*.json"):
        d = json.loads(path.read_text())
        found.add((d["dataset"]["name"], d["encoder"], d["splitter"], d["config"]["encoder"]["train"]["objective"],
                   d["seed"]))
    return found


def run_cell(args, encoder, splitter, objective, seed) -> None:
    cmd = [sys.executable, "-m", "narbench.cli", "run", "--encoder", encoder, "--splitter", splitter,
           "--dataset", args.dataset, "--profile", args.profile, "--seed", str(seed), "--device", args.device,
           "--out", str(args.out), "--no-progress"]
    cmd += ["--objective", objective]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads)) if args.threads else None
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode}): {proc.stderr[-500:]}"
    print(f"{cell_key(encoder, splitter, objective)} seed {seed}: {status}", flush=True)


def summarize(out: Path, console: Console, dataset: str | None = None) -> None:
    import numpy as np

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for path in sorted(out.glob("*.json")):
        d = json.loads(path.read_text())
        if dataset and d["dataset"]["name"] != dataset:
            continue
        obj = d["config"]["encoder"]["train"]["objective"]
        groups[(d["dataset"]["name"], d["profile"], d["encoder"], d["splitter"], obj)].append(d)
    for table_name, cells in CELLS.items():
        table = Table(title=f"{table_name} (mean ± std over seeds)")
        for col in ("dataset", "profile", "cell", "n", *METRICS, "map_capped@20"):
            table.add_column(col, justify="right")
        for (ds, prof, enc, spl, obj), runs in sorted(groups.items()):
            if not any(enc == e and spl == s and (o is None or o == obj) for e, s, o in cells):
                continue
            if table_name != "table3" and obj != "ce+cl" and enc != "random":
                continue
            vals = {m: np.array([r["metrics"].get(m, r["metrics_extra"].get(m)) for r in runs]) for m in
                    (*METRICS, "map_capped@20")}
            table.add_row(ds, prof, cell_key(enc, spl, obj if table_name == "table3" else None), str(len(runs)),
                          *[f"{v.mean():.3f}±{v.std():.3f}" for v in vals.values()])
        console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="nas")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tables", nargs="+", default=list(CELLS), choices=list(CELLS))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    parser.add_argument("--threads", type=int, default=0, help="OMP threads per run (0: torch's default)")
    parser.add_argument("--out", type=Path, default=Path("runs/tables"))
    parser.add_argument("--summarize", type=Path, default=None, help="only aggregate results in this folder")
    args = parser.parse_args()
    console = Console(width=300)
    if args.summarize:
        summarize(args.summarize, console)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    done = existing(args.out)
    todo = []
    for name in args.tables:
        for enc, spl, obj in CELLS[name]:
            for seed in args.seeds:
                cell = (enc, spl, obj or DEFAULT_OBJECTIVE, seed)
                if (args.dataset, *cell) not in done and cell not in todo:
                    todo.append(cell)
    console.print(f"{len(todo)} runs to do, {args.jobs} at a time")
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda t: run_cell(args, *t), todo))
    summarize(args.out, console, args.dataset)


if __name__ == "__main__":
    main()
