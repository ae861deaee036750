"""Where a training epoch's time goes: each step's phases timed, on the host and with CUDA events.

`Trainer.step_times = StepTimes(device)` makes `Trainer.fit` time every step's phases (`PHASES`):
building the batch, the forward pass with the loss, the backward pass, the optimiser (zeroing,
the gradients' all-reduce under torchrun, the step) and syncs (reading a value back to the host).
Host seconds come from `time.perf_counter`; on CUDA each phase also records a pair of events, so
the GPU's own time per phase is read once per epoch (`end_epoch`, one synchronisation). Off (the
default, `OFF`) it costs one attribute look-up per phase. `benchmarks/speed/breakdown.py` prints
the table.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

#: the phases of one training step, in the order a step runs them
PHASES = ("batch", "forward", "backward", "optimiser", "sync")


@dataclass
class EpochTimes:
    """One epoch: wall seconds, host seconds per phase, device seconds per phase (CUDA only)."""

    wall: float
    host: dict[str, float]
    device: dict[str, float] = field(default_factory=dict)
    steps: int = 0


class StepTimes:
    """Accumulates per-phase times of the current epoch; `epochs` keeps every finished one."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.cuda = torch.device(device).type == "cuda"
        self.epochs: list[EpochTimes] = []
        self._start_epoch()

    def _start_epoch(self) -> None:
        self._host = dict.fromkeys(PHASES, 0.0)
        self._events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._steps = 0
        self._t0 = time.perf_counter()

    def begin_epoch(self) -> None:
        """Start timing an epoch (drops anything timed since the last `end_epoch`)."""
        if self.cuda:
            torch.cuda.synchronize()
        self._start_epoch()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase `name`."""
        start = end = None
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t = time.perf_counter()
        try:
            yield
        finally:
            self._host[name] += time.perf_counter() - t
            if self.cuda:
                end.record()
                self._events.append((name, start, end))

    def step_done(self) -> None:
        self._steps += 1

    def end_epoch(self) -> EpochTimes:
        """Close the epoch (on CUDA: one synchronisation, then the events are read)."""
        device: dict[str, float] = {}
        if self.cuda:
            torch.cuda.synchronize()
            device = dict.fromkeys(PHASES, 0.0)
            for name, start, end in self._events:
                device[name] += start.elapsed_time(end) / 1e3
        times = EpochTimes(time.perf_counter() - self._t0, dict(self._host), device, self._steps)
        self.epochs.append(times)
        self._start_epoch()
        return times


class _Off:
    """Timing switched off: every method does nothing."""

    cuda = False
    _null = contextlib.nullcontext()

    def phase(self, name: str) -> contextlib.nullcontext:
        return self._null

    def begin_epoch(self) -> None:
        pass

    def step_done(self) -> None:
        pass

    def end_epoch(self) -> None:
        return None


#: what `Trainer.fit` times with when no `StepTimes` is set
OFF = _Off()
