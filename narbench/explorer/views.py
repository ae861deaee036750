"""The leaderboard as data for a page: one view per table block, with what the Markdown shows.

A *view* is one block of one of Tables 1-4 (a setting: dataset, split, profile, device kind,
protocol): its rows with mean, std, n, the bold and † marks and the 95% intervals per metric, the
paper's rows beside them, the notes, and the bar chart `narbench leaderboard` drew for it. The
numbers come from the same code as the Markdown leaderboard (`narbench.leaderboard`): read,
validate, aggregate and test once, then serve. `load_views` reads result folders (the committed
`leaderboard/results` and any `--results DIR`), so a user's own runs sit beside the committed ones.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from narbench.leaderboard.tables import COLUMNS, HEADERS, PAPER_PROFILES, LeaderTable

#: the payload's format, bumped when a field changes meaning
FORMAT = 1


@dataclass(frozen=True)
class View:
    """One table block as the page shows it."""

    id: str  # url-safe, unique: table<N>-<dataset>-<split>-<profile>-<device>-<protocol>
    table: int
    title: str
    setting: dict[str, str]  # dataset, split, profile, device, protocol
    columns: list[str]  # metric keys, in the Markdown's order
    headers: dict[str, str]  # metric key -> column header (NDCG@20, MAPc@20, ...)
    rows: list[dict[str, Any]]  # label, n, mean, std, bold, marks, ci (per metric; NaN -> None)
    paper: list[dict[str, Any]] = field(default_factory=list)  # label, values: the paper's numbers
    notes: list[str] = field(default_factory=list)
    plot: str | None = None  # file name of the block's bar chart, when one was drawn


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def views_from_tables(tables: list[LeaderTable], plot_dir: str | Path | None = None) -> list[View]:
    """The blocks of `tables` as views; `plot` names the block's chart in `plot_dir` when one there shows
    exactly these rows (its stamped digest, `narbench.leaderboard.figures`): with a user's own results
    beside the committed ones, a committed chart of the same setting shows other rows and is left out."""
    from narbench.leaderboard.figures import bar_chart_digest, bar_chart_name, drawn_from

    views: list[View] = []
    for t in tables:
        for b in t.blocks:
            if not b.setting or not b.rows:
                continue
            dataset, split, profile, device, protocol = b.setting
            plot = bar_chart_name(t.number, b.setting)
            views.append(View(
                id=_slug(f"table{t.number}-{dataset}-{split}-{profile}-{device}-{protocol}"),
                table=t.number, title=t.title,
                setting={"dataset": dataset, "split": split, "profile": profile, "device": device, "protocol": protocol},
                columns=list(COLUMNS), headers={m: HEADERS[m] for m in COLUMNS},
                rows=[{"label": r.label, "n": r.n,
                       "mean": {m: _num(r.mean.get(m, math.nan)) for m in COLUMNS},
                       "std": {m: _num(r.std.get(m, math.nan)) for m in COLUMNS},
                       "bold": sorted(r.bold), "marks": dict(r.marks),
                       "ci": {m: [_num(lo), _num(hi)] for m, (lo, hi) in r.ci.items()}} for r in b.rows],
                paper=[{"label": label, "values": {m: _num(v) for m, v in values.items()}} for label, values in b.paper],
                notes=list(b.notes),
                plot=plot if plot_dir is not None and drawn_from(Path(plot_dir) / plot) == bar_chart_digest(t.number, b)
                else None))
    ids = [v.id for v in views]
    if len(set(ids)) != len(ids):  # two blocks of one table and setting cannot happen; guard the url space
        raise ValueError(f"duplicate view ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return views


def load_views(results_dirs: Iterable[str | Path], *, profiles: Iterable[str] = PAPER_PROFILES,
               plot_dir: str | Path | None = None, progress: Callable[[str], None] | None = None,
               declared: str | Path | None = None) -> dict[str, Any]:
    """Read and validate the result files of `results_dirs`, build the tables as `narbench leaderboard`
    does (Table 1 one row per method with its configuration in `declared`, the leaderboard folder's
    `declared.csv`; none: every variant as built), and return the page's payload: {"format", "results", "views": [View as dict], "notes"}.

    Raises what `narbench.leaderboard.collect` raises for a bad result file (`RejectedResultsError`,
    naming every one) and `NothingToShowError` when no file is of a shown profile."""
    from narbench.leaderboard import NothingToShowError, collect
    from narbench.leaderboard.subsets import with_subsets
    from narbench.leaderboard.variants import leaderboard_tables

    say = progress or (lambda _text: None)
    dirs = [Path(d) for d in results_dirs]
    missing = [d for d in dirs if not d.is_dir()]
    if missing:
        raise FileNotFoundError(f"results folder {missing[0]} does not exist")
    say(f"reading and validating the result files in {', '.join(map(str, dirs))}")
    profiles = tuple(profiles)
    every = collect(dirs)
    records = [r for r in every if r.result.profile in profiles]
    if not records:
        raise NothingToShowError(f"no result file of the profiles {', '.join(profiles)} in {', '.join(map(str, dirs))}")
    say(f"{len(records)} result files; aggregating and testing (the tables' significance marks)")
    tables = leaderboard_tables(with_subsets(records), declared=declared)
    views = views_from_tables(tables, plot_dir)
    say(f"{len(views)} views")
    return {"format": FORMAT, "results": len(records), "folders": [str(d) for d in dirs],
            "views": [asdict(v) for v in views], "notes": {str(t.number): t.notes for t in tables}}


def view_csv(view: dict[str, Any]) -> str:
    """A view as CSV: one line per row, mean, std and n per metric (what the table shows, unrounded)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = view["columns"]
    w.writerow(["table", "dataset", "split", "profile", "device", "protocol", "method", "n",
                *[f"{m}_{part}" for m in cols for part in ("mean", "std")]])
    s = view["setting"]
    for r in view["rows"]:
        cells = []
        for m in cols:
            cells += ["" if r["mean"][m] is None else repr(r["mean"][m]), "" if r["std"][m] is None else repr(r["std"][m])]
        w.writerow([view["table"], s["dataset"], s["split"], s["profile"], s["device"], s["protocol"], r["label"], r["n"],
                    *cells])
    return buf.getvalue()
