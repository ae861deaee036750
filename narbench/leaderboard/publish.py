"""Publishing: regenerate the leaderboard folder (README, aggregate files, plots) from result files."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from narbench.leaderboard.aggregate import aggregate, write_aggregate
from narbench.leaderboard.claims import findings_markdown, update_findings
from narbench.leaderboard.figures import plot_tables, plot_tsne
from narbench.leaderboard.ledger import FILE_NAME as LEDGER_FILE, Ledger
from narbench.leaderboard.headline import check_markers, read_ceiling, update_readme
from narbench.leaderboard.paper import MAP_NOTE, PAPER_LABEL, PROTOCOL_NOTE
from narbench.leaderboard.records import NothingToShowError, Verifier, collect
from narbench.leaderboard.render import print_tables, tables_markdown
from narbench.leaderboard.reproduction import build_reproduction, reproduction_markdown
from narbench.leaderboard.significance import DEFAULT_TEST
from narbench.leaderboard.invariance import invariance_markdown
from narbench.leaderboard.versions import versions_markdown
from narbench.leaderboard.subsets import package_markdown, with_subsets
from narbench.leaderboard.tables import PAPER_PROFILES
from narbench.leaderboard.variants import declared_markdown, leaderboard_tables, update_versus
from narbench.core.cache import DiskFullError, WriteError, no_space
from narbench.data.store import write_temp
from narbench.eval.validation import KnownDataset

#: what the `real` standard split measures (said once above the tables)
STANDARD_NOTE = ("**Read `real` standard with care**: nearly every one of its query models (`meta.identity`) has "
                 "other variants (widths, depths, heads of the same zoo model) in the corpus, so it mostly measures "
                 "near-duplicate detection. The settings that separate methods are `real` unseen (whole zoo models "
                 "held out), `real` crossimpl/reimpl and `nas`; the repository README's headline shows those.")
#: what the crossimpl subsets are
SUBSET_NOTE = ("`crossimpl/reimpl` and `crossimpl/exact`: the cross-implementation queries not isomorphic / "
               "isomorphic to a corpus graph (crossimpl 2.1.1, docs/datasets.md); an `exact` query is found by copy "
               "detection, so `reimpl` is the number that measures reimplementation. `crossimpl` holds both.")

#: what was checked beyond validation (the `verified` column of aggregate.csv)
VERIFIED_NOTE = ("Every result file's per-query scores were also checked for values no ranking gives (MRR not a "
                 "reciprocal rank, ...) and, on a registered dataset's current version, for values above what the "
                 "query's relevant count |R| allows (MAP@k at most min(k, |R|) / |R|; docs/results.md). Column `verified` of aggregate.csv: `re-run` where `narbench leaderboard "
                 "--verify` re-ran every seed of a training-free encoder's row and got its per-query scores exactly "
                 "({rerun} files; `verified.csv` beside this page lists each file's sha256, so a file changed by "
                 "one byte is no longer `re-run`); `unverified` elsewhere: a trained encoder's numbers are "
                 "taken as written, since a self-consistent forgery of a trained run cannot be told from a real one "
                 "without training it again.")

#: the figures the leaderboard owns in `<out>/plots/` (older names included, so they are cleaned up)
_OWNED = {"bars": ("table*.png", "ndcg-*.png"), "tsne": ("tsne-*.png",)}


def write_leaderboard(results_dirs: Iterable[str | Path] = (), out_dir: str | Path = "leaderboard", *,
                      profiles: Iterable[str] = PAPER_PROFILES, plots: bool = True, tsne: bool = True,
                      stat_test: str = DEFAULT_TEST, redraw: bool = False, datasets: Iterable[KnownDataset] | None = None,
                      readme: str | Path | None = None, console=None,
                      progress: Callable[[str], None] | None = None, verify: Verifier | None = None,
                      ledger: str | Path | None = None) -> Path:
    """Regenerate `<out_dir>/README.md`, `aggregate.csv/json` and `plots/` from the result files.

    Args:
        results_dirs: folders of result files read besides `<out_dir>/results/` (read when it exists).
        out_dir: the leaderboard folder.
        profiles: the profiles shown (default quick and paper); other results are left out, and
            the README says how many. A profile outside `PAPER_PROFILES` gets blocks of its own
            without the paper's numbers.
        plots, tsne: draw the bar charts / the t-SNE maps (the slowest part).
        stat_test: the test of the tables' † (`narbench.leaderboard.significance.TESTS`; default the
            two-level bootstrap over queries and seeds).
        redraw: redraw every figure, even those whose digest says nothing changed.
        datasets: the data results may be on (default: the registered datasets, `narbench.eval.validation`).
        readme: a file (the project's README) whose headline table, between the markers of
            `narbench.leaderboard.headline`, is rewritten from these tables; a file without the
            markers raises `HeadlineError` before anything is written.
        console: a rich Console to print the compact tables on.
        progress: called with a line of text at every step (the CLI prints them on stderr).
        verify: re-makes the shown result files it can (`narbench.harness.verify.FloorVerifier`, the CLI's
            `--verify`); a file it re-makes differently is rejected, rows it re-made entirely are `re-run`
            in the aggregate's `verified` column.
        ledger: the record of files re-made exactly (`narbench.leaderboard.ledger`; default
            `<out_dir>/verified.csv`): a file in it counts as re-made without `verify` running it again, and
            a file `verify` re-makes is added to it at once (an interrupted `--verify` keeps what it did).
    Returns:
        The README's path. Raises `RejectedResultsError` (a ValueError) naming every result
        file that fails validation, and `NothingToShowError` when no result file is of a shown
        profile (saying why), before anything is written. Files under `out_dir` other than
        `out_dir/results/` (its own aggregate.json) are never read as results. Every file is
        written to a temp name beside it and all are renamed into place at the end: a file that
        cannot be written (a full disk) raises `WriteError` naming it, and none is changed.
    """
    say = progress or (lambda _text: None)
    out_dir, profiles, t0 = Path(out_dir), tuple(profiles), time.perf_counter()
    dirs = [out_dir / "results"] if (out_dir / "results").is_dir() else []
    dirs += [Path(d) for d in results_dirs]
    say(f"reading and validating the result files in {', '.join(map(str, dirs)) or '(no folder)'}")
    book = Ledger(out_dir / LEDGER_FILE if ledger is None else ledger)
    every = collect(dirs, datasets=datasets, exclude=[out_dir],  # never its own aggregate.json
                    verify=book.verifier(verify, say), keep=lambda r: r.result.profile in profiles)
    records = [r for r in every if r.result.profile in profiles]
    left_out = Counter(r.result.profile for r in every if r.result.profile not in profiles)
    if not records:
        raise NothingToShowError(_nothing_to_show(dirs, left_out, profiles))
    say(f"{len(every)} result files valid ({time.perf_counter() - t0:.1f} s); "
        f"{len(records)} shown, {sum(left_out.values())} of other profiles left out")
    shown = with_subsets(records)  # crossimpl's reimpl and exact subsets as splits of their own
    df = aggregate(shown)
    staged = Staged()
    try:
        write_aggregate(df, out_dir, staged.write)
        say(f"aggregated {len(df)} configurations; significance tests")
        tables = leaderboard_tables(shown, df, stat_test=stat_test, declared=out_dir / "declared.csv")
        if readme is not None:
            check_markers(readme)
        figures: dict[str, list[Path]] = {}
        if plots and len(df):
            figures["bars"] = plot_tables(tables, out_dir / "plots", redraw=redraw, progress=say, write=staged.write)
            if tsne:
                figures["tsne"] = plot_tsne(records, out_dir / "plots", redraw=redraw, progress=say, write=staged.write)
        plot_paths = [p for paths in figures.values() for p in paths]
        page = out_dir / "README.md"
        narrative = _narrative(shown, tables, out_dir)
        staged.write(page, _readme(records, left_out, df, tables, plot_paths, out_dir, profiles, narrative).encode())
        if readme is not None:
            _update_headline(Path(readme), shown, tables, read_ceiling(out_dir / "ceiling.csv"), staged, say)
        staged.commit()
    finally:
        staged.discard()
    for kind, paths in figures.items():
        _keep_only(paths, out_dir / "plots", _OWNED[kind])
    say(f"done in {time.perf_counter() - t0:.1f} s")
    if console is not None:
        print_tables(tables, console, full=page)
    return page


class Staged:
    """The files of one leaderboard, each written to a temp name beside it: `commit` renames them all
    into place, `discard` removes what is left (temps, folders it made): every file changes or none."""

    def __init__(self) -> None:
        self.temps: dict[Path, Path] = {}  # final path -> its temp file
        self.data: dict[Path, bytes] = {}
        self.made: list[Path] = []  # folders created for the files, removed by `discard` while empty

    def write(self, path: Path, data: bytes) -> None:
        """Write `data` to a temp file beside `path`; an OSError becomes `WriteError` naming `path`."""
        path = Path(path)
        try:
            self._mkdir(path.parent)
            tmp = write_temp(path, data)
        except OSError as exc:
            raise _write_error(path, exc, "nothing of the leaderboard was written") from exc
        old = self.temps.get(path)  # a file written twice (the README: headline, then findings)
        if old is not None:
            old.unlink(missing_ok=True)
        self.temps[path], self.data[path] = tmp, data

    def read_text(self, path: Path) -> str:
        """The text of `path` as it will be after `commit`."""
        path = Path(path)
        return self.data[path].decode() if path in self.data else path.read_text()

    def commit(self) -> None:
        """Rename every temp file onto its path (written by then: only a rename can still fail)."""
        total = len(self.temps)
        for done, (path, tmp) in enumerate(list(self.temps.items())):
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise _write_error(path, exc, f"{done} of the leaderboard's {total} files were replaced "
                                              "before it; run it again") from exc
            del self.temps[path]
        self.made = []

    def discard(self) -> None:
        """Remove the temp files not renamed, and the folders made for them (when empty)."""
        for tmp in self.temps.values():
            tmp.unlink(missing_ok=True)
        self.temps = {}
        for folder in reversed(self.made):
            try:
                folder.rmdir()
            except OSError:
                pass
        self.made = []

    def _mkdir(self, folder: Path) -> None:
        missing = [f for f in (folder, *folder.parents) if not f.exists()]
        for f in reversed(missing):
            f.mkdir(exist_ok=True)
            self.made.append(f)


def _write_error(path: Path, exc: OSError, note: str) -> WriteError:
    return (DiskFullError if no_space(exc) else WriteError)(path, exc, note)


def _update_headline(readme: Path, shown, tables, ceiling, staged: Staged, say: Callable[[str], None]) -> None:
    """The headline table and the findings of the project's README, staged with the leaderboard's files."""
    changed = update_readme(readme, tables, ceiling, write=staged.write)
    say(f"headline table in {readme}: " + ("updated" if changed else "unchanged"))
    changed = update_findings(readme, shown, tables, text=staged.read_text(readme), write=staged.write)
    if changed is not None:
        say(f"findings in {readme}: " + ("updated" if changed else "unchanged"))
    docs = readme.parent / "docs" / "leaderboard.md"  # the project's docs beside its README
    changed = update_versus(docs, tables, write=staged.write) if docs.is_file() else None
    if changed is not None:
        say(f"declared against test-best in {docs}: " + ("updated" if changed else "unchanged"))


def _narrative(shown, tables, out_dir: Path) -> str:
    """The page's findings (checked phrasing, `claims.findings_markdown`) and its declared configurations."""
    findings = findings_markdown(shown, tables)
    lines = ["## Findings", "",
             "What separates the methods in the headline's settings, written from the tables in a fixed phrasing that "
             "the test suite checks against them (`narbench.leaderboard.claims`).", "", findings or "*None yet.*", ""]
    declared = declared_markdown(out_dir / "declared.csv", tables)
    return "\n".join(lines + ([declared, ""] if declared else []))


def _nothing_to_show(dirs: list[Path], left_out: Counter, profiles: tuple[str, ...]) -> str:
    where = ", ".join(map(str, dirs)) or "(no folder: pass --results DIR)"
    shown = " and ".join(profiles)
    if not left_out:
        return f"nothing to show: no result files in {where}; `narbench run --out DIR` writes one (nothing was written)"
    other = ", ".join(f"{n} of profile {p}" for p, n in sorted(left_out.items()))
    flags = " ".join(f"--profile {p}" for p in sorted({*profiles, *left_out}))
    return (f"nothing to show: the result files in {where} are {other}; the leaderboard shows {shown} unless "
            f"asked: add {flags} (nothing was written)")


def _keep_only(paths: list[Path], folder: Path, patterns: tuple[str, ...]) -> None:
    """Delete the figures of these kinds in `folder` that this run did not produce (stale ones)."""
    keep = {p.name for p in paths}
    for pattern in patterns:
        for old in folder.glob(pattern):
            if old.name not in keep:
                old.unlink(missing_ok=True)


def _readme(records, left_out: Counter, df, tables, plot_paths, out_dir: Path, profiles: tuple[str, ...],
            narrative: str = "") -> str:
    datasets = sorted({(r.dataset, r.result.dataset.get("version", "?"), r.result.dataset.get("sha256", "")[:12])
                       for r in records})
    shown = " and ".join(f"`{p}`" for p in profiles)
    lines = [
        "# narbench leaderboard",
        "",
        "Generated by `narbench leaderboard` from the result files; do not edit by hand. "
        f"{len(records)} result files of the profiles {shown}, {len(df)} configurations (dataset, split, profile, "
        "device kind, protocol, encoder, splitter, objective, init, encoder variant). Every result file was validated first "
        "(metrics within range and equal to its per-query scores, a registered dataset with its pinned content). "
        "Per-configuration means and stds: [aggregate.csv](aggregate.csv), [aggregate.json](aggregate.json).",
        "",
        VERIFIED_NOTE.format(rerun=sum(r.verified for r in records)),
        "",
    ]
    if left_out:
        other = ", ".join(f"{n} of profile `{p}`" for p, n in sorted(left_out.items()))
        lines += [f"Left out: {other} (small models or data subsets: never ranked beside the paper; "
                  "`narbench leaderboard --profile NAME` adds a profile, in blocks of its own without the paper's "
                  "numbers).", ""]
    if datasets:
        lines += ["Datasets: " + ", ".join(f"`{n}` {v} (sha256 {s}…)" for n, v, s in datasets) + ".", ""]
    lines += [f"The *{PAPER_LABEL}* rows are the numbers published by Pei et al. (ICLR 2024) on their own "
              f"data sets, shown beside the {' and '.join(f'`{p}`' for p in PAPER_PROFILES)} profiles only; narbench does not reproduce their data exactly: they are a reference, not a "
              "comparison on equal terms.", "", MAP_NOTE, "", PROTOCOL_NOTE, ""]
    lines += [STANDARD_NOTE, "", SUBSET_NOTE, ""]
    if narrative:
        lines.append(narrative)
    lines.append(tables_markdown(tables))
    packages = package_markdown(records)
    if packages:
        lines.append(packages)
    invariance = invariance_markdown(records)
    if invariance:
        lines.append(invariance)
    changes = versions_markdown(records)
    if changes:
        lines.append(changes)
    lines.append(reproduction_markdown(build_reproduction(tables, df)))
    if plot_paths:
        lines += ["## Plots", "",
                  "One bar chart per table block (the table's rows and labels, best NDCG@20 first) and t-SNE maps of "
                  "saved query embeddings. Each PNG carries a digest of what it shows and is redrawn only when that "
                  "changes, so regenerating on another machine leaves the committed figures as they are "
                  "(`narbench leaderboard --redraw` draws them all anew).", ""]
        for p in sorted(plot_paths, key=lambda p: p.name):
            lines += [f"![{p.stem}]({p.relative_to(out_dir).as_posix()})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
