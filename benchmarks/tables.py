"""Run the paper's Table 1-3 cells for several seeds, then print the leaderboard's tables for them.

    python benchmarks/tables.py --dataset nas --profile quick --seeds 0 1 2 --jobs 2 --out runs/tables
    python benchmarks/tables.py --summarize runs/tables       # only aggregate existing results

Cells: Table 1 = ours+motif, gcn, gat (and the random floor); Table 2 = ours with each
splitter; Table 3 = ours with each objective. Each cell is one `narbench run` subprocess;
existing results for a cell and seed in --out are reused, so an interrupted sweep resumes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console

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
    from narbench import leaderboard

    return {(r.dataset, r.result.encoder, r.result.splitter, r.objective, r.result.seed) for r in leaderboard.collect([out])}


def run_cell(args, encoder, splitter, objective, seed) -> None:
    cmd = [sys.executable, "-m", "narbench.cli", "run", "--encoder", encoder, "--splitter", splitter,
           "--dataset", args.dataset, "--profile", args.profile, "--seed", str(seed), "--device", args.device,
           "--out", str(args.out), "--no-progress"]
    cmd += ["--objective", objective]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads)) if args.threads else None
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode}): {proc.stderr[-500:]}"
    print(f"{cell_key(encoder, splitter, objective)} seed {seed}: {status}", flush=True)


def summarize(out: Path, console: Console) -> None:
    """The leaderboard's tables (mean ± std over seeds, significance) for the results in `out`."""
    from narbench import leaderboard

    leaderboard.print_tables(leaderboard.build_tables(leaderboard.collect([out])), console)


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
    summarize(args.out, console)


if __name__ == "__main__":
    main()
