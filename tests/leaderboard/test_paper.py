"""The paper's published numbers (narbench/data/paper_tables.csv) against the paper's own text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from narbench.leaderboard.paper import PAPER, PAPER_COLUMNS, load_paper

ROOT = Path(__file__).resolve().parents[2]
#: where CI (and this repository's checkouts) keep the paper: ../shared/paper/ from the repository root
PAPER_TEXT = ROOT.parent / "shared" / "paper" / "neural-architecture-retrieval.md"
DATASETS = {"Real": "real", "NAS": "nas"}


def parse_paper_tables(text: str) -> dict[tuple[int, str, str], list[float]]:
    """(table, dataset, paper row name) -> the nine numbers, from the tab-separated tables of the
    paper's Markdown: rows of nine numbers above a caption `Table N: ...` belong to table N."""
    out: dict[tuple[int, str, str], list[float]] = {}
    pending: list[tuple[str, str, list[float]]] = []
    dataset = ""
    for line in text.splitlines():
        caption = re.match(r"Table (\d+):", line.strip())
        if caption:
            for ds, name, values in pending:
                out[(int(caption.group(1)), ds, name)] = values
            pending, dataset = [], ""
            continue
        fields = [re.sub(r"</?b>", "", f).strip() for f in line.split("\t")]
        if len(fields) < 10:
            continue
        try:
            values = [float(f) for f in fields[-9:]]
        except ValueError:
            continue
        labels = [f for f in fields[:-9] if f]
        if len(labels) == 2:
            dataset = DATASETS[labels[0]]
        pending.append((dataset or "real", labels[-1], values))  # Table 4 has no dataset column: real
    return out


@pytest.mark.skipif(not PAPER_TEXT.is_file(), reason=f"the paper's text is not at {PAPER_TEXT} "
                                                      "(CI keeps it in ../shared/paper/)")
def test_packaged_numbers_equal_the_papers_tables():
    published = parse_paper_tables(PAPER_TEXT.read_text())
    rows = load_paper()
    assert len(published) == len(rows) == 22  # Tables 1-3: 3 + 4 + 3 rows per dataset; Table 4: 2
    for row in rows:
        values = published[(row.table, row.dataset, row.name)]
        assert [row.scores[m] for m in PAPER_COLUMNS.values()] == values, (row.table, row.dataset, row.name)


def test_rows_name_configurations_and_metrics():
    assert sorted(PAPER) == [1, 2, 3, 4] and sorted(PAPER[4]) == ["real"]
    assert [r.row for r in PAPER[2]["nas"]] == ["node-number", "motif-number", "random", "motif"]
    assert [r.row for r in PAPER[4]["real"]] == ["scratch", "pretrained"]
    # the paper's MAP is shown under map_capped@k, never under ranx's map@k
    assert set(PAPER[1]["nas"][0].scores) == {f"{m}@{k}" for m in ("mrr", "map_capped", "ndcg") for k in (20, 50, 100)}
