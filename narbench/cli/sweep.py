"""`narbench sweep`: a grid of runs, resumable, on a launcher (local, Slurm, Ray).

Thin like the rest of the CLI: the work is `narbench.harness.sweep` and `narbench.harness.launchers`.
Imports of those happen in the handler, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import signal
import sys

from rich.console import Console

from narbench.cli.args import ShowDefaults, non_negative_int, positive_int, seed
from narbench.train.profiles import PROFILES

DEFAULT_GRID = "leaderboard/grid.toml"


def register(sub) -> None:
    """Add `sweep` to the subcommands."""
    p = sub.add_parser("sweep", help="run a grid of runs (resumable; locally, on Slurm or on Ray)",
                       formatter_class=ShowDefaults,
                       description="Expand a grid (a TOML file, or --models/--datasets/... on the command line) "
                                   "to runs, skip those whose result is already in --out (same configuration "
                                   "hash), run the rest on a launcher. Interrupted and re-run, it does only "
                                   "what is missing.")
    p.add_argument("grid", nargs="?", default=None, help=f"grid TOML file (e.g. {DEFAULT_GRID}); without it, the "
                                                         f"grid is --models x --datasets x ...")
    p.add_argument("--profile", default=None, choices=sorted(PROFILES), help="profile of every run (default: the "
                                                                             "grid file's, else quick)")
    p.add_argument("--seeds", type=seed, nargs="+", default=None, help="seeds (default: the grid's, else 0)")
    p.add_argument("--block", dest="blocks", action="append", default=None, metavar="NAME",
                   help="only this block of the grid file (repeatable)")
    p.add_argument("--datasets", "--dataset", dest="datasets", nargs="+", default=None,
                   help="only these datasets (with a grid file), or the datasets of the command-line grid")
    p.add_argument("--models", nargs="+", default=None, metavar="ENCODER+SPLITTER",
                   help="only these models of the grid file (any parameters), or the models of the command-line "
                        "grid, e.g. ours+motif gcn+none")
    p.add_argument("--splits", nargs="+", default=None, help="only these splits (with a grid file), or the splits of "
                                                            "the command-line grid (default: standard)")
    p.add_argument("--protocols", nargs="+", default=None, help="only these protocols (with a grid file), or the "
                                                               "protocols of the command-line grid (default: family)")
    p.add_argument("--objectives", nargs="+", default=None, help="command-line grid: the objectives (default: the "
                                                                 "profile's)")
    p.add_argument("--out", default="runs/sweep", help="result folder; results in it with the same configuration "
                                                       "are not run again")
    p.add_argument("--results", action="append", default=[], metavar="DIR",
                   help="another folder whose results count as done (repeatable), e.g. leaderboard/results")
    p.add_argument("--device", default="auto", help="device of every run: auto, cpu, cuda, cuda:N")
    p.add_argument("--dry-run", action="store_true", help="list the grid's runs (done / to run) and run nothing")
    p.add_argument("--launcher", default="local", choices=("local", "slurm", "ray"), help="where the runs execute")
    p.add_argument("--jobs", type=positive_int, default=1, help="local: runs at a time")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads per run (default: local 1 when --jobs > 1, slurm --cpus, ray 1)")
    g = p.add_argument_group("slurm (submitit)")
    g.add_argument("--partition", default=None, help="Slurm partition")
    g.add_argument("--account", default=None, help="Slurm account")
    g.add_argument("--time", dest="time_min", type=positive_int, default=120, help="minutes per job")
    g.add_argument("--gpus", type=non_negative_int, default=0, help="GPUs per job (slurm; ray: per run)")
    g.add_argument("--cpus", type=positive_int, default=2, help="CPUs per job")
    g.add_argument("--mem-gb", type=positive_int, default=None, help="memory per job")
    g.add_argument("--runs-per-job", type=positive_int, default=1, help="runs one Slurm job does one after another")
    g.add_argument("--array-parallelism", type=positive_int, default=None, help="at most this many array tasks at once")
    g.add_argument("--slurm-param", action="append", default=[], metavar="KEY=VALUE",
                   help="another sbatch parameter for submitit, e.g. qos=high or constraint=a100 (repeatable)")
    g.add_argument("--submitit-cluster", default="slurm", choices=("slurm", "local", "debug"),
                   help="submitit's executor: slurm, or local/debug to try the path on this machine")
    r = p.add_argument_group("ray")
    r.add_argument("--ray-address", default=None, help="ray cluster address (default: start Ray on this machine)")
    p.set_defaults(func=run, interrupted="interrupted")


def _launcher(args: argparse.Namespace, out: str):
    from pathlib import Path

    from narbench.harness.local_launcher import LocalLauncher
    from narbench.harness.ray_launcher import RayLauncher
    from narbench.harness.slurm_launcher import SlurmOptions, SubmititLauncher
    from narbench.harness.sweepplan import WORK_DIR

    if args.launcher == "local":
        threads = args.threads or (1 if args.jobs > 1 else None)
        return LocalLauncher(args.jobs, threads), threads, args.jobs
    if args.launcher == "slurm":
        extra = dict(kv.split("=", 1) for kv in args.slurm_param if "=" in kv)
        opts = SlurmOptions(partition=args.partition, account=args.account, time_min=args.time_min,
                            gpus=args.gpus, cpus=args.cpus, mem_gb=args.mem_gb, per_job=args.runs_per_job,
                            parallel=args.array_parallelism, extra=extra)
        launcher = SubmititLauncher(Path(out) / WORK_DIR / "submitit", opts, cluster=args.submitit_cluster)
        return launcher, args.threads or args.cpus, args.array_parallelism or 64
    threads = args.threads or 1
    return RayLauncher(args.ray_address, threads, args.gpus), threads, args.jobs


def run(args: argparse.Namespace) -> int:
    """`narbench sweep`: 0 when every run is done, 1 when some failed; the summary on stdout."""
    from narbench.harness.grid import GridError, load_grid, parse_grid
    from narbench.harness.sweep import render_report, run_sweep
    from narbench.harness.sweepplan import expand, render_plan

    err = Console(stderr=True)
    if args.grid:
        if args.objectives:
            raise GridError("--objectives makes a command-line grid; a grid file names its objectives per block")
        grid = load_grid(args.grid)
        filters = dict(datasets=args.datasets, splits=args.splits, protocols=args.protocols, models=args.models)
    else:
        if not args.models or not args.datasets:
            raise GridError("give a grid file, or --models and --datasets for a grid on the command line")
        block = {"name": "cli", "datasets": args.datasets, "models": args.models,
                 "splits": args.splits or ["standard"], "protocols": args.protocols or ["family"],
                 **({"objectives": args.objectives} if args.objectives else {})}
        grid, filters = parse_grid({"block": [block]}, "command line"), {}
    _check_out(args.out, args.dry_run)
    plan = expand(grid, out=args.out, profile=args.profile, seeds=args.seeds, device=args.device, blocks=args.blocks,
                  results=args.results, console=err, **filters)
    if args.dry_run:
        render_plan(plan, Console() if sys.stdout.isatty() else Console(width=250))
        return 0
    launcher, threads, parallel = _launcher(args, args.out)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the runs like Ctrl-C
    try:
        report = run_sweep(plan, launcher, threads=threads, parallel=parallel, console=err)
    finally:
        signal.signal(signal.SIGTERM, previous)
    render_report(report, Console())
    return 0 if report.ok else 1


def _check_out(out: str, dry_run: bool) -> None:
    """`--out` is a folder that can be written (`PreflightError`, one line, before anything runs); a dry
    run, which writes nothing, only needs it not to be a file."""
    from pathlib import Path

    from narbench.harness.preflight import PreflightError, check_output

    if not dry_run:
        check_output(out, what="sweep output folder")
    else:
        existing = next((p for p in (Path(out), *Path(out).parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            where = "" if existing == Path(out) else f": {existing}"
            raise PreflightError(f"sweep output folder {out}{where} is a file, not a folder")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
