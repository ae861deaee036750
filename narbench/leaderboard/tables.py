"""The leaderboard's tables as data: which rows each paper table holds, bold, significance notes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


from narbench.leaderboard.aggregate import EXTRA, aggregate
from narbench.leaderboard.paper import MAP_NOTE, PAPER, paper_rows
from narbench.leaderboard.records import ANY_PROTOCOL, DEFAULT_OBJECTIVE, KEYS, SCRATCH, Key, Record, select_runs
from narbench.leaderboard.significance import ALPHA, SIG_MARK, paired_scores, paired_test
from narbench.metrics import METRICS

# Table columns: ranx's nine metrics, with the capped MAP next to ranx's MAP.
COLUMNS = (*METRICS[:6], *EXTRA, *METRICS[6:])
HEADERS = {**{m: m.upper() for m in METRICS}, **{m: f"MAPc@{m.split('@')[1]}" for m in EXTRA}}


@dataclass
class Row:
    label: str
    key: Key
    n: int
    mean: dict[str, float]
    std: dict[str, float]
    bold: set[str] = field(default_factory=set)
    marks: dict[str, str] = field(default_factory=dict)


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
    number: int
    title: str
    blocks: list[Block]
    notes: list[str]
    empty_note: str | None = None


def _method_label(key: Key) -> str:
    if key.protocol == ANY_PROTOCOL:
        return f"{key.encoder} (floor)"
    return key.encoder if key.splitter == "none" else f"{key.encoder}+{key.splitter}"


# Each table: (number, title, row filter over group keys, row label, paper key of a row, sig test?)
_SPLITTER_ORDER = {"node-number": 0, "motif-number": 1, "random": 2, "motif": 3}
_OBJ_ORDER = {"ce": 0, "cl": 1, "ce+cl": 2}
_T1_ORDER = {"random (floor)": 0, "ophist (floor)": 1, "ophist-tfidf (floor)": 2, "wl (floor)": 3,
             "gcn": 4, "gat": 5, "ours+motif": 6}


def _table_specs():
    def t1(k: Key):
        if k.init != SCRATCH:
            return None
        if k.protocol == ANY_PROTOCOL:  # training-free floors
            return _method_label(k), None
        if k.objective != DEFAULT_OBJECTIVE:
            return None
        if k.encoder == "ours" and k.splitter != "motif":  # ours' other splitters are Table 2
            return None
        label = _method_label(k)  # any other encoder (gcn, gat, a submitted one) is a Table 1 row
        return label, label

    def t2(k: Key):
        if k.encoder == "ours" and k.objective == DEFAULT_OBJECTIVE and k.init == SCRATCH:
            return f"ours+{k.splitter}", k.splitter
        return None

    def t3(k: Key):
        if k.encoder == "ours" and k.splitter == "motif" and k.init == SCRATCH:
            return f"ours+motif, {k.objective}", k.objective
        return None

    def t4(k: Key):
        if k.encoder == "ours" and k.splitter == "motif" and k.objective == DEFAULT_OBJECTIVE:
            return ("ours+motif, from scratch" if k.init == SCRATCH else "ours+motif, initialised from nas"), k.init
        return None

    return [
        (1, "Encoders (paper Table 1)", t1, lambda lab: _T1_ORDER.get(lab, 9), 1, True),
        (2, "Graph splitters with `ours` (paper Table 2)", t2,
         lambda lab: _SPLITTER_ORDER.get(lab.split("+", 1)[1], 9), 2, True),
        (3, "Objectives with `ours+motif` (paper Table 3)", t3,
         lambda lab: _OBJ_ORDER.get(lab.split(", ")[1], 9), 3, False),
        (4, "Transfer: `ours+motif` on real, from scratch vs initialised from nas (paper Table 4)", t4,
         lambda lab: 0 if "scratch" in lab else 1, 4, False),
    ]



def build_tables(records: list[Record], df=None, *, stat_test: str = "student") -> list[LeaderTable]:
    """The four tables, as data (rendered by `tables_markdown` and `print_tables`)."""
    if df is None:
        df = aggregate(records)
    selected = select_runs(records)
    stats = {Key(*(r[k] for k in KEYS)): r for r in df.to_dict(orient="records")}
    tables = []
    for number, title, pick, order, _, sig in _table_specs():
        by_setting = _by_setting(stats, pick)
        if number == 4:  # rows only where initialised results exist
            by_setting = {s: rows for s, rows in by_setting.items() if any(r.key.init != SCRATCH for r in rows)}
        blocks = []
        paper = PAPER[number]
        for setting, rows in sorted(by_setting.items()):
            rows = sorted(rows, key=lambda r: (order(r.label), r.label))
            _mark_best(rows)
            block = Block(setting[0], setting, rows, paper_rows(number, setting[0]))
            if sig and len(rows) > 1:
                block.notes.extend(block_significance(rows, selected, stat_test))
            blocks.append(block)
        covered = {b.dataset for b in blocks}
        if number != 4:
            for ds in sorted(set(paper) - covered):
                blocks.append(Block(ds, None, [], paper_rows(number, ds)))
        notes = [MAP_NOTE, "Bold: the best of our rows in each column (mean over seeds, at the shown precision). "
                 "Cells: mean ± sample std over seeds; n = number of seeds."]
        empty = None
        if number == 4 and not blocks:
            empty = ("No results with `config.run.init_from` set yet; the paper's numbers for reference:")
            blocks.append(Block("real", None, [], paper_rows(number, "real")))
        tables.append(LeaderTable(number, title, blocks, notes, empty))
    return tables


def _by_setting(stats: dict[Key, dict], pick) -> dict[tuple, list[Row]]:
    """The rows `pick` selects, per setting; training-free rows join every protocol's setting.

    A setting with only training-free rows is a block of its own (protocol `any`).
    """
    trained: dict[tuple, list[Row]] = {}
    free: dict[tuple, list[Row]] = {}
    for key, st in sorted(stats.items()):
        picked = pick(key)
        if picked is None:
            continue
        row = Row(picked[0], key, int(st["n"]), {m: st[f"{m} mean"] for m in COLUMNS},
                  {m: st[f"{m} std"] for m in COLUMNS})
        (free if key.protocol == ANY_PROTOCOL else trained).setdefault(key.setting, []).append(row)
    out = {s: list(rows) for s, rows in trained.items()}
    for setting, rows in free.items():
        homes = [s for s in trained if s[:4] == setting[:4]]
        for home in homes or [setting]:
            out.setdefault(home, []).extend(rows)
    return out


def _mark_best(rows: list[Row]) -> None:
    for m in COLUMNS:
        vals = [round(r.mean[m], 4) for r in rows if not math.isnan(r.mean[m])]
        if not vals:
            continue
        best = max(vals)
        for r in rows:
            if not math.isnan(r.mean[m]) and round(r.mean[m], 4) == best:
                r.bold.add(m)



def block_significance(rows: list[Row], selected, stat_test: str) -> list[str]:
    best = max(rows, key=lambda r: (-math.inf if math.isnan(r.mean["ndcg@20"]) else r.mean["ndcg@20"], r.label))
    name = {"student": "two-sided paired Student's t-test (ranx `paired_student_t_test`)",
            "fisher": "Fisher's randomization test (ranx `fisher_randomization_test`, 10,000 permutations, seed 0)"}
    notes = [f"{SIG_MARK}: significantly worse than the best row by mean NDCG@20 (**{best.label}**) at p < {ALPHA}, "
             f"{name.get(stat_test, stat_test)} on per-query scores, seed-matched, queries pooled over the "
             "common seeds; not corrected for multiple comparisons."]
    for row in rows:
        if row is best:
            continue
        seeds_used: list[int] = []
        for m in COLUMNS:
            a, b, used = paired_scores(selected[best.key], selected[row.key], m)
            if not used:
                continue
            seeds_used = used
            p = paired_test(a, b, stat_test)
            if p < ALPHA and b.mean() < a.mean():
                row.marks[m] = SIG_MARK
        if not seeds_used:
            notes.append(f"{row.label}: not tested (no per-query scores for a seed shared with {best.label}).")
        else:
            notes.append(f"{row.label} vs {best.label}: seeds {', '.join(map(str, seeds_used))}.")
    return notes
