"""The leaderboard's tables as data: which rows each paper table holds, their labels, bold and †.

One rule decides both marks, per column of a block: the *best* cell is the highest mean among
rows with at least two seeds (a single-seed row is never bold); a cell is bold when it equals
the best at the shown precision; every other cell is tested against the best row of its column
with a paired test on per-query scores and marked † when significantly worse. So a bold cell is
never †, and an unmarked, unbolded cell is not significantly worse than the bold one.

The test (`narbench.leaderboard.significance`, default `bootstrap`) counts both the queries' and the
seeds' variance, resampling clusters of queries that depend on each other (one source model's variants,
`narbench.leaderboard.clusters`), so a row that differs from the best by training noise alone, or by a
few models, is rarely marked; a
trained single-seed row (its seed variance unknown) is never tested, a training-free one is, as if
its seeds scored alike. Every cell also gets the 95% confidence interval of its mean
(`Row.ci`, the same bootstrap) and its p against the column's best (`Row.p`); every Table 1 row also
its per-family macro average (`Row.macro`, `narbench.leaderboard.macro`: a second view, no test).
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, field, replace

from narbench.leaderboard.aggregate import EXTRA, aggregate
from narbench.leaderboard.macro import add_macro
from narbench.leaderboard.paper import PAPER, paper_rows
from narbench.leaderboard.records import (
    ANY_PROTOCOL,
    DEFAULT_OBJECTIVE,
    KEYS,
    PRETRAINED,
    SCRATCH,
    Key,
    Record,
    select_runs,
)
from narbench.leaderboard.significance import (
    ALPHA,
    B,
    BOOT_SEED,
    CI_LEVEL,
    DEFAULT_TEST,
    SIG_MARK,
    TEST_UNIT,
    TESTS,
    Bootstrap,
    paired_scores,
    paired_test,
    seed_matrix,
)
from narbench.eval.metrics import METRICS

# Table columns: ranx's nine metrics, with the capped MAP next to ranx's MAP.
COLUMNS = (*METRICS[:6], *EXTRA, *METRICS[6:])
HEADERS = {**{m: m.upper() for m in METRICS}, **{m: f"MAPc@{m.split('@')[1]}" for m in EXTRA}}
#: profiles whose blocks show the paper's numbers; `narbench leaderboard` shows only these by default
PAPER_PROFILES = ("quick", "paper")
#: a row with fewer seeds is never bold (nor the reference of a significance test)
MIN_SEEDS_FOR_BEST = 2
SINGLE_SEED = "1*"
#: the columns whose cells show their confidence interval in the Markdown tables (the headline metrics)
CI_COLUMNS = ("ndcg@20", "mrr@20", "map_capped@20")


def row_label(key: Key, *, objective: bool = False) -> str:
    """A configuration's label: `<encoder>[+<splitter>]`, with `(<objective>)` when `objective`,
    `, pretrained` when it was initialised from other weights; `<encoder> (floor)` when training-free.

    E.g. `gcn`, `ours+motif (ce+cl)`, `ours+motif (cl)`, `ours+motif (ce+cl, pretrained)`, `wl (floor)`;
    an ablation names its parameters: `ours+motif (stage1=False)`, a floor's too: `best-floor (floor, fuse=8)`.
    """
    if key.protocol == ANY_PROTOCOL:  # a floor's parameters, when not as shipped, name a floor of its own
        return f"{key.encoder} (floor{', ' + key.variant if key.variant else ''})"
    method = key.encoder if key.splitter == "none" else f"{key.encoder}+{key.splitter}"
    details = ([key.objective] if objective else []) + (["pretrained"] if key.init != SCRATCH else []) \
        + ([key.variant] if key.variant else [])
    return f"{method} ({', '.join(details)})" if details else method


def row_labels(keys) -> dict[Key, str]:
    """One label per configuration of a leaderboard, the same in every table and figure.

    A method (encoder + splitter) that the leaderboard holds with more than one objective names
    the objective in every one of its labels (`ours+motif (ce+cl)` beside `ours+motif (cl)`);
    one with a single objective does not (`gcn`).
    """
    keys = list(keys)
    objectives: dict[tuple[str, str], set[str]] = {}
    for k in keys:
        objectives.setdefault((k.encoder, k.splitter), set()).add(k.objective)
    return {k: row_label(k, objective=len(objectives[(k.encoder, k.splitter)]) > 1) for k in keys}


@dataclass
class Row:
    """One configuration's line in a block: its label, seeds, means, stds and marks per column;
    per column also the confidence interval of the mean (`ci`) and the p of its test against the
    column's best row (`p`, for the cells that were tested)."""

    label: str
    key: Key
    n: int
    mean: dict[str, float]
    std: dict[str, float]
    bold: set[str] = field(default_factory=set)
    marks: dict[str, str] = field(default_factory=dict)
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    p: dict[str, float] = field(default_factory=dict)
    #: metric -> (mean, std) over seeds of the per-family macro average (Table 1 rows; `macro.add_macro`)
    macro: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def n_text(self) -> str:
        return SINGLE_SEED if self.n == 1 else str(self.n)


@dataclass
class Block:
    """The rows of one table for one setting (or paper rows only, `setting` None)."""

    dataset: str
    setting: tuple[str, str, str, str, str] | None
    rows: list[Row]
    paper: list[tuple[str, dict[str, float]]]
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        if self.setting is None:
            return f"{self.dataset} (no narbench results yet)"
        ds, split, profile, device, protocol = self.setting
        return f"{ds} · split {split} · {profile} · {device} · protocol {protocol}"


@dataclass
class LeaderTable:
    """One of the paper's tables: its blocks (one per setting) and the notes said once under it."""

    number: int
    title: str
    blocks: list[Block]
    notes: list[str]
    empty_note: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """Which configurations a table holds (`pick`) and in which order (`order`, the paper's)."""

    number: int
    title: str
    pick: object  # Callable[[Key], bool]
    order: object  # Callable[[Key], object]


_FLOORS = {"random": 0, "ophist": 1, "ophist-tfidf": 2, "wl": 3, "graphstats": 4}
_ENCODERS = {"gcn": 0, "gat": 1, "ours": 2, "ours-ft": 3, "gin": 4, "gps": 5, "invariant": 6}
_SPLITTERS = {"node-number": 0, "motif-number": 1, "random": 2, "motif": 3}
_OBJECTIVES = {"ce": 0, "cl": 1, "ce+cl": 2}
#: encoders whose parameter variants are ablations (Table 3), not rows of Table 1: the paper's method;
#: any other trained encoder's variant (another validation split or recipe: `graf-lda
#: (holdout=cross-source)`, `ours-ft+motif (motif_examples=occurrences)`) is a Table 1 row of its own
_ABLATED = ("ours",)


def _t1(k: Key) -> bool:
    if k.protocol == ANY_PROTOCOL:  # training-free floors, with any parameters: each is a floor of its own
        return k.init == SCRATCH
    if k.init != SCRATCH or (k.variant and k.encoder in _ABLATED):  # the paper method's ablations: Table 3 rows
        return False
    # any encoder but ours' other splitters (Table 2): gcn, gat, ours+motif, gin, gps, a submitted one
    return k.objective == DEFAULT_OBJECTIVE and not (k.encoder == "ours" and k.splitter != "motif")


TABLES = (
    TableSpec(1, "Encoders (paper Table 1)", _t1,
              lambda k: (k.protocol != ANY_PROTOCOL, _FLOORS.get(k.encoder, 9), _ENCODERS.get(k.encoder, 9), k.encoder,
                         k.variant)),
    TableSpec(2, "Graph splitters with `ours` (paper Table 2)",
              lambda k: k.encoder == "ours" and k.objective == DEFAULT_OBJECTIVE and k.init == SCRATCH and not k.variant,
              lambda k: (_SPLITTERS.get(k.splitter, 9), k.splitter)),
    TableSpec(3, "Objectives and ablations of `ours+motif` (paper Table 3; ablation rows name their encoder "
                 "parameters: `stage1=False` F_s untrained and frozen, `motif_examples=occurrences` every motif "
                 "occurrence in stage 1)",
              lambda k: k.encoder == "ours" and k.splitter == "motif" and k.init == SCRATCH,
              lambda k: (bool(k.variant), _OBJECTIVES.get(k.objective, 9), k.objective, k.variant)),
    TableSpec(4, "Transfer: `ours+motif` on real from scratch vs `pretrained`, initialised from the weights of a "
                 "nas run (`config.run.init_from`; paper Table 4)",
              lambda k: k.encoder == "ours" and k.splitter == "motif" and k.objective == DEFAULT_OBJECTIVE and not k.variant,
              lambda k: k.init != SCRATCH),
)


def rule_note(stat_test: str = DEFAULT_TEST) -> str:
    """The one rule of bold and †, said once under each table."""
    single = ("a single seed (no std, never bold)" if stat_test == "student-pooled" else
              "a single seed (no std, never bold; a trained one is never tested: its seed variance is unknown)")
    return (f"**Bold**: the best mean of the column among rows with at least {MIN_SEEDS_FOR_BEST} seeds. "
            f"{SIG_MARK}: significantly worse than that column's best row at p < {ALPHA} ({TESTS[stat_test]}; "
            "not corrected for multiple comparisons). "
            "A cell with neither mark is not significantly worse than the bold one. Cells: mean ± sample std over "
            f"seeds; n: seeds; `{SINGLE_SEED}`: {single}.")


def ci_note(stat_test: str = DEFAULT_TEST) -> str:
    """What the interval under a cell is (Markdown tables)."""
    names = ", ".join(HEADERS[m] for m in CI_COLUMNS)
    what = ("the clusters of dependent queries resampled" if TEST_UNIT.get(stat_test) == "cluster"
            else "the queries resampled")
    return (f"Under {names}: [low, high], the {CI_LEVEL:.0%} confidence interval of the mean over queries and "
            f"seeds (percentiles of {B:,} draws, numpy seed {BOOT_SEED}: {what}, plus the seeds' "
            "standard error times a Student t with n - 1 degrees of freedom; a single seed's interval covers its "
            "queries only).")


def build_tables(records: list[Record], df=None, *, stat_test: str = DEFAULT_TEST) -> list[LeaderTable]:
    """The four tables as data (rendered by `render.tables_markdown` and `render.print_tables`).

    Args:
        records: validated result files (`collect`); every profile among them gets its blocks,
            but only blocks of `PAPER_PROFILES` show the paper's numbers.
        df: their `aggregate` (computed when None).
        stat_test: `bootstrap` (two-level bootstrap over clusters of queries and seeds, the default),
            `bootstrap-query` (the same over single queries), `student`
            (paired t-test) or `fisher` (randomisation test), ranx's, on per-query means over seeds;
            `student-pooled`: the earlier leaderboards' t-test on scores pooled over seeds.
    Returns:
        Tables 1-4, each with one block per setting, its rows marked by the one rule.
    """
    if stat_test not in TESTS:
        raise ValueError(f"unknown statistical test {stat_test!r} ({', '.join(TESTS)})")
    if df is None:
        df = aggregate(records)
    selected = select_runs(records)
    stats = {Key(*(r[k] for k in KEYS)): r for r in df.to_dict(orient="records")}
    tables = []
    boot = Bootstrap(unit=TEST_UNIT.get(stat_test, "query"))  # one per leaderboard: each row's resampled means once
    boot.prepare({(k, m): seed_matrix(selected[k], m) for k in stats for m in COLUMNS})
    labels = row_labels(stats)
    for spec in TABLES:
        by_setting = _by_setting(stats, spec.pick, labels)
        if spec.number == 4:  # rows only where initialised results exist
            by_setting = {s: rows for s, rows in by_setting.items() if any(r.key.init == PRETRAINED for r in rows)}
        if spec.number > 1:  # a Table 2-4 block compares variants of ours: one row alone compares nothing
            by_setting = {s: rows for s, rows in by_setting.items() if len(rows) > 1}
        blocks = []
        for setting, rows in sorted(by_setting.items()):
            rows.sort(key=lambda r: (spec.order(r.key), r.label))
            paper = paper_rows(spec.number, setting[0]) if setting[2] in PAPER_PROFILES else []
            blocks.append(Block(setting[0], setting, rows, paper, mark_block(rows, selected, stat_test, boot)))
        covered = {b.dataset for b in blocks}
        empty = None
        if spec.number == 4 and not blocks:
            empty = "No results with `config.run.init_from` set yet; the paper's numbers for reference:"
        if spec.number != 4 or not blocks:
            for ds in sorted(set(PAPER[spec.number]) - covered):
                blocks.append(Block(ds, None, [], paper_rows(spec.number, ds)))
        tables.append(LeaderTable(spec.number, spec.title, blocks, [rule_note(stat_test), ci_note(stat_test)], empty))
    add_macro(tables, selected)
    return tables


def _by_setting(stats: dict[Key, dict], pick, labels: dict[Key, str]) -> dict[tuple, list[Row]]:
    """The rows `pick` selects, per setting; training-free rows join every protocol's and every device
    kind's setting of their dataset, split and profile (they train nothing, and retrieval gives the same
    cosines on every device and host: `narbench.eval.retrieval`), so the floors run on a CPU sit in the
    block of the encoders trained on a GPU. Rows of a trained encoder that is not device-bound
    (`Encoder.device_bound`, e.g. `graf-lda`: NumPy on the CPU whatever the device) likewise join every
    device kind's setting of their dataset, split, profile and protocol.

    A setting with only training-free rows is a block of its own (protocol `any`); so is one with only
    rows that are not device-bound where no device-bound encoder shares their dataset, split, profile
    and protocol.
    """
    bound: dict[tuple, list[Row]] = {}
    unbound: dict[tuple, list[Row]] = {}
    free: dict[tuple, list[Row]] = {}
    for key, st in sorted(stats.items()):
        if not pick(key):
            continue
        row = Row(labels[key], key, int(st["n"]), {m: st[f"{m} mean"] for m in COLUMNS},
                  {m: st[f"{m} std"] for m in COLUMNS})
        home = free if key.protocol == ANY_PROTOCOL else bound if device_bound(key.encoder) else unbound
        home.setdefault(key.setting, []).append(row)

    def fresh(rows: list[Row]) -> list[Row]:  # a copy per block: each block marks its own rows
        return [replace(r, bold=set(), marks={}, ci={}, p={}) for r in rows]

    out = {s: list(rows) for s, rows in bound.items()}
    for setting, rows in unbound.items():
        homes = [s for s in bound if s[:3] == setting[:3] and s[4] == setting[4]] or [setting]
        for home in homes:
            out.setdefault(home, []).extend(fresh(rows))
    for setting, rows in free.items():
        homes = [s for s in out if s[:3] == setting[:3]]  # dataset, split, profile: any device, protocol
        for home in homes or [setting]:
            out.setdefault(home, []).extend(fresh(rows))
    return out


@lru_cache(maxsize=None)
def device_bound(encoder: str) -> bool:
    """`Encoder.device_bound` of the registered encoder `encoder`; True for a name no installed
    package registers (a submitted result read without its package) or one that fails to load."""
    from narbench.core import registry

    try:
        return bool(getattr(registry.load("encoder", encoder), "device_bound", True))
    except (registry.UnknownNameError, registry.RegistryError):
        return True


def mark_block(rows: list[Row], selected: dict[Key, dict[int, Record]], stat_test: str = DEFAULT_TEST,
               boot: Bootstrap | None = None) -> list[str]:
    """Apply the one rule (module docstring) to the rows of a block and give every cell its confidence
    interval; returns notes on what was not tested.

    `boot`: the leaderboard's `Bootstrap` (its cache spans blocks); a fresh one when None.
    """
    if stat_test not in TESTS:
        raise ValueError(f"unknown statistical test {stat_test!r} ({', '.join(TESTS)})")
    boot = boot or Bootstrap(unit=TEST_UNIT.get(stat_test, "query"))
    scores = {(r.key, m): seed_matrix(selected[r.key], m) for r in rows for m in COLUMNS}
    boot.prepare(scores)

    def matrix(r: Row, m: str):
        return scores[(r.key, m)]

    for r in rows:
        for m in COLUMNS:
            x = matrix(r, m)
            if x is not None and not math.isnan(r.mean[m]):
                r.ci[m] = boot.ci(x, (r.key, m))
    eligible = [r for r in rows if r.n >= MIN_SEEDS_FOR_BEST]
    if not eligible:
        return [f"No row has {MIN_SEEDS_FOR_BEST} seeds: nothing is bold or tested."] if rows else []
    untested: dict[str, str] = {}
    free_single: dict[str, None] = {}  # training-free rows of one seed, tested (ordered, no repeats)
    for m in COLUMNS:
        scored = [r for r in eligible if not math.isnan(r.mean[m])]
        if not scored:
            continue
        best = max(scored, key=lambda r: (r.mean[m], r.label))
        shown = round(best.mean[m], 4)
        for r in scored:
            if round(r.mean[m], 4) == shown:
                r.bold.add(m)
        for r in rows:
            if m in r.bold or math.isnan(r.mean[m]):
                continue
            if stat_test == "student-pooled":
                a, b, used = paired_scores(selected[best.key], selected[r.key], m)
                if not used:
                    untested[r.label] = f"{r.label}: not tested (no seed in common with {best.label})."
                    continue
                p, worse = paired_test(a, b, "student"), b.mean() < a.mean()
            else:
                xa, xb = matrix(best, m), matrix(r, m)
                if xa is None or xb is None or xa.shape[1] != xb.shape[1]:
                    untested[r.label] = f"{r.label}: not tested (its per-query scores are not on {best.label}'s queries)."
                    continue
                if len(xb) < MIN_SEEDS_FOR_BEST:
                    if r.key.protocol != ANY_PROTOCOL:
                        untested[r.label] = (f"{r.label}: one seed, so its seed variance is unknown: not tested "
                                             f"(never {SIG_MARK}).")
                        continue
                    free_single[r.label] = None
                if stat_test in TEST_UNIT:
                    p = boot.test(xa, xb, (best.key, m), (r.key, m))
                else:
                    p = paired_test(xa.mean(axis=0), xb.mean(axis=0), stat_test)
                worse = r.mean[m] < best.mean[m]
            r.p[m] = p
            if worse and p < ALPHA:
                r.marks[m] = SIG_MARK
    notes = list(untested.values())
    if free_single:
        notes.append(f"{', '.join(free_single)}: one seed of a training-free encoder, tested as if its seeds scored "
                     "alike (training-free rows vary little or not at all over seeds).")
    return notes
