"""The regression gate: run every registered encoder at a fixed, small budget and compare its
metrics with a committed reference (`leaderboard/reference.json`).

    narbench check                        # compare; exit 1 when a metric dropped beyond its band
    narbench check --encoders gcn,ours    # only these encoders
    narbench check --update               # deliberately rewrite the reference (and re-derive its bands)
    narbench check --record FILE          # also write this run as a measurement of this environment
    python -m narbench check ...          # the same without the `narbench` command

The command line lives in `narbench.cli`; this module is the Python API (`check`; its table:
`narbench.harness.gatetable.render`).

Each (dataset, encoder) pair runs the `smoke` profile with seed 0 on the CPU, with
`torch.use_deterministic_algorithms(True)` and a fixed number of CPU threads, so the same code
in the same environment gives bit-identical metrics. Across environments (kernel ISA, torch
release, wheel) trained encoders' metrics move by float noise: a metric *drops* when it is below
`reference - band`, with a band per metric measured across environments
(`narbench.harness.bands`); training-free encoders' bands are 0 (exact). Every drop fails the
gate. A dataset that is not available (e.g. `real` before its artifact is built) is skipped
with a warning. A (dataset, encoder) pair or a metric the reference lacks is reported and fails
only with `--strict`. The reference file's schema: `narbench.harness.reference`; a band that is not
what its recorded derivation gives, or a training-free encoder's entry derived as a trained one's
(`check_derivations`), refuses the reference: the gate cannot be loosened by editing the file.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narbench.harness import reference as refmod
from narbench.harness.reference import DEFAULT_TOLERANCE, GateError

if TYPE_CHECKING:  # rich is imported where it prints: `narbench --help` reads this module's defaults
    from rich.console import Console


REFERENCE_VERSION = refmod.VERSION
DEFAULT_REFERENCE = "leaderboard/reference.json"
GATE_PROFILE = "smoke"
GATE_SEED = 0
GATE_DEVICE = "cpu"
#: CPU threads during gate runs: float reductions may depend on the thread count.
GATE_THREADS = 2
STATUSES = ("dropped", "improved", "unchanged", "new")

__all__ = ["GateError", "Cell", "GateReport", "check", "compare", "load_reference", "write_reference",
           "make_entry", "entry_key", "result_metrics", "deterministic", "DEFAULT_TOLERANCE", "check_writable",
           "check_derivations"]

check_writable, check_derivations = refmod.check_writable, refmod.check_derivations


@dataclass(frozen=True)
class Cell:
    """One metric of one entry, compared with the reference; `tolerance` is its band."""

    key: str
    metric: str
    reference: float | None
    current: float
    tolerance: float

    @property
    def delta(self) -> float | None:
        return None if self.reference is None else self.current - self.reference

    @property
    def status(self) -> str:
        if self.reference is None:
            return "new"
        if self.current < self.reference - self.tolerance:
            return "dropped"
        if self.current > self.reference + self.tolerance:
            return "improved"
        return "unchanged"


@dataclass
class GateReport:
    """What one gate run found. `passed(strict)` is the verdict."""

    reference_path: Path | None
    tolerance: float | None  # one band for every metric (--tolerance), None: the reference's bands
    cells: list[Cell] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # keys run but absent from the reference
    missing_metrics: list[tuple[str, str]] = field(default_factory=list)  # (key, metric) in the reference, not run
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (dataset or key, reason)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (key, message)
    warnings: list[str] = field(default_factory=list)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # this run, reference format
    timings: dict[str, float] = field(default_factory=dict)  # seconds per key
    updated: bool = False
    #: False (the default): a metric above its band fails too. The smoke metrics are a fingerprint of the
    #: code's behaviour, not its quality: an injected regression (a layer dropped, label noise, a leak of
    #: queries into training) can raise them, and unchanged code stays within its band both ways.
    allow_improvements: bool = False

    @property
    def dropped(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "dropped"]

    @property
    def improved(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "improved"]

    @property
    def new(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "new"]

    def passed(self, strict: bool = False) -> bool:
        if self.updated:
            return not self.errors
        incomplete = self.missing or self.missing_metrics or self.new
        moved_up = self.improved and not self.allow_improvements
        return not self.dropped and not moved_up and not self.errors and not (strict and incomplete)


# -- comparison (also used by the pytest plugin) ---------------------------------------------------
def result_metrics(result) -> dict[str, float]:
    """The compared metrics of a RunResult: the nine plus `map_capped@k`. Not `ndcg_paper@k`: a function
    of `ndcg@k` and the data's |R| only (`narbench.eval.metrics`), it adds nothing to a regression check."""
    from narbench.eval.metrics import PAPER_NDCG  # here: importing metrics loads numpy, which --help does not need

    return {k: float(v) for k, v in {**result.metrics, **result.metrics_extra}.items() if k not in PAPER_NDCG}


def entry_key(result) -> str:
    return f"{result.dataset['name']}/{result.encoder}/{result.splitter}"


def make_entry(result) -> dict[str, Any]:
    """The reference entry for one RunResult (metrics and config; bands are added by `--update`)."""
    import torch

    return {
        "metrics": result_metrics(result),
        "config": {
            "dataset": result.dataset.get("name"),
            "dataset_version": result.dataset.get("version"),
            "dataset_sha256": result.dataset.get("sha256"),
            "encoder": result.encoder,
            "splitter": result.splitter,
            "profile": result.profile,
            "seed": result.seed,
            "device": result.device,
            "num_queries": result.num_queries,
            "num_corpus": result.num_corpus,
            "num_train": result.num_train,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "git_commit": result.git_commit,
        },
    }


def compare(key: str, current: Mapping[str, float], reference: Mapping[str, float] | None,
            tolerance: float | Mapping[str, float]) -> list[Cell]:
    """Cells for every metric of `current` (a reference of None marks them all `new`); `tolerance` is one
    band for all metrics or a band per metric."""
    reference = reference or {}
    band = (lambda m: float(tolerance.get(m, 0.0))) if isinstance(tolerance, Mapping) else (lambda m: float(tolerance))
    return [Cell(key, m, (float(reference[m]) if m in reference else None), float(v), band(m)) for m, v in current.items()]


def load_reference(path: str | Path) -> dict[str, Any]:
    """A validated reference (`narbench.harness.reference.load`)."""
    return refmod.load(path)


def write_reference(path: str | Path, entries: Mapping[str, Any], tolerance: float) -> None:
    """A version-1 reference with one tolerance (the pytest plugin's format for a third party)."""
    refmod.write_v1(path, entries, tolerance)


@contextlib.contextmanager
def deterministic(threads: int | None = GATE_THREADS) -> Iterator[None]:
    """Deterministic torch settings for the duration of the block (restored afterwards)."""
    import torch

    old_det, old_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    old_threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True, warn_only=True)
    if threads:
        torch.set_num_threads(threads)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deterministic.*")
            yield
    finally:
        torch.use_deterministic_algorithms(old_det, warn_only=old_warn)
        torch.set_num_threads(old_threads)


# -- the gate ---------------------------------------------------------------------------------------
def _split_names(values: Iterable[str] | str | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return names or None


def check(
    reference_path: str | Path = DEFAULT_REFERENCE,
    tolerance: float | None = None,
    encoders: Iterable[str] | str | None = None,
    datasets: Iterable[str] | str | None = None,
    update: bool = False,
    *,
    profile: str = GATE_PROFILE,
    seed: int = GATE_SEED,
    threads: int | None = GATE_THREADS,
    compare_with_reference: bool = True,
    spread: Iterable[Mapping[str, Any]] = (),
    allow_improvements: bool = False,
    console: Console | None = None,
) -> GateReport:
    """Run the gate and return its report (printing nothing; see `render`).

    `tolerance` None means the reference's bands (v2) or its own tolerance (v1); a number is one
    band for every metric. `update` writes this run's entries into the reference (keeping entries
    not run now) with bands derived from this run and the measurements in `spread`
    (`narbench.harness.bands`). `compare_with_reference=False` only runs (for `--record`).
    Raises `GateError` when there is no usable reference and neither `update` nor
    `compare_with_reference=False`, and `registry.UnknownNameError` for an unknown encoder or dataset name.
    """
    from narbench.core import registry
    from narbench.data.dataset import load_dataset
    from narbench.harness import bands

    if tolerance is not None and not (isinstance(tolerance, (int, float)) and 0 <= tolerance < float("inf")):
        raise GateError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    reference_path = Path(reference_path)
    reference = _reference(reference_path, read=compare_with_reference or update, update=update)
    report = GateReport(reference_path, tolerance, allow_improvements=allow_improvements)
    enc_names, ds_names = _selected(encoders, datasets)
    if reference.get("version") == 2 and not update:
        refmod.check_derivations(reference, enc_names)

    env = bands.Environment.current(threads or GATE_THREADS)
    measured = (reference.get("bands") or {}).get("environments")
    if compare_with_reference and not update and tolerance is None and measured and bands.outside(env, measured):
        report.warnings.append(f"this environment ({env.name}) is outside those the bands were measured in "
                               f"({'; '.join(e.get('name', '?') for e in measured)}): a trained encoder's float noise "
                               f"here may exceed its band")

    trained: dict[str, bool] = {}
    for ds_name in ds_names:
        try:
            dataset = load_dataset(ds_name)
        except (FileNotFoundError, registry.RegistryError) as exc:
            report.skipped.append((ds_name, f"dataset not available: {exc}"))
            continue
        for enc_name in enc_names:
            result = _run_entry(report, dataset, ds_name, enc_name, profile, seed, threads, console)
            if result is None:
                continue
            key = entry_key(result)
            trained[key] = bool(getattr(registry.load("encoder", enc_name), "trainable", True))
            if compare_with_reference:
                _compare_entry(report, reference, key, result, tolerance, update)

    if update and not report.errors:
        _update_reference(report, reference, reference_path, env, list(spread), trained)
    return report


def _reference(path: Path, *, read: bool, update: bool) -> dict[str, Any]:
    """The reference to compare with (an empty one when not `read`; `--update` may start a missing file)."""
    reference: dict[str, Any] = {"version": REFERENCE_VERSION, "entries": {}}
    if read:
        try:
            reference = load_reference(path)
        except GateError:
            if not update:
                raise
            if path.exists():  # --update never silently replaces a file it cannot read
                raise
    return reference


def _selected(encoders: Iterable[str] | str | None, datasets: Iterable[str] | str | None) -> tuple[list[str], list[str]]:
    """The encoders and datasets the gate runs: those named, else every registered one (the current
    version of each dataset); `registry.UnknownNameError` for a name not registered."""
    from narbench.core import registry

    known_enc, known_ds = registry.names("encoder"), registry.names("dataset")
    enc_names = _split_names(encoders) or known_enc
    ds_names = _split_names(datasets) or [n for n in known_ds if _current(n)]
    for kind, names, known in (("encoder", enc_names, known_enc), ("dataset", ds_names, known_ds)):
        for name in names:
            if name not in known:
                raise registry.UnknownNameError(kind, name, known)
    return enc_names, ds_names


def _run_entry(report: GateReport, dataset, ds_name: str, enc_name: str, profile: str, seed: int,
               threads: int | None, console: Console | None):
    """Run one (dataset, encoder) pair deterministically and keep its entry and time in `report`; the
    `RunResult`, or None when the run failed (its error is in `report`: that entry fails, the rest runs)."""
    from narbench.core import registry
    from narbench.eval.retrieval import EmbeddingError
    from narbench.harness.runner import ConfigError, run

    t = time.perf_counter()
    try:
        with deterministic(threads):
            ev = run(_gate_config(enc_name, ds_name, profile, seed), dataset=dataset, console=console)
    except (registry.RegistryError, ConfigError, EmbeddingError) as exc:
        report.errors.append((f"{ds_name}/{enc_name}", str(exc)))
        return None
    result = ev.result
    key = entry_key(result)
    report.timings[key] = time.perf_counter() - t
    report.entries[key] = make_entry(result)
    return result


def _compare_entry(report: GateReport, reference: Mapping[str, Any], key: str, result, tolerance: float | None,
                   update: bool) -> None:
    """Compare the entry `key` of this run with the reference's: its cells, or why it cannot be compared."""
    entry = report.entries[key]
    ref_entry = reference["entries"].get(key)
    ref_sha = ((ref_entry or {}).get("config") or {}).get("dataset_sha256")
    if ref_sha and ref_sha != result.dataset.get("sha256") and not update:  # --update rewrites it
        report.errors.append((key, f"dataset content changed: the reference was made on sha256 "
                                   f"{ref_sha[:16]}..., this run used {str(result.dataset.get('sha256'))[:16]}...; "
                                   f"metrics are not comparable (rewrite the entry with --update if intended)"))
        return
    if ref_entry is None:
        report.missing.append(key)
        report.cells.extend(compare(key, entry["metrics"], None, 0.0))
        return
    report.cells.extend(compare(key, entry["metrics"], ref_entry["metrics"], refmod.bands_of(reference, key, tolerance)))
    report.missing_metrics.extend((key, m) for m in ref_entry["metrics"] if m not in entry["metrics"])


def _update_reference(report: GateReport, reference: dict[str, Any], path: Path, env, spread: list, trained: dict[str, bool]) -> None:
    """`--update`: write this run's entries, with bands derived from it and `spread`, into the reference
    (keeping a v2 reference's entries not run now)."""
    from narbench.harness import bands

    entries, envs = bands.derive(report.entries, env, spread, trained, previous=reference)
    kept = {k: v for k, v in reference["entries"].items() if k not in entries and reference.get("version") == 2}
    all_entries = {**kept, **entries}
    env_list = bands.measured_environments(reference, envs, all_entries)
    refmod.write(path, {"version": REFERENCE_VERSION,
                        "bands": {"rule": bands.RULE, "factor": bands.FACTOR, "floor": bands.FLOOR,
                                  "environments": env_list},
                        "entries": all_entries})
    report.entries = entries
    report.updated = True


def _current(name: str) -> bool:
    """False for a name registered beside the current one (`real-2.1`, `real-2.2`, `real-2.3`, whose results record
    `real`): the gate checks it only when named; its reference entries are the current version's (two
    versions under one name would share the reference's `real/...` keys)."""
    from narbench.core import registry

    try:
        cls = registry.load("dataset", name)
    except registry.RegistryError:
        return True  # reported as not available by the run
    return not getattr(cls, "name", "") or cls.name == name


def _gate_config(encoder: str, dataset: str, profile: str, seed: int):
    from narbench.harness.runner import RunConfig

    return RunConfig(encoder=encoder, splitter=None, dataset=dataset, profile=profile, seed=seed,
                     device=GATE_DEVICE, out=None, progress=False)
