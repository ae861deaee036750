"""One declared configuration per method and dataset, chosen on validation records only.

A method (a registered encoder) has several configurations in the committed results: parameter
variants (`graf-lda (holdout=cross-source,wl_rounds=3)`), objectives and splitters (`ours`). Table 1
and the README's headline show one of them per method and dataset: the one this module declares,
from validation records alone, and writes to `leaderboard/declared.csv` with the validation score
that chose it and where that score came from. It never reads a test metric: of a result file it
takes `config.encoder_stats.selection` (the validation split a floor or `graf-lda` chooses its
settings on) and `config.learning_curve`'s `validation` side (`narbench run --curve`), nothing else.

The rule, per method and dataset (the dataset's version as the README's headline takes it: a newer version takes
over once its records hold every method of the current one, so a version whose leaderboard is still filling
declares nothing yet; profile `quick`, protocol `family`):

1. **The validation split.** On `real`, the cross-source hold-out (one zoo's graphs query the
   others') where any configuration of the method has a record on it, else the stratified hold-out;
   on `nas` (one source) the stratified hold-out. The stratified hold-out keeps each held-out
   graph's siblings in the pool, as `real` standard does, and mostly measures near-duplicate
   detection; the headline's `real` columns (unseen, crossimpl) shift across models and code, as
   the cross-source hold-out does. Scores on two hold-outs are never compared.
2. **A configuration's score** is its validation NDCG@20: the selection's own score of what it
   picked (result files), or the curve's validation NDCG@20 at the profile's epoch budget (curve
   runs), averaged over its records (one per split and seed).
3. **The reference** is the registered configuration (default splitter, objective and parameters)
   where it has records on that split, else the validated configuration with the fewest parameters.
   A configuration replaces it only when it is above it on the records both have with p < `ALPHA`
   (two-sided paired t-test); of several, the highest mean. A configuration with no record on the
   split is never chosen: where none but the reference has one, the file says `default: no
   validation record`.
4. **One configuration** is declared as it is. Where it is not the registered one and has no validation
   record on this version (run here because the version before declared it: `ours-ft`'s on `real` 2.3),
   the file names the version before's declaration and why.

    python -m narbench.cli.declared            # rewrites leaderboard/declared.csv
    python -m narbench.cli.declared --check    # exit 1 when the file is not what the rule gives
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from narbench.eval.olddefaults import encoder_variant
from narbench.eval.result import RunResult
from narbench.leaderboard.headline import version_key
from narbench.leaderboard.records import ANY_PROTOCOL, DEFAULT_OBJECTIVE, SCRATCH, Key
from narbench.leaderboard.tables import row_label
from narbench.train.profiles import PROFILES

RESULTS_DIR, CURVES_DIR, DECLARED_CSV = Path("leaderboard/results"), Path("leaderboard/curves"), Path("leaderboard/declared.csv")
PROFILE, PROTOCOL, METRIC, ALPHA = "quick", "family", "ndcg@20", 0.05
SHIFTED, STRATIFIED = "cross-source", "family"
#: the hold-outs as the file names them
HOLDOUTS = {SHIFTED: "cross-source hold-out", STRATIFIED: "stratified hold-out"}
#: datasets whose graphs come from several sources (where a cross-source hold-out exists)
MULTI_SOURCE = ("real",)
NO_RECORD = "default: no validation record"
COLUMNS = ("method", "dataset", "version", "configuration", "label", "splitter", "objective", "variant",
           "validation ndcg@20", "records", "validated on", "choice", "compared", "no record on this hold-out", "source")


@dataclass(frozen=True, order=True)
class Config:
    """A configuration of a method: splitter, objective and encoder parameters ('' as registered)."""

    splitter: str
    objective: str = DEFAULT_OBJECTIVE
    variant: str = ""

    def describe(self, default: "Config") -> str:
        """What differs from the registered configuration (`as registered` when nothing does)."""
        parts = ([f"splitter {self.splitter}"] if self.splitter != default.splitter else []) + \
            ([f"objective {self.objective}"] if self.objective != default.objective else []) + \
            ([self.variant] if self.variant else [])
        return ", ".join(parts) or "as registered"

    def size(self) -> int:
        """How many settings differ from the registered ones (the simpler configuration is the reference)."""
        return len([p for p in self.variant.split(",") if p]) + (self.objective != DEFAULT_OBJECTIVE)


@dataclass(frozen=True)
class Observation:
    """One validation record: a configuration's validation NDCG@20 in one run (split, seed) on one hold-out."""

    method: str
    dataset: str
    version: str
    config: Config
    holdout: str
    unit: tuple[str, int]
    score: float
    source: str  # the folder it was read from
    kind: str  # `selection` (result files) or `curve` (curve runs)
    epoch: int = 0


@dataclass(frozen=True)
class Declared:
    """One line of `declared.csv`: a method's configuration on a dataset and why."""

    method: str
    dataset: str
    version: str
    config: Config
    label: str
    validation: float | None
    records: int
    validated_on: str
    choice: str
    compared: str
    not_validated: str
    source: str
    default: Config

    def row(self) -> dict[str, str]:
        return {"method": self.method, "dataset": self.dataset, "version": self.version,
                "configuration": self.config.describe(self.default), "label": self.label,
                "splitter": self.config.splitter, "objective": self.config.objective, "variant": self.config.variant,
                "validation ndcg@20": "" if self.validation is None else f"{self.validation:.4f}",
                "records": str(self.records), "validated on": self.validated_on, "choice": self.choice,
                "compared": self.compared, "no record on this hold-out": self.not_validated, "source": self.source}


# ----------------------------------------------------------------------------- reading validation records


def _validation_view(path: Path, source: str) -> tuple[tuple, list[Observation]] | None:
    """(method, dataset, version, config, trained) of a result file and its validation observations;
    None for a file outside the selection (another profile or protocol, initialised from other weights).
    Reads `config.encoder_stats.selection` and `config.learning_curve`'s validation side only."""
    try:
        res = RunResult.read(path)
    except (ValueError, OSError):
        return None
    cfg = res.config or {}
    run, enc = cfg.get("run") or {}, cfg.get("encoder") or {}
    trained = cfg.get("labels") is not None
    if res.profile != PROFILE or (trained and res.protocol != PROTOCOL) or run.get("init_from"):
        return None
    ds = res.dataset or {}
    objective = str((enc.get("train") or {}).get("objective") or run.get("objective")
                    or ((cfg.get("profile") or {}).get("train") or {}).get("objective") or DEFAULT_OBJECTIVE)
    config = Config(str(res.splitter or "none"), objective if trained else DEFAULT_OBJECTIVE, encoder_variant(res))
    ident = (str(res.encoder), str(ds.get("name", "?")), str(ds.get("version", "?")), config, trained)
    unit = (str(res.split), int(res.seed))
    obs = []
    sel = (cfg.get("encoder_stats") or {}).get("selection") or {}
    score = _selection_score(sel)
    if score is not None:
        obs.append(Observation(*ident[:4], str(sel.get("holdout") or STRATIFIED), unit, score, source, "selection"))
    curve = cfg.get("learning_curve") or {}
    profile = PROFILES.get(res.profile)
    epochs = curve.get("epochs") or []
    if profile and len(epochs) >= profile.train.epochs:
        value = ((epochs[profile.train.epochs - 1].get("validation") or {}).get(METRIC))
        if value is not None:
            obs.append(Observation(*ident[:4], str(curve.get("holdout") or run.get("holdout") or STRATIFIED), unit,
                                   float(value), source, "curve", profile.train.epochs))
    return ident, obs


def _selection_score(sel: dict) -> float | None:
    """The validation NDCG@20 of what an encoder's own selection picked: a fused floor's kept prefix, a
    floor's picked candidate, `graf-lda`'s best setting; None without a selection on that metric."""
    scores = sel.get("scores")
    if sel.get("metric", METRIC) != METRIC or not isinstance(scores, dict) or not scores:
        return None
    fusion = sel.get("fusion") or {}
    if fusion.get("path") and fusion.get("kept"):
        return float(fusion["path"][int(fusion["kept"]) - 1][METRIC])
    picked = sel.get("picked")
    if isinstance(picked, str) and isinstance(scores.get(picked), dict):
        return float(scores[picked][METRIC])
    values = [v[METRIC] if isinstance(v, dict) else v for v in scores.values()]
    return float(max(values))


def read_records(dirs: Iterable[str | Path]) -> tuple[dict[tuple, bool], list[Observation]]:
    """Every configuration in the result files under `dirs` ((method, dataset, version, config) -> trained)
    and every validation observation among them."""
    configs: dict[tuple, bool] = {}
    observations: list[Observation] = []
    for d in dirs:
        for path in sorted(Path(d).rglob("*.json")):
            if path.name.endswith(".queries.json") or ".sweep" in path.parts:
                continue
            view = _validation_view(path, Path(d).as_posix())
            if view is not None:
                ident, obs = view
                configs[ident[:4]] = ident[4]
                observations += obs
    return configs, observations


# ----------------------------------------------------------------------------- the rule


def _paired(a: dict[tuple, float], b: dict[tuple, float]) -> tuple[float, float | None, int]:
    """(mean of a - b over their common records, two-sided p of a paired t-test, how many records);
    p is None below 2 records or when the differences do not vary."""
    from scipy.stats import ttest_rel

    common = sorted(set(a) & set(b))
    x, y = np.array([a[u] for u in common]), np.array([b[u] for u in common])
    diff = float((x - y).mean()) if common else float("nan")
    if len(common) < 2 or not np.ptp(x - y) > 0:
        return diff, None, len(common)
    return diff, float(ttest_rel(x, y).pvalue), len(common)


def _p_text(p: float | None) -> str:
    return "p n/a" if p is None else "p < 0.01" if p < 0.005 else f"p {p:.2f}"


def _default(method: str) -> Config:
    """The registered configuration: the encoder's default splitter, the default objective, no parameters."""
    from narbench.core import registry

    try:
        return Config(str(registry.load("encoder", method).default_splitter))
    except Exception:  # noqa: BLE001 - a result of an encoder not installed here: its splitter 'none'
        return Config("none")


def _source(obs: list[Observation]) -> str:
    """Where a score came from: folder, what was read, and which records (splits and seeds)."""
    splits = sorted({o.unit[0] for o in obs})
    seeds = sorted({o.unit[1] for o in obs})
    what = "config.encoder_stats.selection" if obs[0].kind == "selection" else \
        f"config.learning_curve, validation at epoch {obs[0].epoch}"
    return (f"{obs[0].source}: {what}; {len(obs)} runs ({', '.join(splits)}; seeds "
            f"{', '.join(map(str, seeds))})")


def declare(method: str, dataset: str, version: str, configs: dict[Config, bool],
            observations: list[Observation], before: "Declared | None" = None) -> Declared:
    """The declared configuration of `method` on `dataset` (module docstring): `configs` are its
    configurations (-> trained), `observations` its validation records on this dataset version,
    `before` its declaration on the version before (named when this version's only configuration,
    not the registered one, has no validation record here: it was run because it was declared there)."""
    default = _default(method)
    trained = any(configs.values())
    holdouts = {o.holdout for o in observations}
    holdout = SHIFTED if dataset in MULTI_SOURCE and SHIFTED in holdouts else STRATIFIED
    scored: dict[Config, dict[tuple, float]] = defaultdict(dict)
    used: dict[Config, list[Observation]] = defaultdict(list)
    for o in sorted(observations, key=lambda o: (o.config, o.unit, o.kind)):
        if o.holdout == holdout:
            scored[o.config][o.unit] = o.score
            used[o.config].append(o)
    unvalidated = sorted(c for c in configs if c not in scored) if len(configs) > 1 else []
    base = dict(method=method, dataset=dataset, version=version, default=default,
                not_validated="; ".join(c.describe(default) for c in unvalidated))
    if not scored:
        only = len(configs) == 1
        choice = ("training-free: one configuration" if not trained else "one configuration") if only else NO_RECORD
        chosen = next(iter(configs)) if only else default
        if only and chosen != default and before is not None and before.config == chosen and before.records:
            choice = f"one configuration, the one declared on {dataset} {before.version} ({before.choice})"
        return Declared(config=chosen, label=_label(method, chosen, trained), validation=None, records=0,
                        validated_on="", choice=choice, compared="", source="", **base)
    ref = default if default in scored else min(scored, key=lambda c: (c.size(), c))
    compared, winners = [], []
    for c in sorted(scored):
        if c == ref:
            continue
        diff, p, n = _paired(scored[c], scored[ref])
        compared.append(f"{c.describe(default)} {diff:+.3f} ({_p_text(p)}, {n} records)")
        if diff > 0 and p is not None and p < ALPHA:
            winners.append(c)
    mean = {c: float(np.mean(list(v.values()))) for c, v in scored.items()}
    chosen = max(winners, key=lambda c: (mean[c], c)) if winners else ref
    what = "the registered configuration" if ref == default else f"the simplest validated ({ref.describe(default)})"
    if len(scored) == 1:
        choice = (NO_RECORD if chosen == default else f"the only configuration validated on the {HOLDOUTS[holdout]}") \
            if len(configs) > 1 else ("training-free: one configuration" if not trained else "one configuration")
    elif chosen == ref:
        choice = f"{what}: no configuration significantly above it (paired t, p < {ALPHA})"
    else:
        choice = f"significantly above {what} (paired t, p < {ALPHA})" + \
            (f", the highest of the {len(winners)} that are" if len(winners) > 1 else "")
    return Declared(config=chosen, label=_label(method, chosen, trained), validation=mean[chosen],
                    records=len(scored[chosen]), validated_on=HOLDOUTS[holdout], choice=choice,
                    compared="; ".join(compared), source=_source(used[chosen]), **base)


def _label(method: str, config: Config, trained: bool) -> str:
    """The configuration's row label as the tables print it (without the objective)."""
    return row_label(Key("", "", "", "", PROTOCOL if trained else ANY_PROTOCOL, method, config.splitter,
                         config.objective, SCRATCH, config.variant))


def select(results_dirs: Sequence[str | Path] = (RESULTS_DIR,), curve_dirs: Sequence[str | Path] = (CURVES_DIR,)
           ) -> list[Declared]:
    """Every method's declared configuration per dataset (the version the headline takes: module docstring), sorted."""
    configs, observations = read_records([*results_dirs, *curve_dirs])
    methods: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for method, dataset, version, _ in configs:
        methods[dataset][version].add(method)
    newest: dict[str, str] = {}
    for dataset, by in methods.items():  # oldest first; a newer version takes over when it covers the current one
        current, *newer = sorted(by, key=version_key)
        for candidate in newer:
            if by[current] <= by[candidate]:
                current = candidate
        newest[dataset] = current
    by_method: dict[tuple[str, str], dict[Config, bool]] = defaultdict(dict)
    for (method, dataset, version, config), trained in configs.items():
        if newest[dataset] == version:
            by_method[(method, dataset)][config] = trained
    obs: dict[tuple[str, str], list[Observation]] = defaultdict(list)
    for o in observations:
        if newest[o.dataset] == o.version:
            obs[(o.method, o.dataset)].append(o)
    return [declare(m, d, newest[d], by_method[(m, d)], obs[(m, d)],
                    _before(m, d, newest[d], configs, observations)) for m, d in sorted(by_method)]


def _before(method: str, dataset: str, version: str, configs: dict, observations: list[Observation]
            ) -> Declared | None:
    """`method`'s declaration on the newest version of `dataset` older than `version` that it has records on."""
    older = {v for m, d, v, _ in configs if (m, d) == (method, dataset) and version_key(v) < version_key(version)}
    if not older:
        return None
    prev = max(older, key=version_key)
    mine = {c: t for (m, d, v, c), t in configs.items() if (m, d, v) == (method, dataset, prev)}
    return declare(method, dataset, prev, mine,
                   [o for o in observations if (o.method, o.dataset, o.version) == (method, dataset, prev)])


# ----------------------------------------------------------------------------- the file


def to_csv(declared: Iterable[Declared]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for d in declared:
        writer.writerow(d.row())
    return out.getvalue()


def read_declared(path: str | Path = DECLARED_CSV) -> dict[tuple[str, str], Config]:
    """(method, dataset) -> its declared configuration, from `declared.csv`; empty when the file is missing."""
    path = Path(path)
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        return {(r["method"], r["dataset"]): Config(r["splitter"], r["objective"], r["variant"])
                for r in csv.DictReader(fh)}


def is_declared(key: Key, declared: dict[tuple[str, str], Config]) -> bool | None:
    """Whether a leaderboard row is its method's declared configuration (None: the method declares none
    on that dataset, e.g. a submitted encoder). A row's dataset `real 2.1 (sha)` is dataset `real`."""
    config = declared.get((key.encoder, key.dataset.split(" ")[0]))
    if config is None:
        return None
    return key.init == SCRATCH and Config(key.splitter, key.objective, key.variant) == config

