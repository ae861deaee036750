"""Rendering (`narbench.leaderboard.render`): Markdown with every column, a compact terminal table."""

from __future__ import annotations

import io

from rich.console import Console

from narbench import leaderboard as lb


def test_markdown_has_every_column_marks_and_the_rule_once_per_table(results):
    md = lb.tables_markdown(lb.build_tables(lb.collect([results])))
    tables = md.split("## Per-family macro average")[0]  # the tables, not their macro view after them
    line = {ln.split(" | ")[0][2:]: ln for ln in tables.splitlines() if ln.startswith("| ")}
    assert lb.SIG_MARK in line["gcn"] and lb.SIG_MARK not in line["gat"]
    assert "**" in line["ours+motif"] and "**" not in line["gcn"]
    assert line["method"].count("|") == 2 + len(lb.COLUMNS) + 1 and "MAPc@20" in line["method"]
    gcn_paper = [ln for ln in md.splitlines() if ln.startswith("| *paper (their data): GCN* |")]
    assert len(gcn_paper) == 2 and any("*0.927*" in ln and "*0.953*" in ln for ln in gcn_paper)
    assert md.count("**Bold**: the best mean of the column") == 4  # once under each table


def test_terminal_table_is_compact_and_readable_at_80_columns(results):
    buf = io.StringIO()
    lb.print_tables(lb.build_tables(lb.collect([results])), Console(file=buf, width=80), full="leaderboard/README.md")
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # no truncated cells
    header = next(line for line in text.splitlines() if "NDCG@20" in line)
    assert header.split() == ["method", "n", "NDCG@20", "MRR@20", "MAPc@20"]
    gcn = next(line for line in text.splitlines() if line.lstrip().startswith("gcn "))
    assert gcn.split()[1] == "3" and gcn.count("±") == 3 and gcn.count(lb.SIG_MARK) == 3
    assert "NDCG@100" not in text and text.rstrip().endswith("leaderboard/README.md")
