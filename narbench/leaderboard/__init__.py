"""Leaderboard: aggregate result files over seeds, mirror the paper's Tables 1-4, plot, publish.

`write_leaderboard(results_dirs, out_dir)` reads every result file under `<out_dir>/results/`
and the extra directories, and regenerates `<out_dir>/aggregate.csv`, `aggregate.json`,
`plots/*.png` and `README.md`. The output depends only on the result files: same inputs give
byte-identical markdown and CSV (no timestamps, sorted iteration, fixed float formatting).

Grouping: one leaderboard row per `Key` (dataset, split, profile, device kind, protocol,
encoder, splitter, objective, init); several runs of one row with the same seed count once
(the latest by `created`, then `run_id`). A table block is one *setting* (dataset, split,
profile, device kind, protocol): runs of different protocols are never ranked together. A
training-free encoder saw no labels, so its rows (protocol `any`) appear in the block of every
protocol of their dataset / split / profile / device kind. Significance (Tables 1 and 2):
ranx's paired Student's t-test between the row with the best mean NDCG@20 and every other
row of the block, on per-query scores from the `.queries.json.gz` sidecars, seed-matched
(only the seeds both rows have) with the queries pooled over those seeds.
"""

from narbench.leaderboard.aggregate import ALL_METRICS, EXTRA, aggregate, write_aggregate
from narbench.leaderboard.figures import TSNE_MAX_POINTS, plot_ndcg, plot_tsne
from narbench.leaderboard.paper import MAP_NOTE, PAPER, PAPER_LABEL
from narbench.leaderboard.publish import write_leaderboard
from narbench.leaderboard.records import (
    ANY_PROTOCOL,
    DEFAULT_OBJECTIVE,
    EMB_SUFFIX,
    KEYS,
    PRETRAINED,
    SCRATCH,
    Key,
    Record,
    RejectedResultsError,
    collect,
    read_record,
    select_runs,
)
from narbench.leaderboard.render import print_tables, tables_markdown
from narbench.leaderboard.significance import ALPHA, SIG_MARK, paired_scores, paired_test
from narbench.leaderboard.tables import COLUMNS, HEADERS, Block, LeaderTable, Row, build_tables
from narbench.metrics import METRICS

__all__ = [
    "ALL_METRICS", "ALPHA", "ANY_PROTOCOL", "Block", "COLUMNS", "DEFAULT_OBJECTIVE", "EMB_SUFFIX", "EXTRA",
    "HEADERS", "KEYS", "Key", "LeaderTable", "MAP_NOTE", "METRICS", "PAPER", "PAPER_LABEL", "PRETRAINED", "Record", "RejectedResultsError",
    "Row", "SCRATCH", "SIG_MARK", "TSNE_MAX_POINTS", "aggregate", "build_tables", "collect",
    "paired_scores", "paired_test", "plot_ndcg", "plot_tsne", "print_tables", "read_record",
    "select_runs", "tables_markdown", "write_aggregate", "write_leaderboard",
]
