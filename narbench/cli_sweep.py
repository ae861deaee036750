"""`narbench sweep` and `narbench runs`: their parsers and handlers (registered by `narbench.cli`).

Thin like the rest of the CLI: the work is `narbench.harness.sweep`, `narbench.harness.launchers` and
`narbench.harness.runs`. Imports of those happen in the handlers, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import signal
import sys

from rich.console import Console

from narbench.cli_args import _checked, _positive_int, _seed
from narbench.train.profiles import PROFILES

_non_negative_int = _checked(int, lambda v: v >= 0, "an integer >= 0")

DEFAULT_GRID = "leaderboard/grid.toml"


def add_sweep_parser(sub, formatter=argparse.HelpFormatter) -> None:
    p = sub.add_parser("sweep", help="run a grid of runs (resumable; locally, on Slurm or on Ray)",
                       formatter_class=formatter,
                       description="Expand a grid (a TOML file, or --models/--datasets/... on the command line) "
                                   "to runs, skip those whose result is already in --out (same configuration "
                                   "hash), run the rest on a launcher. Interrupted and re-run, it does only "
                                   "what is missing.")
    p.add_argument("grid", nargs="?", default=None, help=f"grid TOML file (e.g. {DEFAULT_GRID}); without it, the "
                                                         f"grid is --models x --datasets x ...")
    p.add_argument("--profile", default=None, choices=sorted(PROFILES), help="profile of every run (default: the "
                                                                             "grid file's, else quick)")
    p.add_argument("--seeds", type=_seed, nargs="+", default=None, help="seeds (default: the grid's, else 0)")
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
    p.add_argument("--jobs", type=_positive_int, default=1, help="local: runs at a time")
    p.add_argument("--threads", type=_positive_int, default=None,
                   help="torch threads per run (default: local 1 when --jobs > 1, slurm --cpus, ray 1)")
    g = p.add_argument_group("slurm (submitit)")
    g.add_argument("--partition", default=None, help="Slurm partition")
    g.add_argument("--account", default=None, help="Slurm account")
    g.add_argument("--time", dest="time_min", type=_positive_int, default=120, help="minutes per job")
    g.add_argument("--gpus", type=_non_negative_int, default=0, help="GPUs per job (slurm; ray: per run)")
    g.add_argument("--cpus", type=_positive_int, default=2, help="CPUs per job")
    g.add_argument("--mem-gb", type=_positive_int, default=None, help="memory per job")
    g.add_argument("--runs-per-job", type=_positive_int, default=1, help="runs one Slurm job does one after another")
    g.add_argument("--array-parallelism", type=_positive_int, default=None, help="at most this many array tasks at once")
    g.add_argument("--slurm-param", action="append", default=[], metavar="KEY=VALUE",
                   help="another sbatch parameter for submitit, e.g. qos=high or constraint=a100 (repeatable)")
    g.add_argument("--submitit-cluster", default="slurm", choices=("slurm", "local", "debug"),
                   help="submitit's executor: slurm, or local/debug to try the path on this machine")
    r = p.add_argument_group("ray")
    r.add_argument("--ray-address", default=None, help="ray cluster address (default: start Ray on this machine)")
    p.set_defaults(func=cmd_sweep, interrupted="interrupted")


def _launcher(args: argparse.Namespace, out: str):
    from pathlib import Path

    from narbench.harness import launchers
    from narbench.harness.sweep import WORK_DIR

    if args.launcher == "local":
        threads = args.threads or (1 if args.jobs > 1 else None)
        return launchers.LocalLauncher(args.jobs, threads), threads, args.jobs
    if args.launcher == "slurm":
        extra = dict(kv.split("=", 1) for kv in args.slurm_param if "=" in kv)
        opts = launchers.SlurmOptions(partition=args.partition, account=args.account, time_min=args.time_min,
                                      gpus=args.gpus, cpus=args.cpus, mem_gb=args.mem_gb, per_job=args.runs_per_job,
                                      parallel=args.array_parallelism, extra=extra)
        launcher = launchers.SubmititLauncher(Path(out) / WORK_DIR / "submitit", opts, cluster=args.submitit_cluster)
        return launcher, args.threads or args.cpus, args.array_parallelism or 64
    threads = args.threads or 1
    return launchers.RayLauncher(args.ray_address, threads, args.gpus), threads, args.jobs


def cmd_sweep(args: argparse.Namespace) -> int:
    """`narbench sweep`: 0 when every run is done, 1 when some failed; the summary on stdout."""
    from narbench.harness.sweep import GridError, expand, load_grid, parse_grid, render_plan, render_report, run_sweep

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


def add_runs_parser(sub) -> None:
    p = sub.add_parser("runs", help="list result files: configuration, metrics, time, device, git commit")
    p.add_argument("dirs", nargs="*", default=["runs"], metavar="DIR", help="folders of result files (default: runs)")
    p.add_argument("--json", action="store_true", help="print them as JSON on stdout")
    p.set_defaults(func=cmd_runs)


def cmd_runs(args: argparse.Namespace) -> int:
    """`narbench runs`: a table (or JSON) of the result files under DIR; unreadable files are named on stderr."""
    import json

    from narbench.harness.runs import list_runs, runs_table

    rows, problems = list_runs(args.dirs)
    err = Console(stderr=True)
    for problem in problems:
        err.print(f"[yellow]skipped:[/yellow] {problem}", highlight=False, soft_wrap=True)
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        (Console() if sys.stdout.isatty() else Console(width=250)).print(runs_table(rows))
    return 0


__all__ = ["add_runs_parser", "add_sweep_parser", "cmd_runs", "cmd_sweep"]
