"""Table 1 with one row per method, and a table of the variants: what `declared.csv` does to the tables.

`declare_tables` keeps in each Table 1 block only each method's declared configuration
(`narbench.leaderboard.declared`, chosen on validation; a method the file does not name keeps
every row) and marks the block again by the one rule, so bold and † compare declared rows only.
Every configuration of a method that has more than one in a block moves to a table of its own,
`VARIANTS` ("Variants of Table 1's methods"), marked among themselves: the ablations and the
variants stay published, beside the row they lost to, and never head a table. `versus_markdown`
says, per headline setting, where the declared configuration is not the variant best on the test
queries (both scores, from the tables: known, published, and never used to choose).
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from narbench.data.store import atomic_write_bytes
from narbench.leaderboard.headline import COLUMNS, METRIC, PROTOCOL, headline_blocks, method_label, replace_between
from narbench.leaderboard.records import Record, select_runs
from narbench.leaderboard.significance import DEFAULT_TEST
from narbench.leaderboard.tables import Block, LeaderTable, Row, build_tables, ci_note, mark_block, rule_note

if TYPE_CHECKING:  # `declared` loads on first use
    from narbench.leaderboard.declared import Config

DECLARED_CSV = Path("leaderboard/declared.csv")

#: the number of the variants' table (after the paper's Tables 1-4; not the paper's Table 5)
VARIANTS = 5
VARIANTS_TITLE = ("Variants of Table 1's methods (not a paper table): every configuration of a method with more than "
                  "one in a setting, its declared one (Table 1's row, chosen on validation: "
                  "`leaderboard/declared.csv`) among them")
DECLARED_NOTE = ("One row per method: its declared configuration, chosen on validation records only "
                 "(`leaderboard/declared.csv`, `python -m narbench.cli.declared`); a method's other "
                 f"configurations are in Table {VARIANTS}.")


def leaderboard_tables(records: list[Record], df=None, *, stat_test: str = DEFAULT_TEST,
                       declared: str | Path | dict | None = DECLARED_CSV) -> list[LeaderTable]:
    """`build_tables`, then `declare_tables` with the declared configurations (a path to `declared.csv`,
    or its `read_declared` mapping; none: the tables as built)."""
    from narbench.leaderboard.declared import read_declared

    tables = build_tables(records, df, stat_test=stat_test)
    chosen = declared if isinstance(declared, dict) else read_declared(declared) if declared else {}
    return declare_tables(tables, records, chosen, stat_test=stat_test)


def _fresh(rows: list[Row]) -> list[Row]:
    """Copies without marks (each block marks its own rows)."""
    return [replace(r, bold=set(), marks={}, ci={}, p={}) for r in rows]


def declare_tables(tables: list[LeaderTable], records: list[Record], declared: dict[tuple[str, str], Config],
                   *, stat_test: str = DEFAULT_TEST) -> list[LeaderTable]:
    """Table 1 reduced to the declared rows and marked again, plus the variants' table (module docstring);
    the tables as given when `declared` is empty."""
    from narbench.leaderboard.declared import is_declared

    if not declared:
        return tables
    selected = select_runs(records)
    out, variants = [], []
    for t in tables:
        if t.number != 1:
            out.append(t)
            continue
        blocks = []
        for b in t.blocks:
            if b.setting is None:
                blocks.append(b)
                continue
            keep = [r for r in b.rows if is_declared(r.key, declared) is not False]
            missing = _missing_notes(b.rows, keep, declared)
            if len(keep) == len(b.rows):
                blocks.append(replace(b, notes=missing + b.notes))
            else:
                keep = _fresh(keep)
                blocks.append(replace(b, rows=keep, notes=missing + mark_block(keep, selected, stat_test)))
            count = Counter(r.key.encoder for r in b.rows)
            varied = _fresh([r for r in b.rows if count[r.key.encoder] > 1])
            if varied:
                variants.append(Block(b.dataset, b.setting, varied, [], mark_block(varied, selected, stat_test)))
        out.append(replace(t, blocks=blocks, notes=[DECLARED_NOTE, *t.notes]))
    if variants:
        out.append(LeaderTable(VARIANTS, VARIANTS_TITLE, variants, [rule_note(stat_test), ci_note()]))
    return out


def _missing_notes(rows: list[Row], keep: list[Row], declared: dict[tuple[str, str], Config]) -> list[str]:
    """A note per method whose declared configuration has no result in this block though others have."""
    kept = {r.key.encoder for r in keep}
    notes = {}
    for r in rows:
        if r.key.encoder not in kept and r.key.encoder not in notes:
            config = declared[(r.key.encoder, r.key.dataset.split(" ")[0])]
            setting = ", ".join(([f"splitter {config.splitter}"] if config.splitter != r.key.splitter else [])
                                + [config.variant or "as registered"])
            notes[r.key.encoder] = (f"{method_label(r.key)}: its declared configuration ({setting}) has no result "
                                    f"in this setting; its other configurations are in Table {VARIANTS}.")
    return list(notes.values())


def versus_markdown(tables: list[LeaderTable]) -> str:
    """Per headline setting, each method whose declared row is not its best configuration on the test
    queries: both, with their NDCG@20 (a table), or a sentence that there is none."""
    t1 = next((t for t in tables if t.number == 1), None)
    var = next((t for t in tables if t.number == VARIANTS), None)
    chosen = headline_blocks(tables)
    if t1 is None or var is None or chosen is None:
        return "*No declared configurations yet (`leaderboard/declared.csv`).*"
    _, blocks = chosen
    lines = []
    for col in COLUMNS:
        block = blocks.get(col)
        vblock = next((b for b in var.blocks if block is not None and b.setting == block.setting), None)
        if block is None or vblock is None:
            continue
        for encoder in sorted({r.key.encoder for r in vblock.rows}):
            rows = [r for r in vblock.rows if r.key.encoder == encoder and not math.isnan(r.mean[METRIC])]
            mine = next((r for r in block.rows if r.key.encoder == encoder), None)
            if not rows or mine is None:
                continue
            best = max(rows, key=lambda r: (r.mean[METRIC], r.label))
            name = method_label(mine.key)
            if mine.key == best.key:
                continue
            lines.append(f"| {block.setting[0]} · {col[1]} | {name} | {mine.label} | {mine.mean[METRIC]:.3f} | "
                         f"{best.label} | {best.mean[METRIC]:.3f} |")
    if not lines:
        return "Every declared configuration is also its method's best variant on the test queries."
    profile = blocks[COLUMNS[0]].setting[2]
    return "\n".join([f"NDCG@20 on the test queries, Table 1 and Table {VARIANTS}, `{profile}` profile, protocol "
                      f"`{PROTOCOL}`; generated by `narbench leaderboard`.", "",
                      "| setting | method | declared (chosen on validation) | NDCG@20 | best on test | NDCG@20 |",
                      "|---|---|---|---:|---|---:|", *lines])


VERSUS_START, VERSUS_END = "<!-- narbench:declared-vs-test:start -->", "<!-- narbench:declared-vs-test:end -->"


def update_versus(path: str | Path, tables: list[LeaderTable], *, text: str | None = None,
                  write: Callable[[Path, bytes], None] = atomic_write_bytes) -> bool | None:
    """Rewrite `versus_markdown` between the markers of `path` (docs/leaderboard.md); None: it has none."""
    text = Path(path).read_text() if text is None else text
    if text.count(VERSUS_START) != 1 or text.count(VERSUS_END) != 1:
        return None
    return replace_between(path, text, VERSUS_START, VERSUS_END, versus_markdown(tables), write)


def declared_markdown(path: str | Path, tables: list[LeaderTable]) -> str:
    """The leaderboard page's section on the declared configurations: `declared.csv` as a table (what was
    chosen, on which validation score), then `versus_markdown`; '' without the file."""
    path = Path(path)
    if not path.is_file():
        return ""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    lines = ["## Declared configurations", "",
             "Table 1 and the README's headline show one configuration per method and dataset, declared by "
             "`python -m narbench.cli.declared` from validation records only (the rule: `narbench.leaderboard.declared` "
             "and docs/leaderboard.md); every other configuration is in Table " + str(VARIANTS) + ". Validation "
             "NDCG@20: the mean over the records (runs) behind it, on the hold-out named; `declared.csv` also lists "
             "what was compared and where each score comes from.", "",
             "| method | dataset | declared | validation NDCG@20 | records | hold-out | why |",
             "|---|---|---|---:|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['dataset']} {r['version']} | {r['configuration']} | "
                     f"{r['validation ndcg@20'] or '–'} | {r['records']} | {r['validated on'] or '–'} | {r['choice']} |")
    return "\n".join(lines + ["", "### Declared against the best variant on the test queries", "",
                               versus_markdown(tables)])
