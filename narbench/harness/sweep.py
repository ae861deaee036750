"""`narbench sweep`: a grid of runs as one resumable command, on any launcher.

A grid (`narbench.harness.grid`: a TOML file, or one block given on the command line) expands to
runs (`narbench.harness.sweepplan`). Every run has a configuration hash
(`narbench.harness.confighash`); a run whose hash matches a result file already in the output folder
(or another `--results` folder) is skipped, so an interrupted sweep re-run does only what is missing.
This module schedules the rest on a launcher (`narbench.harness.launchers`); a failed run is reported
with its log and the others go on. Runs that start from another run's weights (Table 4: `init_from`)
wait for that run. Sweeps started together on one output folder share its runs: each run is claimed
when it starts (`narbench.harness.claims.Claim`, under `<out>/.sweep/claims/`), and a sweep that finds
a run claimed by a live process skips it and reports it as running elsewhere.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from narbench.eval.result import RunResult
from narbench.harness.confighash import result_hash
from narbench.harness.launchers import Launcher, Outcome
from narbench.harness.sweepplan import WORK_DIR, Plan, PlannedRun, task_of, weights_of


@dataclass
class SweepReport:
    """How a sweep ended: runs skipped (already done), finished, failed (with logs), blocked, and left
    to another process (a sweep on the same folder) that runs them, with who and why."""

    skipped: list[PlannedRun] = field(default_factory=list)
    finished: list[Outcome] = field(default_factory=list)
    failed: list[Outcome] = field(default_factory=list)
    blocked: list[tuple[PlannedRun, str]] = field(default_factory=list)
    elsewhere: list[tuple[PlannedRun, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.blocked


def _eta(seconds: list[float], left: int, running: int, parallel: int) -> str:
    if not seconds or not (left or running):
        return "-"
    mean = sum(seconds) / len(seconds)
    eta = mean * (left + running / 2) / max(1, parallel)
    return time.strftime("%H:%M:%S", time.gmtime(eta)) if eta < 86400 else f"{eta / 3600:.0f} h"


def _started(handle: Any) -> bool:
    """Whether a handle's run has started (a launcher that cannot tell counts it as started)."""
    started = getattr(handle, "started", None)
    return True if started is None else bool(started())


class _Schedule:
    """One sweep while it runs: the runs waiting, running and done, what goes to the launcher when, and
    the progress view over them."""

    def __init__(self, plan: Plan, launcher: Launcher, report: SweepReport, work: Path, threads: int | None,
                 parallel: int, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.launcher, self.report, self.work, self.threads, self.parallel = launcher, report, work, threads, parallel
        self.skipped = len(report.skipped)  # done before the sweep; runs another sweep finishes meanwhile join them
        self.away: set[str] = set()  # hashes of the runs another process runs
        self.results: dict[str, list[Path]] = {h: list(p) for h, p in plan.known.items()}
        self.waiting = [r for r in plan.runs if not r.done]
        self.running: dict[str, tuple[PlannedRun, Any]] = {}
        self.seconds: list[float] = []
        self.total = len(self.waiting)
        self.progress = Progress(TextColumn("[bold]sweep[/bold]"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("done {task.fields[done]} · running {task.fields[running]} · "
                                            "[red]failed {task.fields[failed]}[/red] · left {task.fields[left]} · "
                                            "ETA {task.fields[eta]}"), TimeElapsedColumn(), console=console,
                                 disable=not self.total)
        self.bar = self.progress.add_task("sweep", total=self.total, done=0, running=0, failed=0, left=self.total,
                                          eta="-")

    def update(self) -> None:
        """Redraw the progress view from the runs' states."""
        report = self.report
        finished = (len(report.finished) + len(report.failed) + len(report.blocked) + len(report.elsewhere)
                    + len(report.skipped) - self.skipped)
        started = sum(_started(handle) for _, handle in self.running.values())
        left = len(self.waiting) + len(self.running) - started
        self.progress.update(self.bar, completed=finished, done=len(report.finished), running=started,
                             failed=len(report.failed) + len(report.blocked), left=left,
                             eta=_eta(self.seconds, left, started, self.parallel))

    def ready(self, run: PlannedRun, launching: list[PlannedRun]) -> PlannedRun | None | str:
        """The run ready to launch (init_from resolved), None to wait, or why it cannot run."""
        if run.source is None:
            return run
        if run.source in self.running or any(r.hash == run.source for r in (*self.waiting, *launching)):
            return None
        source = weights_of(self.results.get(run.source, []))
        if source is None:
            return (f"the run it starts from ({run.source}) failed, or its result has no saved weights "
                    f"(re-run it with --save-weights)")
        return PlannedRun(run.name, run.block, replace(run.cfg, init_from=str(source)), run.hash, run.source)

    def launch(self) -> None:
        """Submit every waiting run that is ready; report those that are blocked or wait on another sweep."""
        launch = []
        for run in list(self.waiting):
            if run.source in self.away:  # its source runs in another sweep, which runs it after
                self.waiting.remove(run)
                self.away.add(run.hash)
                self.report.elsewhere.append((run, f"starts from run {run.source}, which runs elsewhere"))
                continue
            r = self.ready(run, launch)
            if r is None:
                continue
            self.waiting.remove(run)
            if isinstance(r, str):
                self.report.blocked.append((run, r))
                self.progress.console.print(f"[red]blocked[/red] {run.name}: {escape(r)}", highlight=False)
            else:
                launch.append(r)
        for run, handle in zip(launch, self.launcher.submit([task_of(r, self.work, self.threads) for r in launch])):
            self.running[run.hash] = (run, handle)

    def collect(self) -> None:
        """Take the outcome of every run that ended."""
        for h, (run, handle) in list(self.running.items()):
            if not handle.done():
                continue
            del self.running[h]
            self._record(h, run, handle.outcome())

    def _record(self, h: str, run: PlannedRun, out: Outcome) -> None:
        """File one run's outcome: done (here or elsewhere), running elsewhere, or failed."""
        report, console = self.report, self.progress.console
        if out.elsewhere == "running":
            self.away.add(h)
            report.elsewhere.append((run, out.error))
            console.print(f"[yellow]running elsewhere[/yellow] {run.name}: {escape(out.error)}", highlight=False)
            return
        got = result_hash(RunResult.read(Path(out.result))) if out.ok else None
        if out.ok and got != h:  # not the planned run: counting it done would hide a missing cell
            out = replace(out, returncode=1, error=f"its result {out.result} has configuration hash {got}, "
                          f"not the planned {h}: the run did not get the grid's configuration")
        if out.ok and out.elsewhere == "done":
            self.results.setdefault(h, []).append(Path(out.result))
            report.skipped.append(run)
            console.print(f"[green]done elsewhere[/green] {run.name}", highlight=False)
        elif out.ok:
            self.results.setdefault(h, []).append(Path(out.result))
            self.seconds.append(out.seconds)
            report.finished.append(out)
            console.print(f"[green]done[/green] {run.name} in {out.seconds:.0f} s", highlight=False)
        else:
            report.failed.append(out)
            console.print(f"[red]failed[/red] {run.name} (exit {out.returncode}); log: {out.log}\n"
                          f"[dim]{escape(out.error)}[/dim]", highlight=False)


def run_sweep(plan: Plan, launcher: Launcher, *, threads: int | None = None, parallel: int = 1,
              console: Console | None = None, poll: float = 0.5) -> SweepReport:
    """Run every run of `plan` not done yet on `launcher`; one progress view on `console` (stderr).

    A failed run is reported (its log file and last lines) and does not stop the others; a run
    whose `init_from` source failed, or was done without saving weights, is reported as blocked.
    Ctrl-C (KeyboardInterrupt) stops the launcher's runs (nothing half-written stays) and re-raises.
    """
    console = console or Console(stderr=True)
    t0 = time.perf_counter()
    work = plan.out / WORK_DIR
    plan.out.mkdir(parents=True, exist_ok=True)
    report = SweepReport(skipped=[r for r in plan.runs if r.done])
    sweep = _Schedule(plan, launcher, report, work, threads, parallel, console)
    console.print(f"{len(plan.runs)} runs in the grid: {len(report.skipped)} done already, {sweep.total} to run "
                  f"on {launcher.name}; logs in {work / 'logs'}", highlight=False, soft_wrap=True)
    try:
        with sweep.progress:
            while sweep.waiting or sweep.running:
                sweep.launch()
                sweep.update()
                sweep.collect()
                sweep.update()
                if sweep.running:
                    time.sleep(poll)
    except KeyboardInterrupt:
        stopped = sum(_started(handle) and not handle.done() for _, handle in sweep.running.values())
        launcher.shutdown(cancel=True)
        report.seconds = time.perf_counter() - t0
        console.print(f"interrupted: {len(report.finished)} runs finished and kept, {stopped} stopped (no result of "
                      f"them written, their finished training epochs kept); run the same command again to resume", highlight=False, soft_wrap=True)
        raise
    launcher.shutdown()
    report.seconds = time.perf_counter() - t0
    return report

def render_report(report: SweepReport, console: Console) -> None:
    """The sweep's summary: counts, wall time, each failed run with its log, each run left to another process."""
    console.print(f"sweep: {len(report.finished)} runs finished, {len(report.skipped)} skipped (done already), "
                  f"{len(report.failed)} failed, {len(report.blocked)} blocked, {len(report.elsewhere)} running "
                  f"elsewhere; wall time {report.seconds:.0f} s", soft_wrap=True, highlight=False)
    for out in report.failed:
        console.print(f"  [red]failed[/red] {out.name}: log {out.log}", highlight=False)
    for run, why in report.blocked:
        console.print(f"  [red]blocked[/red] {run.name}: {escape(why)}", highlight=False)
    for run, who in report.elsewhere:
        console.print(f"  [yellow]running elsewhere[/yellow] {run.name}: {escape(who)}", highlight=False,
                      soft_wrap=True)
    if report.elsewhere:
        console.print("  (another sweep on this folder runs them: run this one again once it ends to see them done)",
                      highlight=False, soft_wrap=True)


__all__ = ["SweepReport", "render_report", "run_sweep"]
