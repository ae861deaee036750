"""Rendering the tables: Markdown for the README, rich tables for the terminal."""

from __future__ import annotations

import math

from narbench.leaderboard.paper import MAP_NOTE
from narbench.leaderboard.tables import COLUMNS, HEADERS, LeaderTable, Row


def _fmt(row: Row, m: str) -> str:
    mean, std = row.mean[m], row.std[m]
    if math.isnan(mean):
        return "–"
    text = f"{mean:.4f}" if math.isnan(std) else f"{mean:.4f}±{std:.4f}"
    return text + row.marks.get(m, "")


def _paper_cells(scores: dict[str, float]) -> list[str]:
    # the paper's MAP is the min(k, |R|) convention: shown under MAPc, a dash under MAP
    return [f"{scores[m]:.3f}" if m in scores else "—" for m in COLUMNS]


def tables_markdown(tables: list[LeaderTable]) -> str:
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
                cells = [f"**{_fmt(r, m)}**" if m in r.bold else _fmt(r, m) for m in COLUMNS]
                lines.append(f"| {r.label} | {r.n} | " + " | ".join(cells) + " |")
            for label, vals in b.paper:
                lines.append(f"| *{label}* | | " + " | ".join(f"*{c}*" for c in _paper_cells(vals)) + " |")
            lines.append("")
            for note in b.notes:
                lines += [f"- {note}"]
            if b.notes:
                lines.append("")
        for note in t.notes:
            lines += [f"*{note}*", ""]
    return "\n".join(lines)


def print_tables(tables: list[LeaderTable], console=None) -> None:
    """Render the tables in the terminal with rich."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    for t in tables:
        if t.empty_note:
            console.print(f"[bold]Table {t.number}: {escape(t.title)}[/bold]\n{escape(t.empty_note)}")
        for b in t.blocks:
            table = Table(title=f"Table {t.number}: {escape(t.title)} — {escape(b.title)}", title_justify="left")
            table.add_column("method")
            table.add_column("n", justify="right")
            for m in COLUMNS:
                table.add_column(HEADERS[m], justify="right")
            for r in b.rows:
                table.add_row(escape(r.label), str(r.n),
                              *[f"[bold]{escape(_fmt(r, m))}[/bold]" if m in r.bold else escape(_fmt(r, m)) for m in COLUMNS])
            for label, vals in b.paper:
                table.add_row(f"[dim]{escape(label)}[/dim]", "", *[f"[dim]{c}[/dim]" for c in _paper_cells(vals)])
            console.print(table)
            for note in b.notes:
                console.print(f"  {escape(note.replace('**', ''))}")
    console.print(escape(MAP_NOTE))
