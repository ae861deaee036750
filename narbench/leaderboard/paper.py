"""The paper's published numbers (Pei et al., ICLR 2024, Tables 1-4), shown beside ours as a reference."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from narbench.eval.metrics import KS

#: The published numbers as data: `narbench/data/paper_tables.csv`, one row per (table, dataset, row)
#: with the paper's nine columns (checked against the paper's text by tests/leaderboard/test_paper.py).
PAPER_FILE = "paper_tables.csv"
#: The paper's column names, in file order, and the narbench metric each one is shown under: their
#: MAP is the min(k, |R|) convention, comparable with our `map_capped@k`, not with ranx's `map@k`.
PAPER_COLUMNS = {**{f"MRR@{k}": f"mrr@{k}" for k in KS}, **{f"MAP@{k}": f"map_capped@{k}" for k in KS},
                 **{f"NDCG@{k}": f"ndcg@{k}" for k in KS}}


@dataclass(frozen=True)
class PaperRow:
    """One row of one of the paper's tables: `row` names the configuration (`gcn`, `motif`, `ce`,
    `scratch`, ...), `name` is the paper's own row label, `scores` maps narbench metric -> value."""

    table: int
    dataset: str
    row: str
    name: str
    scores: dict[str, float]


def load_paper(path: str | Path | None = None) -> list[PaperRow]:
    """The rows of the paper's Tables 1-4, in file order (default: the packaged CSV)."""
    text = Path(path).read_text() if path else resources.files("narbench").joinpath("data", PAPER_FILE).read_text()
    rows = []
    for rec in csv.DictReader(io.StringIO(text)):
        scores = {metric: float(rec[col]) for col, metric in PAPER_COLUMNS.items()}
        rows.append(PaperRow(int(rec["table"]), rec["dataset"], rec["row"], rec["paper_row"], scores))
    return rows


#: table number -> dataset -> the paper's rows for it, in the paper's order
PAPER: dict[int, dict[str, list[PaperRow]]] = {}
for _row in load_paper():
    PAPER.setdefault(_row.table, {}).setdefault(_row.dataset, []).append(_row)

PAPER_LABEL = "paper (their data)"
MAP_NOTE = (
    "MAP convention: `MAP@k` is ranx's AP@k, which divides by all relevant items |R| (the TREC convention), so "
    "MAP@k <= k/|R|: tiny for any encoder when queries have thousands of relevant items (on `nas` with its full "
    "corpus, |R| is about 2,700 and MAP@20 <= 0.007). `MAPc@k` is `map_capped@k`, the same AP rescaled to divide "
    "by min(k, |R|): the paper's MAP column uses that convention, so the paper's MAP numbers are shown under MAPc, "
    "not MAP."
)

PROTOCOL_NOTE = (
    "Protocols: blocks are per supervision protocol and never ranked together. Under `family` (the default) "
    "every trainable encoder trains both loss terms on the family; under `paper` the baselines train on the "
    "coarse label (paper section 4.3) and `ours` on the family (section 3.5), the same labels as under `family`, "
    "so `ours`'s `family` rows are also its `paper` numbers. On `nas` the coarse label is the family: both "
    "protocols give every encoder the same labels. Training-free floors see no labels and appear in every "
    "protocol's block."
)


def paper_rows(table: int, dataset: str) -> list[tuple[str, dict[str, float]]]:
    """(label, scores) of the paper's rows of `table` for `dataset`, labelled as theirs."""
    return [(f"{PAPER_LABEL}: {r.name}", r.scores) for r in PAPER.get(table, {}).get(dataset, [])]
