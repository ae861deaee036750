"""Epoch snapshots: a killed training run goes on from its last finished epoch.

A run may be killed before it ends: a session's or a Slurm job's time limit, preemption, the
kernel's OOM killer. After every epoch `Trainer.fit` writes what decides the rest of the
stage: the model's and the optimiser's state, the shuffling generator, the global random
generators (dropout) and the losses so far. Run again, it loads the snapshot and trains the
remaining epochs, so the result is bit for bit the one an uninterrupted run gives on the same
machine (a test checks it). A snapshot is keyed by the run's configuration (the caller's `key`);
one that cannot be read is reported, set aside (renamed `.corrupt`) and the stage starts over.

Not snapshotted: stages with a per-epoch callback (`on_epoch`, e.g. the stage-1 health probe of
`ours`, whose records would be lost) and distributed runs; they restart from their beginning,
which gives the same state, so a later stage can still resume.
"""

from __future__ import annotations

import os
import random
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: bump when a snapshot's fields change: older snapshots are then set aside, not loaded
FORMAT = 1


class SnapshotWarning(UserWarning):
    """A snapshot could not be used (unreadable, another run's); training starts the stage over."""


def random_state() -> dict[str, Any]:
    """The global random generators' state (torch, CUDA, numpy, python): what dropout and shuffling draw from."""
    return {"torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "numpy_rng": np.random.get_state(), "python_rng": random.getstate()}


def set_random_state(state: dict[str, Any]) -> None:
    """Put the global random generators back as `random_state` (or a snapshot) recorded them."""
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])


@dataclass
class Snapshots:
    """Epoch snapshots of one run in `folder` (one file per training stage).

    `key` names the run's configuration: a snapshot written under another key is never loaded.
    `provenance` (commit, host, ...) is stored with each snapshot and reported when it is
    resumed, so a result says which code trained which epochs. `resumed` collects, per resumed
    stage, where it went on from.
    """

    folder: Path
    key: str
    provenance: dict[str, Any] = field(default_factory=dict)
    resumed: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.folder = Path(self.folder)

    def path(self, index: int, stage: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stage)
        return self.folder / f"stage{index}-{safe}.pt"

    def save(self, index: int, stage: str, epochs_done: int, model: torch.nn.Module, opt: torch.optim.Optimizer,
             generator: torch.Generator | None, losses: list[float], evals: list[dict] | None = None) -> Path:
        """Write the state after `epochs_done` epochs of stage `index` (atomically: a kill mid-write
        leaves the previous snapshot)."""
        state = {
            "format": FORMAT, "key": self.key, "stage": stage, "epochs_done": epochs_done,
            "model": model.state_dict(), "optimizer": opt.state_dict(),
            "generator": generator.get_state() if generator is not None else None, **random_state(),
            "losses": list(losses), "evals": list(evals or []), "provenance": dict(self.provenance),
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(index, stage)
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    def load(self, index: int, stage: str) -> dict[str, Any] | None:
        """The snapshot of stage `index`, or None (none written; unreadable or another run's: warned
        about and set aside)."""
        path = self.path(index, stage)
        if not path.exists():
            return None
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
            if not isinstance(state, dict) or state.get("format") != FORMAT:
                raise ValueError(f"not a format-{FORMAT} snapshot")
            if state.get("key") != self.key or state.get("stage") != stage:
                raise ValueError(f"written by another run (key {state.get('key')!r}, stage {state.get('stage')!r})")
        except Exception as exc:  # a truncated or foreign file: say so, keep it, start over
            aside = path.with_suffix(".corrupt")
            os.replace(path, aside)
            warnings.warn(f"cannot resume from {path}: {exc}; it was moved to {aside.name} and stage "
                          f"{stage!r} starts from its first epoch", SnapshotWarning, stacklevel=3)
            return None
        return state

    def restore(self, state: dict[str, Any], model: torch.nn.Module, opt: torch.optim.Optimizer,
                generator: torch.Generator | None) -> None:
        """Put the model, optimiser and random generators back as `state` saved them."""
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        if generator is not None and state["generator"] is not None:
            generator.set_state(state["generator"])
        set_random_state(state)
        self.resumed.append({"stage": state["stage"], "epochs_done": state["epochs_done"],
                             "written_by": state.get("provenance", {})})

    def clear(self) -> None:
        """Remove the run's snapshots (its result is written: nothing is left to resume)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        try:  # and the snapshots folder when no other run's are left in it
            self.folder.parent.rmdir()
        except OSError:
            pass
