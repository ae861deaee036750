"""Leaderboard: aggregate result files over seeds, mirror the paper's Tables 1-4, plot, publish.

`write_leaderboard(results_dirs, out_dir)` reads every result file under `<out_dir>/results/`
and the extra folders, and regenerates `<out_dir>/aggregate.csv`, `aggregate.json`,
`plots/*.png` and `README.md`. The output depends only on the result files: same inputs give
byte-identical files (no timestamps, sorted iteration, fixed float formatting; figures carry a
digest of what they show and are redrawn only when it changes, see `figures`).

The modules, in the order data flows through them:

- `records`: read and validate result files (`narbench.eval.validation`; a bad file is rejected,
  never averaged in) and group them: one row per `Key` (dataset, split, profile, device kind,
  protocol, encoder, splitter, objective, init), one run per seed (the latest).
- `aggregate`: mean, sample std and n over seeds per row (`aggregate.csv`).
- `significance`: the two-level bootstrap over clusters of queries and seeds (ranx's paired tests on per-query seed means as options).
- `clusters`: each query's cluster (what makes queries dependent: its source model, package x family, class) and family.
- `macro`: the per-family macro average, a second view in the full leaderboard.
- `declared`: one configuration per method, chosen on validation records only (`leaderboard/declared.csv`).
- `variants`: Table 1 with the declared rows, the variants in a table of their own.
- `paper`: the paper's published numbers (`narbench/data/paper_tables.csv`).
- `tables`: which rows each of Tables 1-4 holds, one label per configuration, and the one rule
  of bold and † (per column: best mean among rows with two or more seeds; † significantly worse
  than it). A block is one *setting* (dataset, split, profile, device kind, protocol); a
  training-free encoder's rows (protocol `any`) join every protocol's and device kind's block.
- `render`: Markdown (every column) and a compact terminal table.
- `figures`: one bar chart per table block, t-SNE maps coloured by family.
- `reproduction`: the Reproduction section: each paper number beside ours under both metric
  conventions (narbench's and the authors' evaluator's), and the known reasons they differ.
- `publish`: `write_leaderboard`, the README; only `quick` and `paper` results by default.
- `curves`: the learning curves of `narbench run --curve` runs (`curves.md`, its own command;
  a curve run is a row of its own in the tables, `Record.variant`).
- `ceiling`: the ceiling tables (`ceiling.csv`, `ceiling-families.csv`): the oracle of
  `narbench.eval.ceiling` beside the best committed result (written by `python -m narbench.cli.ceiling`).

May import: narbench.core, narbench.data, narbench.train, narbench.eval.
"""

from narbench.leaderboard.aggregate import ALL_METRICS, EXTRA, aggregate, write_aggregate
from narbench.leaderboard.figures import PLOT_VERSION, TSNE_MAX_POINTS, plot_tables, plot_tsne, tsne_panels
from narbench.leaderboard.paper import MAP_NOTE, PAPER, PAPER_LABEL, PROTOCOL_NOTE, PaperRow, load_paper
from narbench.leaderboard.publish import write_leaderboard
from narbench.leaderboard.records import (
    ANY_PROTOCOL,
    DEFAULT_OBJECTIVE,
    EMB_SUFFIX,
    KEYS,
    PRETRAINED,
    SCRATCH,
    Key,
    NothingToShowError,
    Record,
    RejectedResultsError,
    collect,
    read_record,
    select_runs,
)
from narbench.leaderboard.render import print_tables, tables_markdown
from narbench.leaderboard.reproduction import REASONS, ReproBlock, build_reproduction, paper_row_id, reproduction_markdown
from narbench.leaderboard.significance import ALPHA, SIG_MARK, TESTS, paired_scores, paired_test
from narbench.leaderboard.tables import (
    COLUMNS,
    HEADERS,
    PAPER_PROFILES,
    TABLES,
    Block,
    LeaderTable,
    Row,
    build_tables,
    mark_block,
    row_label,
    row_labels,
)
from narbench.eval.metrics import METRICS

__all__ = [
    "ALL_METRICS", "ALPHA", "ANY_PROTOCOL", "Block", "COLUMNS", "DEFAULT_OBJECTIVE", "EMB_SUFFIX", "EXTRA", "HEADERS",
    "KEYS", "Key", "LeaderTable", "MAP_NOTE", "METRICS", "NothingToShowError", "PAPER", "PAPER_LABEL", "PROTOCOL_NOTE",
    "PAPER_PROFILES", "PLOT_VERSION", "PRETRAINED", "PaperRow", "REASONS", "Record", "ReproBlock", "RejectedResultsError",
    "Row", "SCRATCH", "SIG_MARK", "TABLES", "TESTS", "TSNE_MAX_POINTS", "aggregate", "build_reproduction", "build_tables",
    "collect", "load_paper", "mark_block", "paired_scores", "paired_test", "paper_row_id", "plot_tables", "plot_tsne",
    "print_tables", "read_record", "reproduction_markdown", "row_label", "row_labels", "select_runs",
    "tables_markdown", "tsne_panels", "write_aggregate", "write_leaderboard",
]
