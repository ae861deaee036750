"""A sweep's plan: the runs a grid (`narbench.harness.grid`) expands to, deduplicated by their
configuration hash (`narbench.harness.confighash`), each marked done when a result file with that
hash is in the output folder (or another `--results` folder); the `narbench run` command line of
each run (`task_of`), the file that claims it (`claim_path`) and `--dry-run`'s table (`render_plan`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from narbench.core import registry
from narbench.eval.result import RunResult
from narbench.harness.claims import claim_holder
from narbench.harness.confighash import ANY_PROTOCOL, code_version, config_hash, result_hash
from narbench.harness.grid import Grid, GridError, Model, parse_seeds
from narbench.harness.launchers import Task
from narbench.harness.runner import ConfigError, RunConfig, resolve
from narbench.train import checkpoint
from narbench.train.profiles import PROFILES, get_profile
from narbench.train.protocol import PROTOCOLS

WORK_DIR = ".sweep"  # under the output folder: run logs, claims and submitit's files


@dataclass
class PlannedRun:
    """One run of the grid: its configuration, hash, and what is known of it."""

    name: str
    block: str
    cfg: RunConfig
    hash: str
    source: str | None = None  # hash of the run whose weights it starts from (init_from)
    existing: list[Path] = field(default_factory=list)  # result files with this hash

    @property
    def done(self) -> bool:
        return bool(self.existing)


@dataclass
class Plan:
    runs: list[PlannedRun]
    out: Path
    known: dict[str, list[Path]]  # hash -> result files found in the scanned folders

    @property
    def todo(self) -> list[PlannedRun]:
        return [r for r in self.runs if not r.done]


def planned_fields(cfg: RunConfig) -> dict[str, Any]:
    """The hashed fields (`narbench.harness.confighash.FIELDS`) of a run not run yet, as its result file will record them."""
    encoder_cls, splitter, splitter_name = resolve(cfg)
    if cfg.profile not in PROFILES:
        raise ConfigError(f"unknown profile {cfg.profile!r}; known profiles: {', '.join(PROFILES)}")
    if cfg.protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {cfg.protocol!r}; known protocols: {', '.join(sorted(PROTOCOLS))}")
    try:
        profile = get_profile(cfg.profile, **({"objective": cfg.objective} if cfg.objective else {}))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    dataset_cls = registry.load("dataset", cfg.dataset)
    if cfg.split not in dataset_cls.split_names:
        raise ConfigError(f"dataset {cfg.dataset!r} has no split {cfg.split!r}; its splits: "
                          f"{', '.join(dataset_cls.split_names)}")
    return {
        "encoder": cfg.encoder,
        "encoder_params": {**encoder_cls.PARAMS, **cfg.encoder_params} if getattr(encoder_cls, "PARAMS", None) else {},
        "splitter": splitter_name, "splitter_params": splitter.params(),
        "dataset": dataset_cls.name or cfg.dataset, "dataset_version": str(dataset_cls.version), "split": cfg.split,
        "protocol": cfg.protocol if encoder_cls.trainable else ANY_PROTOCOL, "profile": cfg.profile,
        "objective": profile.train.objective, "init": "pretrained" if cfg.init_from else "scratch",
        "seed": int(cfg.seed), "top_k": int(cfg.top_k),
        "encoder_code": code_version(registry.origin("encoder", cfg.encoder)),
        "splitter_code": code_version(registry.origin("splitter", splitter_name)),
        **({"compile": True} if cfg.compile else {}),
        **({"epochs": int(cfg.epochs)} if cfg.epochs is not None else {}),
        **({"curve": True} if cfg.curve else {}),
        **({"holdout": cfg.holdout} if cfg.holdout != "family" else {}),
    }


def scan(dirs: Iterable[str | Path], console: Console | None = None) -> dict[str, list[Path]]:
    """Configuration hash -> the result files with it, under `dirs` (recursively; missing folders are empty).

    The hash is recomputed from each file's recorded configuration, so files written before the
    hash was stored count too. An unreadable file is reported and ignored (it is not a result).
    """
    found: dict[str, list[Path]] = {}
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        for path in sorted(d.rglob("*.json")):
            if WORK_DIR in path.parts or not path.is_file():
                continue
            try:
                found.setdefault(result_hash(RunResult.read(path)), []).append(path)
            except (ValueError, TypeError, KeyError, OSError) as exc:
                if console:
                    console.print(f"[yellow]not a result, ignored:[/yellow] {escape(str(exc))}", highlight=False)
    return found


def _name(cfg: RunConfig, fields: dict[str, Any]) -> str:
    params = "".join(f"-{k}{v}" for k, v in sorted(cfg.splitter_params.items()))
    variant = "".join(f"+{k}.{v}" for k, v in sorted(cfg.encoder_params.items()))
    extra = ((f"-ep{cfg.epochs}" if cfg.epochs is not None else "") + ("-curve" if cfg.curve else "")
             + (f"-{cfg.holdout}" if cfg.holdout != "family" else ""))
    return (f"{cfg.dataset}-{cfg.split}-{cfg.encoder}{variant}+{fields['splitter']}{params}-{fields['protocol']}-"
            f"{fields['objective']}-{fields['init']}-s{cfg.seed}{extra}")


def expand(grid: Grid, *, out: str | Path, profile: str | None = None, seeds: Sequence[int] | None = None,
           device: str = "auto", blocks: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
           splits: Sequence[str] | None = None, models: Sequence[str] | None = None,
           protocols: Sequence[str] | None = None, results: Sequence[str | Path] = (),
           console: Console | None = None) -> Plan:
    """The runs of `grid` (deduplicated by hash), each marked done when a result with its hash exists.

    `profile` / `seeds` override the grid's; `blocks` / `datasets` / `splits` / `protocols` keep only
    those; `models` keeps the models whose 'encoder+splitter' is listed (whatever their parameters).
    `results` are more folders whose results count as done (besides `out`). Raises GridError /
    ConfigError / UnknownNameError for a grid naming something that does not exist, or for a filter
    naming something no selected block has, before anything runs.
    """
    profile = profile or grid.profile
    if seeds:
        seeds = parse_seeds(tuple(seeds), "--seeds")
    if blocks:
        unknown = set(blocks) - {b.name for b in grid.blocks}
        if unknown:
            raise GridError(f"unknown block(s) {', '.join(sorted(unknown))}; the grid has "
                            f"{', '.join(b.name for b in grid.blocks)}")
    selected = [b for b in grid.blocks if not blocks or b.name in blocks]
    for option, wanted, have in (
            ("--datasets", datasets, {d for b in selected for d in b.datasets}),
            ("--splits", splits, {s for b in selected for s in b.splits}),
            ("--protocols", protocols, {p for b in selected for p in b.protocols}),
            ("--models", models, {m.label for b in selected for m in b.models})):
        unknown = set(wanted or ()) - have
        if unknown:  # a typo would otherwise select nothing, or (before) be ignored and run everything
            raise GridError(f"{option}: {', '.join(sorted(unknown))} not in the selected block(s); they have "
                            f"{', '.join(sorted(have))}")
    runs: dict[str, PlannedRun] = {}
    for block in selected:
        for ds, split, protocol, model, objective, seed in itertools.product(
                block.datasets, block.splits, block.protocols, block.models, block.objectives,
                seeds or block.seeds or grid.seeds):
            if ((datasets and ds not in datasets) or (splits and split not in splits)
                    or (protocols and protocol not in protocols) or (models and model.label not in models)):
                continue
            source = None
            if block.init_from:
                src_ds, src_model = block.init_from
                src_cfg = _config(src_model, src_ds, "standard", protocol, profile, None, seed, device, out)
                source = config_hash(planned_fields(src_cfg))
                if source in runs:  # the source runs too, saving its weights
                    runs[source].cfg = replace(runs[source].cfg, save_weights=True)
                else:
                    runs[source] = PlannedRun(_name(src_cfg, planned_fields(src_cfg)), block.name,
                                              replace(src_cfg, save_weights=True), source)
            cfg = replace(_config(model, ds, split, protocol, profile, objective, seed, device, out,
                                  init_from="pending" if source else None), epochs=block.epochs, curve=block.curve,
                          holdout=block.holdout)
            fields = planned_fields(cfg)
            h = config_hash(fields)
            if h in runs:  # the same run asked for by two blocks: one run, with every side file asked for
                prev = runs[h]
                prev.cfg = replace(prev.cfg, save_weights=prev.cfg.save_weights or cfg.save_weights,
                                   save_embeddings=prev.cfg.save_embeddings or cfg.save_embeddings)
                continue
            runs[h] = PlannedRun(_name(cfg, fields), block.name, cfg, h, source)
    if not runs:
        raise GridError("the grid selects no run (check --block / --datasets / --splits / --protocols / --models)")
    known = scan([out, *results], console)
    plan = Plan(list(runs.values()), Path(out), known)
    for run in plan.runs:
        run.existing = list(known.get(run.hash, []))
    return plan


def _config(model: Model, dataset: str, split: str, protocol: str, profile: str, objective: str | None, seed: int,
            device: str, out: str | Path, init_from: str | None = None) -> RunConfig:
    return RunConfig(encoder=model.encoder, splitter=model.splitter, dataset=dataset, split=split, protocol=protocol,
                     profile=profile, seed=seed, device=device, objective=objective,
                     splitter_params=dict(model.params), encoder_params=dict(model.encoder_params),
                     out=str(out), progress=False,
                     save_weights=model.save_weights, save_embeddings=seed in model.save_embeddings,
                     init_from=init_from)


def weights_of(paths: Iterable[Path]) -> Path | None:
    """The latest of these result files whose weights were saved (`<run_id>.pt` beside it), or None."""
    with_weights = [p for p in sorted(paths, key=lambda p: p.name) if p.with_suffix(checkpoint.SUFFIX).is_file()]
    return with_weights[-1] if with_weights else None


def task_of(run: PlannedRun, work: Path, threads: int | None) -> Task:
    """The `narbench run` command line of a planned run."""
    c = run.cfg
    argv = ["--encoder", c.encoder, "--dataset", c.dataset, "--split", c.split, "--protocol", c.protocol,
            "--profile", c.profile, "--seed", str(c.seed), "--device", c.device, "--out", str(c.out)]
    if c.splitter:
        argv += ["--splitter", c.splitter]
    if c.objective:
        argv += ["--objective", c.objective]
    for k, v in sorted(c.splitter_params.items()):
        argv += ["--param", f"{k}={v}"]
    for k, v in sorted(c.encoder_params.items()):
        argv += ["--encoder-param", f"{k}={v}"]
    if c.epochs is not None:
        argv += ["--epochs", str(c.epochs)]
    if c.curve:
        argv.append("--curve")
    if c.holdout != "family":
        argv += ["--holdout", c.holdout]
    if c.save_weights:
        argv.append("--save-weights")
    if c.save_embeddings:
        argv.append("--save-embeddings")
    if c.init_from:
        argv += ["--init-from", str(c.init_from)]
    if threads:
        argv += ["--jobs", str(threads)]
    return Task(run.name, tuple(argv), str(work / "logs" / f"{run.name}.log"), threads, str(claim_path(work, run)))


def claim_path(work: Path, run: PlannedRun) -> Path:
    """The file that claims `run` for one of the sweeps sharing the work folder `work`."""
    return work / "claims" / run.hash


def render_plan(plan: Plan, console: Console) -> None:
    """`--dry-run`: the grid's runs as a table (block, run, hash, status, side files)."""
    from rich.table import Table

    table = Table(title=f"{len(plan.runs)} runs: {len(plan.runs) - len(plan.todo)} done, {len(plan.todo)} to run")
    for col in ("block", "run", "hash", "status", "saves"):
        table.add_column(col)
    for r in plan.runs:
        held = None if r.done else claim_holder(claim_path(plan.out / WORK_DIR, r))
        status = (f"done ({r.existing[-1].name})" if r.done else f"running elsewhere ({held})" if held else
                  "to run" + (f", after {r.source}" if r.source else ""))
        saves = ",".join(s for s, on in (("weights", r.cfg.save_weights), ("embeddings", r.cfg.save_embeddings)) if on)
        table.add_row(r.block, r.name, r.hash, status, saves)
    console.print(table)

