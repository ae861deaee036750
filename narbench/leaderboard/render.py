"""Rendering the tables: Markdown for the README (every column; under the headline metrics NDCG@20,
MRR@20, MAPc@20 the 95% confidence interval of the mean; after the tables the per-family macro average
of Table 1's rows, a second view), a compact table for the terminal."""

from __future__ import annotations

import math
from pathlib import Path

from narbench.leaderboard.macro import MACRO_COLUMNS
from narbench.leaderboard.tables import CI_COLUMNS, COLUMNS, HEADERS, MIN_SEEDS_FOR_BEST, LeaderTable, Row

#: the terminal's columns: readable at 80 characters; the README has all twelve
COMPACT = ("ndcg@20", "mrr@20", "map_capped@20")


def _fmt(row: Row, m: str, digits: int = 4) -> str:
    mean, std = row.mean[m], row.std[m]
    if math.isnan(mean):
        return "–"
    text = f"{mean:.{digits}f}" if math.isnan(std) else f"{mean:.{digits}f}±{std:.{digits}f}"
    return text + row.marks.get(m, "")


def _md_cell(row: Row, m: str) -> str:
    """A Markdown cell: bold when best; under a `CI_COLUMNS` cell its interval, on a second, small line."""
    text = f"**{_fmt(row, m)}**" if m in row.bold else _fmt(row, m)
    if m in CI_COLUMNS and m in row.ci and not math.isnan(row.mean[m]):
        lo, hi = row.ci[m]
        text += f"<br><sub>[{lo:.3f}, {hi:.3f}]</sub>"
    return text


def _paper_cells(scores: dict[str, float], columns=COLUMNS) -> list[str]:
    # the paper's MAP is the min(k, |R|) convention: shown under MAPc, a dash under MAP
    return [f"{scores[m]:.3f}" if m in scores else "—" for m in columns]


def tables_markdown(tables: list[LeaderTable]) -> str:
    """The tables as Markdown: per block every column, the paper's rows in italics, notes under each table."""
    lines = []
    for t in tables:
        lines += [f"## Table {t.number}: {t.title}", ""]
        if t.empty_note:
            lines += [t.empty_note, ""]
        for b in t.blocks:
            lines += [f"### {b.title}", ""]
            lines.append("| method | n | " + " | ".join(HEADERS[m] for m in COLUMNS) + " |")
            lines.append("|---|---:|" + "---:|" * len(COLUMNS))
            for r in b.rows:
                cells = [_md_cell(r, m) for m in COLUMNS]
                lines.append(f"| {r.label} | {r.n_text.replace('*', chr(92) + '*')} | " + " | ".join(cells) + " |")
            for label, vals in b.paper:
                lines.append(f"| *{label}* | | " + " | ".join(f"*{c}*" for c in _paper_cells(vals)) + " |")
            lines.append("")
            lines += [f"- {note}" for note in b.notes]
            if b.notes:
                lines.append("")
        lines += [*t.notes, ""]
    lines.append(macro_markdown(tables))
    return "\n".join(lines)


MACRO_NOTE = ("The tables' cells are means over queries, which weigh each family by its number of queries. Here "
              "each Table 1 block again as the mean over families of the mean over that family's queries (per seed; "
              "mean ± std over seeds), rows in the order of their macro NDCG@20, with their rank under each view. "
              f"**Bold**: the best macro mean of the column among rows with at least {MIN_SEEDS_FOR_BEST} seeds. "
              "A second view, not a verdict: no significance test (the tables' † is the one).")


def macro_markdown(tables: list[LeaderTable]) -> str:
    """The per-family macro average of each Table 1 block with rows ('' when none has macro cells)."""
    t1 = next((t for t in tables if t.number == 1), None)
    blocks = [b for b in (t1.blocks if t1 else []) if b.rows and any(r.macro for r in b.rows)]
    if not blocks:
        return ""
    first = MACRO_COLUMNS[0]
    lines = ["## Per-family macro average (a second view of Table 1)", "", MACRO_NOTE, ""]
    for b in blocks:
        by_query = _ranks(b.rows, lambda r: r.mean[first])
        by_family = _ranks(b.rows, lambda r: r.macro.get(first, (math.nan,))[0])
        best = {m: max((r.macro[m][0] for r in b.rows if r.n >= MIN_SEEDS_FOR_BEST and m in r.macro
                        and not math.isnan(r.macro[m][0])), default=None) for m in MACRO_COLUMNS}
        lines += [f"### {b.title}", "",
                  f"| method | n | {HEADERS[first]} per query | " + " | ".join(
                      f"{HEADERS[m]} per family" for m in MACRO_COLUMNS) + " | rank: per query → per family |",
                  "|---|---:|---:|" + "---:|" * len(MACRO_COLUMNS) + "---:|"]
        for r in sorted(b.rows, key=lambda r: (by_family.get(r.label, 10**6), r.label)):
            cells = []
            for m in MACRO_COLUMNS:
                mean, std = r.macro.get(m, (math.nan, math.nan))
                text = "–" if math.isnan(mean) else f"{mean:.4f}" + ("" if math.isnan(std) else f"±{std:.4f}")
                bold = best[m] is not None and not math.isnan(mean) and round(mean, 4) == round(best[m], 4) \
                    and r.n >= MIN_SEEDS_FOR_BEST
                cells.append(f"**{text}**" if bold else text)
            rank = f"{by_query.get(r.label, '–')} → {by_family.get(r.label, '–')}"
            lines.append(f"| {r.label} | {r.n_text.replace('*', chr(92) + '*')} | {_fmt(r, first)} | "
                         + " | ".join(cells) + f" | {rank} |")
        lines.append("")
    return "\n".join(lines)


def _ranks(rows: list[Row], value) -> dict[str, int]:
    """label -> 1-based rank by `value` (highest first; rows without a value have none)."""
    scored = sorted((r for r in rows if not math.isnan(value(r))), key=lambda r: (-value(r), r.label))
    return {r.label: i for i, r in enumerate(scored, 1)}


def print_tables(tables: list[LeaderTable], console=None, *, full: str | Path | None = None) -> None:
    """Print a compact table per block (method, n, NDCG@20, MRR@20, MAPc@20) that fits 80 columns.

    `full` names the file with every column and note (the README), printed as a pointer at the end.
    """
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    for t in tables:
        if t.empty_note:
            console.print(f"[bold]Table {t.number}[/bold]: {escape(t.empty_note)}")
        for b in t.blocks:
            if not b.rows:
                continue
            table = Table(title=f"[bold]Table {t.number}[/bold] · {escape(b.title)}", title_justify="left",
                          box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
            table.add_column("method", overflow="fold", ratio=1)
            table.add_column("n", justify="right", no_wrap=True)
            for m in COMPACT:
                table.add_column(HEADERS[m], justify="right", no_wrap=True)
            for r in b.rows:
                cells = [escape(_fmt(r, m, 3)) for m in COMPACT]
                table.add_row(escape(r.label), escape(r.n_text),
                              *[f"[bold]{c}[/bold]" if m in r.bold else c for m, c in zip(COMPACT, cells)])
            for label, vals in b.paper:
                table.add_row(f"[dim]{escape(label)}[/dim]", "", *[f"[dim]{c}[/dim]" for c in _paper_cells(vals, COMPACT)])
            console.print(table)
            for note in b.notes:
                console.print(f"  {escape(note)}")
    rule = tables[0].notes[0] if tables and tables[0].notes else ""
    console.print(escape(rule.replace("**", "")))
    if full:
        console.print(f"All twelve metrics, the paper's numbers and notes: [bold]{escape(str(full))}[/bold]")
