"""Progress that reads well both on a terminal and in a log.

On a terminal: rich's live `Progress` bars. Elsewhere (a log file, a pipe, a batch job) a live
bar can only be drawn once, when it ends, so `LogProgress` prints one plain line each time a task
crosses another `step` percent instead: `train  30%  354/1180  epoch 2/5 loss 2.1043  0:00:41`.
Both take the same calls (`add_task`, `update`), so code that reports progress does not care.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

#: percent between two lines of a `LogProgress`
STEP = 10


@contextlib.contextmanager
def progress_bars(console, *, disable: bool = False, step: int = STEP) -> Iterator:
    """A rich `Progress` on a terminal, a `LogProgress` elsewhere; nothing shown when `disable`."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    if console.is_terminal or disable:
        prog = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=console, disable=disable, transient=False,
        )
        with prog:
            yield prog
    else:
        yield LogProgress(console, step=step)


@dataclass
class _Task:
    description: str
    total: float | None
    fields: dict = field(default_factory=dict)
    completed: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    printed: int = -1  # the last percent step printed


class LogProgress:
    """`add_task` / `update` like rich's `Progress`; one line per `step` percent of each task."""

    def __init__(self, console, *, step: int = STEP) -> None:
        self.console, self.step = console, max(1, int(step))
        self.tasks: dict[int, _Task] = {}

    def add_task(self, description: str, total: float | None = 100.0, **fields) -> int:
        task_id = len(self.tasks)
        self.tasks[task_id] = _Task(description, total, {"info": "", **fields})
        return task_id

    def update(self, task_id: int, *, advance: float | None = None, completed: float | None = None,
               total: float | None = None, description: str | None = None, **fields) -> None:
        task = self.tasks[task_id]
        if total is not None:
            task.total = total
        if description is not None:
            task.description = description
        if completed is not None:
            task.completed = completed
        if advance is not None:
            task.completed += advance
        task.fields.update(fields)
        if not task.total:
            return
        reached = int(min(100.0, 100.0 * task.completed / task.total)) // self.step
        if reached > task.printed and (reached > 0 or task.printed < 0):
            task.printed = reached
            self._line(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def _line(self, task: _Task) -> None:
        from rich.markup import escape

        elapsed = time.perf_counter() - task.started
        pct = 100.0 * task.completed / task.total if task.total else 0.0
        info = str(task.fields.get("info") or "")
        text = (f"{task.description}  {pct:3.0f}%  {task.completed:,.0f}/{task.total:,.0f}"
                + (f"  {info}" if info else "") + f"  {int(elapsed) // 60}:{int(elapsed) % 60:02d}")
        self.console.print(escape(text), soft_wrap=True, highlight=False)
