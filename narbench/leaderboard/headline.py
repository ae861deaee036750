"""The headline table: Table 1 under the default protocol, one column per setting that separates methods.

The project's README shows it between two markers; `narbench leaderboard --readme README.md`
rewrites what lies between them (never typed by hand). The columns are the settings where methods
differ in what they retrieve, not in how well they detect copies: `real` unseen (whole zoo models
held out, the setting that resembles search), `real` crossimpl/reimpl (other packages' code, the
queries isomorphic to a corpus graph left out: `narbench.leaderboard.subsets`) and `nas`. The
`real` standard split is mostly near-duplicate detection (nearly every query model has other
variants in the corpus) and stays in the full leaderboard with that caveat.
One row per method (`method_label`): Table 1 holds each method's declared configuration only
(`narbench.leaderboard.variants`), so a method's row takes each column from its declared
configuration on that dataset, and a line under the table names the configurations that are not
the registered ones. Cells are NDCG@20 mean ± std over seeds with the marks of the Table 1 block
they come from (bold: best of its column; †: significantly worse than it). Rows are sorted by the
first column. The profile is `paper` when every column has a `paper` block holding every method
of the column's `quick` block (a paper grid run part of the way, e.g. its floors on a CPU before
the trained encoders' GPU runs, would otherwise head the README with half the methods), else
`quick`. Under the methods, the bound of the graph-only oracle (`leaderboard/ceiling.csv`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from narbench.leaderboard.records import DEFAULT_OBJECTIVE, SCRATCH, Key
from narbench.leaderboard.significance import ALPHA, DEFAULT_TEST, TESTS
from narbench.leaderboard.tables import Block, LeaderTable, Row, row_label
from narbench.data.store import atomic_write_bytes

START, END = "<!-- narbench:headline:start -->", "<!-- narbench:headline:end -->"
#: the columns: (dataset, split), the first one sorts the rows
COLUMNS = (("real", "unseen"), ("real", "crossimpl/reimpl"), ("nas", "standard"))
PROTOCOL = "family"
METRIC = "ndcg@20"


class HeadlineError(ValueError):
    """The README has no (or broken) headline markers."""


def blocks_by_version(tables: list[LeaderTable], profile: str) -> dict[tuple[str, str], dict[str, Block]]:
    """(dataset, split) -> {dataset label -> its Table 1 block of `profile` under the protocol}, one label per
    version (`real 2.1 (sha)`, `real 2.2 (sha)`; just `nas` where one version has results), oldest first;
    of one version's blocks from several device kinds, the one with the most rows."""
    t1 = next((t for t in tables if t.number == 1), None)
    found: dict[tuple[str, str], dict[str, Block]] = {}
    for b in (t1.blocks if t1 else []):
        if b.setting and b.rows and b.setting[2] == profile and b.setting[4] == PROTOCOL:
            key, label = (b.setting[0].split(" ")[0], b.setting[1]), b.setting[0]
            if label not in found.setdefault(key, {}) or len(b.rows) > len(found[key][label].rows):
                found[key][label] = b
    return {k: dict(sorted(by.items(), key=lambda kv: _version_key(kv[0]))) for k, by in found.items()}


def _blocks(tables: list[LeaderTable], profile: str) -> dict[tuple[str, str], Block]:
    """(dataset, split) -> its Table 1 block of `profile` under the protocol (`blocks_by_version`). Where
    results of several versions of a dataset exist, all of that dataset's columns come from one version:
    from the oldest up, a newer version takes over when its blocks cover every column of the current one,
    each with every method of the current one's block (a version whose leaderboard is still filling does
    not head the README)."""
    found = blocks_by_version(tables, profile)
    out: dict[tuple[str, str], Block] = {}
    for dataset in {ds for ds, _ in found}:
        cols = {k: v for k, v in found.items() if k[0] == dataset}
        label, *newer = sorted({v for by in cols.values() for v in by}, key=_version_key)
        for candidate in newer:  # oldest first; a newer version takes over when it covers the current one
            if all(candidate in by and _labels(by[label]) <= _labels(by[candidate])
                   for by in cols.values() if label in by):
                label = candidate
        out.update({k: by[label] for k, by in cols.items() if label in by})
    return out


def version_key(version: str) -> tuple:
    """Sort key of a version string: its numbers (2.10 after 2.9); () for none."""
    return tuple(int(x) if x.isdigit() else -1 for x in str(version).split(".")) if version else ()


def _version_key(label: str) -> tuple:
    """Sort key of a dataset label `name`, `name V (sha)`: its version's `version_key`."""
    parts = label.split(" ")
    return version_key(parts[1] if len(parts) > 1 else "")


def _labels(block: Block | None) -> set[str]:
    return {r.label for r in block.rows} if block else set()


def _cell(row: Row | None) -> str:
    if row is None or math.isnan(row.mean[METRIC]):
        return "–"
    text = f"{row.mean[METRIC]:.3f}" + ("" if math.isnan(row.std[METRIC]) else f"±{row.std[METRIC]:.3f}")
    text += row.marks.get(METRIC, "")
    return f"**{text}**" if METRIC in row.bold else text


#: the bound under the table: (resolution in ceiling.csv, label). Only `iso` is a bound; the near-duplicate
#: (`nd`) rows of ceiling.csv are a WL-resolution reference that methods exceed, not shown here
CEILINGS = (("iso", "*bound: graph-only oracle, isomorphic graphs tied*"),)
CEILING_NOTE = ("The bound: an oracle that knows every label but sees a graph only up to isomorphism "
                "(`leaderboard/ceiling.csv`, docs/datasets.md \"The ceiling\"); no method that reads only the "
                "graph can score above it, and it is below 1 only where isomorphic graphs of two families meet.")


def method_label(key: Key) -> str:
    """A row's method as the headline names it: its label without objective, parameters or initialisation
    (`graf-lda`, `ours+motif`, `best-floor (floor)`)."""
    return row_label(key._replace(objective=DEFAULT_OBJECTIVE, init=SCRATCH, variant=""))


def display_labels(rows: list[Row]) -> dict[Key, str]:
    """Row key -> the name the headline and the findings give it: its method where the block holds that
    method once (a declared Table 1), else its full label."""
    count: dict[str, int] = {}
    for r in rows:
        count[r.key.encoder] = count.get(r.key.encoder, 0) + 1
    return {r.key: method_label(r.key) if count[r.key.encoder] == 1 else r.label for r in rows}


def read_ceiling(path: str | Path) -> dict[tuple[str, str, str, str], float]:
    """(dataset, version, split, resolution) -> the oracle's METRIC under the `label` rule, from
    `leaderboard/ceiling.csv` (`python -m narbench.cli.ceiling`); empty when the file is missing."""
    import csv

    path = Path(path)
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        return {(r["dataset"], r.get("version", ""), r["split"], r["resolution"]): float(r[METRIC])
                for r in csv.DictReader(fh) if r.get("rule") == "label" and r.get(METRIC)}


def ceiling_of(ceiling: dict[tuple[str, str, str, str], float], label: str, split: str, resolution: str) -> float | None:
    """The oracle's value for a column whose block is labelled `label` (`real`, or `real 2.2 (sha)` where
    results of several versions exist): that version's row; a label without a version takes the dataset's
    only version in the table (None when the table holds several, or none)."""
    parts = label.split(" ")
    dataset, version = parts[0], parts[1] if len(parts) > 1 else None
    if version is None:
        versions = {v for d, v, _, _ in ceiling if d == dataset}
        if len(versions) != 1:
            return None
        version = versions.pop()
    return ceiling.get((dataset, version, split, resolution))


def headline_blocks(tables: list[LeaderTable]) -> tuple[str, dict[tuple[str, str], Block]] | None:
    """(profile, column -> block) of the headline: `paper` where each column's paper block holds every
    method of its quick block, else `quick`; None when quick lacks a column."""
    quick = _blocks(tables, "quick")
    for profile in ("paper", "quick"):
        blocks = _blocks(tables, profile)
        if all(c in blocks and _labels(quick.get(c)) <= _labels(blocks[c]) for c in COLUMNS):
            return profile, blocks
    return None


def headline_markdown(tables: list[LeaderTable], ceiling: dict[tuple[str, str, str, str], float] | None = None) -> str:
    """The headline table as Markdown (with a line saying what it is), or a note that it is missing.

    One row per method (`display_labels`); `ceiling` (`read_ceiling`) adds the oracle's bound under the
    methods, where it has a value."""
    chosen = headline_blocks(tables)
    if chosen is None:
        return "*No `quick` or `paper` results of Table 1 under the `family` protocol on every split yet.*"
    profile, blocks = chosen
    rows: dict[str, dict[tuple[str, str], Row]] = {}
    for col in COLUMNS:
        names = display_labels(blocks[col].rows)
        for r in blocks[col].rows:
            rows.setdefault(names[r.key], {})[col] = r
    first = COLUMNS[0]

    def order(label: str):
        r = rows[label].get(first)
        return (-(r.mean[METRIC] if r and not math.isnan(r.mean[METRIC]) else -1.0), label)

    devices = sorted({blocks[c].setting[3] for c in COLUMNS})
    seeds = sorted({r.n for col in COLUMNS for r in blocks[col].rows})
    head = " | ".join(f"{blocks[c].setting[0]} · {c[1]}" for c in COLUMNS)
    test = TESTS.get(DEFAULT_TEST, DEFAULT_TEST).split(":")[0]
    lines = [f"NDCG@20 (mean ± std over {'/'.join(map(str, seeds))} seeds), Table 1, `{profile}` profile, "
             f"{'/'.join(devices)}, protocol `{PROTOCOL}`, one row per method; **bold**: best of its column, †: "
             f"significantly worse than it ({test}, p < {ALPHA}). Generated by `narbench leaderboard`.", "",
             f"| method | {head} |", "|---|" + "---:|" * len(COLUMNS)]
    for label in sorted(rows, key=order):
        lines.append(f"| {label} | " + " | ".join(_cell(rows[label].get(c)) for c in COLUMNS) + " |")
    shown = False
    for resolution, label in CEILINGS:
        values = [ceiling_of(ceiling or {}, blocks[c].setting[0], c[1], resolution) for c in COLUMNS]
        if any(v is not None for v in values):
            shown = True
            lines.append(f"| {label} | " + " | ".join("–" if v is None else f"*{v:.3f}*" for v in values) + " |")
    configured = _configurations(rows)
    if configured:
        lines += ["", "Configurations chosen on validation (`leaderboard/declared.csv`), where not the registered one: "
                  + "; ".join(configured) + "."]
    if shown:
        lines += ["", CEILING_NOTE]
    return "\n".join(lines)


def _configurations(rows: dict[str, dict[tuple[str, str], Row]]) -> list[str]:
    """`method` variant on dataset, ... for each headline row shown in a configuration with parameters."""
    out = []
    for label in sorted(rows):
        by_variant: dict[str, list[str]] = {}
        for col, r in rows[label].items():
            if r.label != label and r.key.variant:
                datasets = by_variant.setdefault(r.key.variant, [])
                name = r.key.dataset.split(" ")[0]
                if name not in datasets:
                    datasets.append(name)
        if by_variant:
            out.append(f"`{label}` " + ", ".join(f"{v} on {' and '.join(ds)}" for v, ds in sorted(by_variant.items())))
    return out


def check_markers(path: str | Path) -> str:
    """The text of `path`; HeadlineError unless it has one START marker before one END marker."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise HeadlineError(f"{path}: cannot read it for the headline table ({exc.strerror})") from exc
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise HeadlineError(f"{path}: needs one `{START}` line followed by one `{END}` line for the headline table")
    return text


def update_readme(path: str | Path, tables: list[LeaderTable], ceiling: dict | None = None, *,
                  text: str | None = None, write: Callable[[Path, bytes], None] = atomic_write_bytes) -> bool:
    """Rewrite the headline between the markers of `path` (whose text is `text`, default read from it);
    True if the file changed.

    Raises HeadlineError when the file lacks the markers (nothing is written).
    """
    text = check_markers(path) if text is None else text
    return replace_between(path, text, START, END, headline_markdown(tables, ceiling), write)


def replace_between(path: str | Path, text: str, start: str, end: str, body: str,
                    write: Callable[[Path, bytes], None] = atomic_write_bytes) -> bool:
    """Write `text` (the file's) to `path` with `body` between its one `start` and one `end` marker
    line; True if that changed the file (it is written by `write`, atomically, and only then)."""
    before, rest = text.split(start)
    _, after = rest.split(end)
    new = f"{before}{start}\n{body}\n{end}{after}"
    if new == text:
        return False
    write(Path(path), new.encode())
    return True
