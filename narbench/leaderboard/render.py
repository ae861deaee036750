"""Rendering the tables: Markdown for the README (every column; under the headline metrics NDCG@20,
MRR@20, MAPc@20 the 95% confidence interval of the mean), a compact table for the terminal."""

from __future__ import annotations

import math
from pathlib import Path

from narbench.leaderboard.tables import CI_COLUMNS, COLUMNS, HEADERS, LeaderTable, Row

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
    return "\n".join(lines)


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
