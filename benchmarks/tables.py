"""Run the paper's Table 1-4 cells for several seeds, then print the leaderboard's tables for them.

    python benchmarks/tables.py --dataset nas --profile quick --seeds 0 1 2 --jobs 2 --out runs/tables
    python benchmarks/tables.py --dataset real --profile quick --jobs 2 --out runs/tables
    python benchmarks/tables.py --dataset real --split unseen --tables table1 --out runs/tables
    python benchmarks/tables.py --dataset real --protocol paper --tables table1 --out runs/tables
    python benchmarks/tables.py --summarize runs/tables       # only aggregate existing results

`--split` and `--protocol` pass through to every run (`narbench run --split/--protocol`).
Cells: Table 1 = ours+motif, gcn, gat, gin, gps and the training-free floors (random, ophist,
ophist-tfidf, wl, graphstats; a floor's result holds under every protocol, so it is run once per split);
Table 2 = ours with each
splitter; Table 3 = ours with each objective; Table 4 (real only) = ours+motif initialised
from the `nas` ours+motif run of the same profile and seed found in --pretrained (default
--out), so run `nas` first. Seed 0 of the Table 1 encoders also saves its query embeddings
(the t-SNE maps) and ours+motif saves its weights (the Table 4 source). Each cell is one
`narbench run` subprocess; existing results for a cell and seed in --out are reused, so an
interrupted sweep resumes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console

from narbench.leaderboard import PRETRAINED, SCRATCH
from narbench.profiles import TrainConfig

DEFAULT_OBJECTIVE = TrainConfig().objective

CELLS = {  # (encoder, splitter, objective or None for the default, init)
    "table1": [(e, s, None, SCRATCH) for e, s in (("ophist", "none"), ("ophist-tfidf", "none"), ("wl", "none"),
                                                  ("graphstats", "none"), ("random", "none"), ("ours", "motif"),
                                                  ("gcn", "none"), ("gat", "none"), ("gin", "none"),
                                                  ("gps", "none"))],
    "table2": [("ours", s, None, SCRATCH) for s in ("node-number", "motif-number", "random", "motif")],
    "table3": [("ours", "motif", o, SCRATCH) for o in ("ce", "cl", "ce+cl")],
    "table4": [("ours", "motif", None, SCRATCH), ("ours", "motif", None, PRETRAINED)],
}
SOURCE_DATASET = "nas"  # Table 4 pre-trains on this dataset


def cell_key(encoder: str, splitter: str, objective: str | None, init: str = SCRATCH) -> str:
    return f"{encoder}+{splitter}" + (f" ({objective})" if objective else "") + (f" [{init}]" if init != SCRATCH else "")


def existing(out: Path) -> set[tuple]:
    """(dataset, split, protocol, encoder, splitter, objective, init, seed) of the results in `out`.

    A training-free encoder's protocol is `any` (it holds under every protocol)."""
    from narbench import leaderboard

    return {(r.dataset, r.result.split, r.protocol, r.result.encoder, r.result.splitter, r.objective, r.init,
             r.result.seed) for r in leaderboard.collect([out])}


def cell_protocol(encoder: str, protocol: str) -> str:
    """The protocol a cell's result is filed under: `any` for a training-free encoder."""
    from narbench import registry
    from narbench.leaderboard import ANY_PROTOCOL

    return protocol if registry.load("encoder", encoder).trainable else ANY_PROTOCOL


def pretrained_source(folder: Path, profile: str, seed: int) -> Path | None:
    """The latest `nas` ours+motif result (default objective, from scratch) of this profile and
    seed in `folder` whose weights were saved, or None."""
    from narbench import checkpoint, leaderboard

    found = None
    for r in leaderboard.collect([folder]):  # sorted by run_id: the last match is the latest
        res = r.result
        if (r.dataset, res.encoder, res.splitter, r.objective, r.init, res.profile, res.seed) == (
                SOURCE_DATASET, "ours", "motif", DEFAULT_OBJECTIVE, SCRATCH, profile, seed) and \
                r.path.with_name(res.run_id + checkpoint.SUFFIX).is_file():
            found = r.path
    return found


def command(args, encoder, splitter, objective, init, seed) -> list[str] | None:
    """The `narbench run` command line of one cell and seed; None when a Table 4 source is missing."""
    cmd = [sys.executable, "-m", "narbench.cli", "run", "--encoder", encoder, "--splitter", splitter,
           "--dataset", args.dataset, "--split", args.split, "--protocol", args.protocol,
           "--profile", args.profile, "--seed", str(seed), "--device", args.device,
           "--out", str(args.out), "--no-progress", "--objective", objective]
    if (encoder, splitter, objective, init) == ("ours", "motif", DEFAULT_OBJECTIVE, SCRATCH):
        cmd.append("--save-weights")  # the Table 4 source when this dataset is `nas`
    if seed == 0 and init == SCRATCH and objective == DEFAULT_OBJECTIVE and (encoder, splitter) in (
            ("ours", "motif"), ("gcn", "none"), ("gat", "none")):
        cmd.append("--save-embeddings")  # the t-SNE maps (Figure 5)
    if init == PRETRAINED:
        source = pretrained_source(args.pretrained or args.out, args.profile, seed)
        if source is None:
            return None
        cmd += ["--init-from", str(source)]
    return cmd


def run_cell(args, encoder, splitter, objective, init, seed) -> None:
    name = f"{cell_key(encoder, splitter, objective, init)} seed {seed}"
    cmd = command(args, encoder, splitter, objective, init, seed)
    if cmd is None:
        print(f"{name}: SKIPPED, no {SOURCE_DATASET} ours+motif {args.profile} seed {seed} result with saved "
              f"weights in {args.pretrained or args.out} (run --dataset {SOURCE_DATASET} first)", flush=True)
        return
    if args.dry_run:
        print(" ".join(cmd), flush=True)
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads)) if args.threads else None
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode}): {proc.stderr[-500:]}"
    print(f"{name}: {status}", flush=True)


def summarize(out: Path, console: Console) -> None:
    """The leaderboard's tables (mean ± std over seeds, significance) for the results in `out`."""
    from narbench import leaderboard

    leaderboard.print_tables(leaderboard.build_tables(leaderboard.collect([out])), console)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="nas")
    parser.add_argument("--split", default="standard", help="a split of the dataset (real: standard or unseen)")
    parser.add_argument("--protocol", default="family", help="family (default) or paper")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tables", nargs="+", default=None, choices=list(CELLS),
                        help=f"default: all (table4 only when --dataset is not {SOURCE_DATASET})")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    parser.add_argument("--threads", type=int, default=0, help="OMP threads per run (0: torch's default)")
    parser.add_argument("--out", type=Path, default=Path("runs/tables"))
    parser.add_argument("--pretrained", type=Path, default=None,
                        help=f"folder with the {SOURCE_DATASET} ours+motif runs for Table 4 (default: --out)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    parser.add_argument("--summarize", type=Path, default=None, help="only aggregate results in this folder")
    args = parser.parse_args()
    console = Console(width=300)
    if args.summarize:
        summarize(args.summarize, console)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    tables = args.tables or [t for t in CELLS if t != "table4" or args.dataset != SOURCE_DATASET]
    done = existing(args.out)
    todo = []
    for name in tables:
        for enc, spl, obj, init in CELLS[name]:
            for seed in args.seeds:
                cell = (enc, spl, obj or DEFAULT_OBJECTIVE, init, seed)
                filed = (args.dataset, args.split, cell_protocol(enc, args.protocol), *cell)
                if filed not in done and cell not in todo:
                    todo.append(cell)
    console.print(f"{len(todo)} runs to do, {args.jobs} at a time")
    with ThreadPoolExecutor(1 if args.dry_run else args.jobs) as pool:  # dry run: commands in order
        list(pool.map(lambda t: run_cell(args, *t), todo))
    if not args.dry_run:
        summarize(args.out, console)


if __name__ == "__main__":
    main()
