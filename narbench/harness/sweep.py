"""`narbench sweep`: a grid of runs as one resumable command, on any launcher.

A grid (a TOML file, or one block given on the command line) expands to runs: each block is the
product datasets x splits x protocols x models x objectives x seeds. Every run has a
configuration hash (`narbench.harness.confighash`); a run whose hash matches a result file already in the
output folder (or another `--results` folder) is skipped, so an interrupted sweep re-run does
only what is missing. The rest goes to a launcher (`narbench.harness.launchers`); a failed run is
reported with its log and the others go on. Runs that start from another run's weights (Table 4:
`init_from`) wait for that run. Sweeps started together on one output folder share its runs: each
run is claimed when it starts (`narbench.harness.launchers.Claim`, under `<out>/.sweep/claims/`), and
a sweep that finds a run claimed by a live process skips it and reports it as running elsewhere.

Grid file (`leaderboard/grid.toml` is the committed leaderboard's)::

    seeds = [0, 1, 2]
    profile = "quick"                       # `--profile` overrides it

    [[block]]
    name = "table1"
    datasets = ["nas", "real"]
    splits = ["standard"]                   # default ["standard"]
    protocols = ["family"]                  # default ["family"]
    objectives = ["ce", "cl"]               # default: the profile's (ce+cl)
    models = ["gcn+none", { model = "ours+motif", save_weights = true, save_embeddings = [0],
                            params = { depth = 2 } }]
    init_from = { dataset = "nas", model = "ours+motif" }   # start from that run (same profile, seed)
    epochs = 15                             # the graph-level stage's epochs (default: the profile's)
    curve = true                            # learning curves (`narbench run --curve`; default false)
"""

from __future__ import annotations

import itertools
import numbers
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from narbench.train import checkpoint
from narbench.core import registry
from narbench.harness.confighash import ANY_PROTOCOL, code_version, config_hash, result_hash
from narbench.harness.launchers import Launcher, Outcome, Task, claim_holder
from narbench.train.profiles import PROFILES, get_profile
from narbench.train.protocol import DEFAULT_PROTOCOL, PROTOCOLS
from narbench.eval.holdout import HOLDOUT_RULES
from narbench.eval.result import RunResult
from narbench.harness.runner import MAX_SEED, ConfigError, RunConfig, resolve

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WORK_DIR = ".sweep"  # under the output folder: run logs, claims and submitit's files
_BLOCK_KEYS = {"name", "datasets", "splits", "protocols", "models", "objectives", "seeds", "init_from", "epochs", "curve",
               "holdout"}
_MODEL_KEYS = {"model", "params", "encoder_params", "save_weights", "save_embeddings"}


class GridError(ValueError):
    """A grid file or grid option that cannot be expanded (the message names the place)."""


# ------------------------------------------------------------------------------------------ grid


@dataclass(frozen=True)
class Model:
    """An encoder with a splitter and its parameters, and which side files its runs save."""

    encoder: str
    splitter: str | None
    params: tuple[tuple[str, Any], ...] = ()
    encoder_params: tuple[tuple[str, Any], ...] = ()  # the encoder's PARAMS (e.g. the ablations of `ours`)
    save_weights: bool = False
    save_embeddings: tuple[int, ...] = ()  # seeds whose query embeddings are saved

    @property
    def label(self) -> str:
        """'encoder+splitter' as a grid names it ('gcn+none'), without parameters: what --models matches."""
        return f"{self.encoder}+{self.splitter or 'none'}"

    @classmethod
    def parse(cls, entry: Any, where: str) -> "Model":
        if isinstance(entry, str):
            entry = {"model": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
            raise GridError(f"{where}: a model is 'encoder+splitter' or {{ model = 'encoder+splitter', ... }}, "
                            f"got {entry!r}")
        unknown = set(entry) - _MODEL_KEYS
        if unknown:
            raise GridError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_MODEL_KEYS))}")
        enc, _, spl = entry["model"].partition("+")
        for key in ("params", "encoder_params"):
            if not isinstance(entry.get(key) or {}, dict):
                raise GridError(f"{where}: {key} is a table like {{ key = value }}, got {entry[key]!r}")
        emb = entry.get("save_embeddings", [])
        if emb is True or emb is False or emb == []:
            emb = (0,) if emb is True else ()
        else:
            emb = _seeds(emb if isinstance(emb, list) else [emb], where, "save_embeddings")
        return cls(enc, spl or None, tuple(sorted((entry.get("params") or {}).items())),
                   tuple(sorted((entry.get("encoder_params") or {}).items())),
                   bool(entry.get("save_weights", False)), emb)


@dataclass(frozen=True)
class Block:
    """One product of options; `init_from` names the (dataset, model) whose run of the same seed it starts from."""

    name: str
    datasets: tuple[str, ...]
    models: tuple[Model, ...]
    splits: tuple[str, ...] = ("standard",)
    protocols: tuple[str, ...] = (DEFAULT_PROTOCOL,)
    objectives: tuple[str | None, ...] = (None,)
    seeds: tuple[int, ...] | None = None
    init_from: tuple[str, Model] | None = None
    epochs: int | None = None  # the graph-level stage's epochs (None: the profile's)
    curve: bool = False  # learning-curve runs (`narbench run --curve`)
    holdout: str = "family"  # the curve's validation split (`narbench run --holdout`)


@dataclass(frozen=True)
class Grid:
    blocks: tuple[Block, ...]
    seeds: tuple[int, ...] = (0,)
    profile: str = "quick"


def _seeds(value: Any, where: str, key: str = "seeds") -> tuple[int, ...]:
    """Seeds as numpy and torch take them: integers from 0 to MAX_SEED (a TOML integer, not a string)."""
    seeds = _names(value, where, key) if not isinstance(value, tuple) else value
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
            raise GridError(f"{where}: {key} must be integers from 0 to {MAX_SEED} (unquoted in TOML), got {seed!r}")
    return tuple(int(s) for s in seeds)


def _names(value: Any, where: str, key: str, kind: type | tuple[type, ...] = object) -> tuple:
    if isinstance(value, (str, int)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise GridError(f"{where}: {key} must be a non-empty list, got {value!r}")
    bad = [v for v in value if not isinstance(v, kind)]
    if bad:
        raise GridError(f"{where}: {key} must be a list of names (strings), got {bad[0]!r}")
    return tuple(value)


def parse_grid(data: dict[str, Any], source: str = "grid") -> Grid:
    """A `Grid` from the parsed TOML (`source` names it in errors)."""
    unknown = set(data) - {"seeds", "profile", "block"}
    if unknown:
        raise GridError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}; known: block, profile, seeds")
    blocks, raw_blocks = [], data.get("block") or []
    if not isinstance(raw_blocks, list) or not all(isinstance(raw, dict) for raw in raw_blocks):
        raise GridError(f"{source}: block must be a list of tables ([[block]] in TOML, one per block), "
                        f"got {raw_blocks!r}"[:300])
    for i, raw in enumerate(raw_blocks):
        where = f"{source}: block {raw.get('name', i + 1)!r}"
        bad = set(raw) - _BLOCK_KEYS
        if bad:
            raise GridError(f"{where}: unknown key(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(_BLOCK_KEYS))}")
        for key in ("datasets", "models"):
            if key not in raw:
                raise GridError(f"{where}: {key} is required")
        init = raw.get("init_from")
        if init is not None:
            if not isinstance(init, dict) or set(init) != {"dataset", "model"}:
                raise GridError(f"{where}: init_from is {{ dataset = NAME, model = 'encoder+splitter' }}, got {init!r}")
            init = (str(init["dataset"]), Model.parse(init["model"], where))
        epochs = raw.get("epochs")
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
            raise GridError(f"{where}: epochs must be a positive integer, got {epochs!r}")
        curve = raw.get("curve", False)
        if not isinstance(curve, bool):
            raise GridError(f"{where}: curve must be true or false, got {curve!r}")
        holdout = raw.get("holdout", "family")
        if holdout not in HOLDOUT_RULES:
            raise GridError(f"{where}: holdout must be one of {', '.join(HOLDOUT_RULES)}, got {holdout!r}")
        if holdout != "family" and not curve:
            raise GridError(f"{where}: holdout goes with curve = true")
        blocks.append(Block(
            epochs=epochs, curve=curve, holdout=holdout,
            name=str(raw.get("name", f"block{i + 1}")),
            datasets=_names(raw["datasets"], where, "datasets", str),
            models=tuple(Model.parse(m, where) for m in _names(raw["models"], where, "models")),
            splits=_names(raw.get("splits", ["standard"]), where, "splits", str),
            protocols=_names(raw.get("protocols", [DEFAULT_PROTOCOL]), where, "protocols", str),
            objectives=_names(raw["objectives"], where, "objectives", str) if "objectives" in raw else (None,),
            seeds=_seeds(raw["seeds"], where) if "seeds" in raw else None,
            init_from=init,
        ))
    if not blocks:
        raise GridError(f"{source}: no [[block]] in the grid")
    return Grid(tuple(blocks), _seeds(data.get("seeds", [0]), source),
                str(data.get("profile", "quick")))


def load_grid(path: str | Path) -> Grid:
    """Read a grid TOML file; `GridError` names the file and what is wrong."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"grid file {path} does not exist") from None
    except IsADirectoryError:
        raise GridError(f"grid file {path} is a folder, not a TOML file") from None
    except UnicodeDecodeError as exc:
        raise GridError(f"grid file {path} is not text (UTF-8 TOML): {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise GridError(f"grid file {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"{path}: not valid TOML ({exc})") from exc
    return parse_grid(data, str(path))


# ------------------------------------------------------------------------------------------ plan


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
        seeds = _seeds(tuple(seeds), "--seeds")
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


# ------------------------------------------------------------------------------------------- run


@dataclass
class SweepReport:
    """How a sweep ended: runs skipped (already done), finished, failed (with logs), blocked, and left
    to another process (a sweep on the same folder) that runs them, with who and why."""

    skipped: list[PlannedRun] = field(default_factory=list)
    finished: list[Outcome] = field(default_factory=list)
    failed: list[Outcome] = field(default_factory=list)
    blocked: list[tuple[PlannedRun, str]] = field(default_factory=list)
    elsewhere: list[tuple[PlannedRun, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.blocked


def _eta(seconds: list[float], left: int, running: int, parallel: int) -> str:
    if not seconds or not (left or running):
        return "-"
    mean = sum(seconds) / len(seconds)
    eta = mean * (left + running / 2) / max(1, parallel)
    return time.strftime("%H:%M:%S", time.gmtime(eta)) if eta < 86400 else f"{eta / 3600:.0f} h"


def _started(handle: Any) -> bool:
    """Whether a handle's run has started (a launcher that cannot tell counts it as started)."""
    started = getattr(handle, "started", None)
    return True if started is None else bool(started())


def run_sweep(plan: Plan, launcher: Launcher, *, threads: int | None = None, parallel: int = 1,
              console: Console | None = None, poll: float = 0.5) -> SweepReport:
    """Run every run of `plan` not done yet on `launcher`; one progress view on `console` (stderr).

    A failed run is reported (its log file and last lines) and does not stop the others; a run
    whose `init_from` source failed, or was done without saving weights, is reported as blocked.
    Ctrl-C (KeyboardInterrupt) stops the launcher's runs (nothing half-written stays) and re-raises.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    t0 = time.perf_counter()
    work = plan.out / WORK_DIR
    plan.out.mkdir(parents=True, exist_ok=True)
    report = SweepReport(skipped=[r for r in plan.runs if r.done])
    skipped = len(report.skipped)  # done before the sweep; runs another sweep finishes meanwhile join them
    away: set[str] = set()  # hashes of the runs another process runs
    results: dict[str, list[Path]] = {h: list(p) for h, p in plan.known.items()}
    waiting = [r for r in plan.runs if not r.done]
    running: dict[str, tuple[PlannedRun, Any]] = {}
    seconds: list[float] = []
    total = len(waiting)

    progress = Progress(TextColumn("[bold]sweep[/bold]"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("done {task.fields[done]} · running {task.fields[running]} · "
                                   "[red]failed {task.fields[failed]}[/red] · left {task.fields[left]} · "
                                   "ETA {task.fields[eta]}"), TimeElapsedColumn(), console=console,
                        disable=not total)
    bar = progress.add_task("sweep", total=total, done=0, running=0, failed=0, left=total, eta="-")

    def update() -> None:
        finished = (len(report.finished) + len(report.failed) + len(report.blocked) + len(report.elsewhere)
                    + len(report.skipped) - skipped)
        started = sum(_started(handle) for _, handle in running.values())
        left = len(waiting) + len(running) - started
        progress.update(bar, completed=finished, done=len(report.finished), running=started,
                        failed=len(report.failed) + len(report.blocked), left=left,
                        eta=_eta(seconds, left, started, parallel))

    def ready(run: PlannedRun, launching: list[PlannedRun]) -> PlannedRun | None | str:
        """The run ready to launch (init_from resolved), None to wait, or why it cannot run."""
        if run.source is None:
            return run
        if run.source in running or any(r.hash == run.source for r in (*waiting, *launching)):
            return None
        source = weights_of(results.get(run.source, []))
        if source is None:
            return (f"the run it starts from ({run.source}) failed, or its result has no saved weights "
                    f"(re-run it with --save-weights)")
        return PlannedRun(run.name, run.block, replace(run.cfg, init_from=str(source)), run.hash, run.source)

    console.print(f"{len(plan.runs)} runs in the grid: {len(report.skipped)} done already, {total} to run "
                  f"on {launcher.name}; logs in {work / 'logs'}", highlight=False, soft_wrap=True)
    try:
        with progress:
            while waiting or running:
                launch = []
                for run in list(waiting):
                    if run.source in away:  # its source runs in another sweep, which runs it after
                        waiting.remove(run)
                        away.add(run.hash)
                        report.elsewhere.append((run, f"starts from run {run.source}, which runs elsewhere"))
                        continue
                    r = ready(run, launch)
                    if r is None:
                        continue
                    waiting.remove(run)
                    if isinstance(r, str):
                        report.blocked.append((run, r))
                        progress.console.print(f"[red]blocked[/red] {run.name}: {escape(r)}", highlight=False)
                    else:
                        launch.append(r)
                for run, handle in zip(launch, launcher.submit([task_of(r, work, threads) for r in launch])):
                    running[run.hash] = (run, handle)
                update()
                for h, (run, handle) in list(running.items()):
                    if not handle.done():
                        continue
                    del running[h]
                    out = handle.outcome()
                    if out.elsewhere == "running":
                        away.add(h)
                        report.elsewhere.append((run, out.error))
                        progress.console.print(f"[yellow]running elsewhere[/yellow] {run.name}: {escape(out.error)}",
                                               highlight=False)
                        continue
                    got = result_hash(RunResult.read(Path(out.result))) if out.ok else None
                    if out.ok and got != h:  # not the planned run: counting it done would hide a missing cell
                        out = replace(out, returncode=1, error=f"its result {out.result} has configuration hash {got}, "
                                      f"not the planned {h}: the run did not get the grid's configuration")
                    if out.ok and out.elsewhere == "done":
                        results.setdefault(h, []).append(Path(out.result))
                        report.skipped.append(run)
                        progress.console.print(f"[green]done elsewhere[/green] {run.name}", highlight=False)
                    elif out.ok:
                        results.setdefault(h, []).append(Path(out.result))
                        seconds.append(out.seconds)
                        report.finished.append(out)
                        progress.console.print(f"[green]done[/green] {run.name} in {out.seconds:.0f} s", highlight=False)
                    else:
                        report.failed.append(out)
                        progress.console.print(
                            f"[red]failed[/red] {run.name} (exit {out.returncode}); log: {out.log}\n"
                            f"[dim]{escape(out.error)}[/dim]", highlight=False)
                update()
                if running:
                    time.sleep(poll)
    except KeyboardInterrupt:
        stopped = sum(_started(handle) and not handle.done() for _, handle in running.values())
        launcher.shutdown(cancel=True)
        report.seconds = time.perf_counter() - t0
        console.print(f"interrupted: {len(report.finished)} runs finished and kept, {stopped} stopped (no result of "
                      f"them written, their finished training epochs kept); run the same command again to resume", highlight=False, soft_wrap=True)
        raise
    launcher.shutdown()
    report.seconds = time.perf_counter() - t0
    return report


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


def render_report(report: SweepReport, console: Console) -> None:
    """The sweep's summary: counts, wall time, each failed run with its log, each run left to another process."""
    console.print(f"sweep: {len(report.finished)} runs finished, {len(report.skipped)} skipped (done already), "
                  f"{len(report.failed)} failed, {len(report.blocked)} blocked, {len(report.elsewhere)} running "
                  f"elsewhere; wall time {report.seconds:.0f} s", soft_wrap=True, highlight=False)
    for out in report.failed:
        console.print(f"  [red]failed[/red] {out.name}: log {out.log}", highlight=False)
    for run, why in report.blocked:
        console.print(f"  [red]blocked[/red] {run.name}: {escape(why)}", highlight=False)
    for run, who in report.elsewhere:
        console.print(f"  [yellow]running elsewhere[/yellow] {run.name}: {escape(who)}", highlight=False,
                      soft_wrap=True)
    if report.elsewhere:
        console.print("  (another sweep on this folder runs them: run this one again once it ends to see them done)",
                      highlight=False, soft_wrap=True)


__all__ = ["Grid", "GridError", "Plan", "PlannedRun", "SweepReport", "claim_path", "expand", "load_grid", "parse_grid",
           "planned_fields", "render_plan", "render_report", "run_sweep", "scan", "task_of", "weights_of"]
