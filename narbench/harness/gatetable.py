"""The gate's table: what `narbench check` prints of a `narbench.harness.gate.GateReport` (warnings,
skipped datasets, every compared metric against its band, notes on missing entries, the verdict).

Apart from `gate` so that the gate's run and comparison read in one sitting; rich is imported here
only, where it prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from narbench.harness.gate import GateReport

if TYPE_CHECKING:  # rich is imported where it prints: `narbench --help` reads the gate's defaults
    from rich.console import Console


def render(report: GateReport, console: Console, *, strict: bool = False, verbose: bool = True) -> None:
    """Print the report: warnings, skipped datasets, one table of every compared metric, the verdict."""
    from rich.markup import escape
    from rich.table import Table

    for line in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(line)}")
    for name, reason in report.skipped:
        console.print(f"[yellow]warning:[/yellow] skipped dataset {escape(name)}: {escape(reason)}")
    for key, message in report.errors:
        console.print(f"[red]error:[/red] {escape(key)}: {escape(message)}")
    styles = {"dropped": "bold red", "improved": "green", "unchanged": "dim", "new": "cyan"}
    shown = [c for c in report.cells if verbose or c.status != "unchanged"]
    if shown and not report.updated:
        how = f"tolerance {report.tolerance:g}" if report.tolerance is not None else "band per metric"
        table = Table(title=f"narbench check vs {report.reference_path} ({how})")
        for col, justify in (("entry", "left"), ("metric", "left"), ("reference", "right"), ("current", "right"),
                             ("delta", "right"), ("band", "right"), ("status", "left")):
            table.add_column(col, justify=justify)
        for cell in shown:
            ref = "-" if cell.reference is None else f"{cell.reference:.6f}"
            delta = "-" if cell.delta is None else f"{cell.delta:+.6f}"
            style = styles[cell.status]
            table.add_row(cell.key, cell.metric, ref, f"{cell.current:.6f}", delta, f"{cell.tolerance:.1e}",
                          f"[{style}]{cell.status}[/{style}]")
        console.print(table)
    how = "fails with --strict" if strict else "not a failure; --strict makes it one"
    for key in ([] if report.updated else report.missing):
        console.print(f"[cyan]note:[/cyan] no reference entry for {escape(key)} ({how})")
    for key, metric in report.missing_metrics:
        console.print(f"[cyan]note:[/cyan] {escape(key)} {escape(metric)} is in the reference but this run has no such "
                      f"metric ({how})")
    new_metrics = [] if report.updated else [c for c in report.new if c.key not in report.missing]
    for c in new_metrics:
        console.print(f"[cyan]note:[/cyan] {escape(c.key)} {escape(c.metric)} has no reference value ({how})")
    if report.timings:
        total = sum(report.timings.values())
        console.print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()) + f"; total {total:.1f}")
    drops = report.dropped
    if report.updated:
        console.print(f"[bold]reference updated:[/bold] {len(report.entries)} entries written to {report.reference_path}")
    elif report.passed(strict):
        console.print(f"[bold green]gate passed[/bold green]: {len(report.improved)} improved, "
                      f"{sum(c.status == 'unchanged' for c in report.cells)} unchanged, no drops")
    else:
        incomplete = len(report.missing) + len(report.missing_metrics) + len(new_metrics)
        ups = [] if report.allow_improvements else report.improved
        console.print(f"[bold red]gate failed[/bold red]: {len(drops)} metric(s) dropped"
                      + (f", {len(ups)} rose above their band (behaviour changed: `narbench check --update` if "
                         f"intended, `--allow-improvements` to let rises pass)" if ups else "")
                      + (f", {len(report.errors)} error(s)" if report.errors else "")
                      + (f", {incomplete} missing reference entr(y/ies) or metric(s)" if strict and incomplete else ""))
        for c in drops + ups:
            console.print(f"  [red]{escape(c.key)} {c.metric}: {c.reference:.6f} -> {c.current:.6f} ({c.delta:+.6f}; "
                          f"band {c.tolerance:.1e})[/red]")
