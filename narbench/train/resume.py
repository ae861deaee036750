"""Epoch snapshots: a killed training run goes on from its last finished epoch.

A run may be killed before it ends: a session's or a Slurm job's time limit, preemption, the
kernel's OOM killer. After every epoch `Trainer.fit` writes what decides the rest of the
stage: the model's and the optimiser's state, the shuffling generator, the global random
generators (dropout) and the losses so far. Run again, it loads the snapshot and trains the
remaining epochs, so the result is bit for bit the one an uninterrupted run gives on the same
machine (a test checks it). A snapshot is keyed by the run's configuration (the caller's `key`);
one that cannot be read is reported, set aside (renamed `.corrupt`) and the stage starts over.

A snapshot holds tensors and plain values only (the numpy and Python generators' states are
stored as a tensor, ints and floats), so it is read with `torch.load(weights_only=True)`: a file
planted in `--out` cannot run code. Its zip entries are checked first (stored, within
`safeio.LIMITS["snapshot"]`). It is written through a temp file of its own (two runs of one
configuration into one `--out` never share one) and renamed; a full disk stops the run with one
line (`narbench.core.cache.DiskFullError`), the previous snapshot kept.

Not snapshotted: stages with a per-epoch callback (`on_epoch`, e.g. the stage-1 health probe of
`ours`, whose records would be lost) and distributed runs; they restart from their beginning,
which gives the same state, so a later stage can still resume.
"""

from __future__ import annotations

import copy
import io
import os
import random
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from narbench.core import safeio
from narbench.core.cache import DiskFullError, WriteError, no_space
from narbench.data.store import atomic_write_bytes

#: bump when a snapshot's fields change: older snapshots are then set aside, not loaded
#: (2: the numpy and Python generator states as plain values, read with weights_only=True)
FORMAT = 2


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


def plain_random_state(state: dict[str, Any]) -> dict[str, Any]:
    """`random_state()` as tensors, ints, floats and lists only (what `torch.load(weights_only=True)`
    reads): numpy's legacy tuple and Python's `random.getstate()` tuple taken apart, exactly."""
    name, keys, pos, has_gauss, cached = state["numpy_rng"]
    version, internal, gauss_next = state["python_rng"]
    return {**state, "numpy_rng": {"bit_generator": str(name), "keys": torch.from_numpy(keys.astype(np.int64)),
                                   "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
            "python_rng": {"version": int(version), "internal": [int(x) for x in internal],
                           "gauss_next": None if gauss_next is None else float(gauss_next)}}


def unplain_random_state(state: dict[str, Any]) -> dict[str, Any]:
    """Inverse of `plain_random_state`: what `set_random_state` takes."""
    np_rng, py_rng = state["numpy_rng"], state["python_rng"]
    return {**state, "numpy_rng": (np_rng["bit_generator"], np_rng["keys"].numpy().astype(np.uint32), np_rng["pos"],
                                   np_rng["has_gauss"], np_rng["cached_gaussian"]),
            "python_rng": (py_rng["version"], tuple(py_rng["internal"]), py_rng["gauss_next"])}


def _plain(value: Any) -> Any:
    """`value` with numpy scalars and arrays as Python numbers and lists (a per-epoch record may hold them)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    return value


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
        leaves the previous snapshot). A write that fails (a full disk: `DiskFullError`) raises a
        one-line `WriteError` naming the snapshot; no temp file stays."""
        state = {
            "format": FORMAT, "key": self.key, "stage": stage, "epochs_done": epochs_done,
            "model": model.state_dict(), "optimizer": opt.state_dict(),
            "generator": generator.get_state() if generator is not None else None,
            **plain_random_state(random_state()),
            "losses": [float(x) for x in losses], "evals": _plain(list(evals or [])),
            "provenance": _plain(dict(self.provenance)),
        }
        path = self.path(index, stage)
        buf = io.BytesIO()
        torch.save(state, buf)
        try:  # a temp file of its own beside `path`, synced, then renamed (`atomic_write_bytes`)
            for attempt in (1, 2):  # twice: another run of this configuration may just have cleared the folder
                self.folder.mkdir(parents=True, exist_ok=True)
                try:
                    atomic_write_bytes(path, buf.getbuffer())
                    break
                except FileNotFoundError:
                    if attempt == 2:
                        raise
        except OSError as exc:
            note = (f"the run stopped after epoch {epochs_done} of stage {stage!r}, the snapshot before it kept; "
                    "run the same command again to go on from there")
            raise (DiskFullError if no_space(exc) else WriteError)(path, exc, note) from exc
        return path

    def load(self, index: int, stage: str) -> dict[str, Any] | None:
        """The snapshot of stage `index`, or None (none written; unreadable or another run's: warned
        about and set aside). Read with `weights_only=True`: tensors and plain values, never code."""
        path = self.path(index, stage)
        if not path.exists():
            return None
        try:
            state = _read(path)
            if not isinstance(state, dict) or state.get("format") != FORMAT:
                raise ValueError(f"not a format-{FORMAT} snapshot")
            if state.get("key") != self.key or state.get("stage") != stage:
                raise ValueError(f"written by another run (key {str(state.get('key'))[:80]!r}, "
                                 f"stage {str(state.get('stage'))[:80]!r})")
            _check_state(state)
        except Exception as exc:  # a truncated or foreign file: say so, keep it, start over
            self._set_aside(path, stage, str(exc))
            return None
        state["index"] = index
        return state

    def _set_aside(self, path: Path, stage: str, reason: str) -> None:
        aside = path.with_suffix(".corrupt")
        os.replace(path, aside)
        warnings.warn(f"cannot resume from {path}: {reason}; it was moved to {aside.name} and stage "
                      f"{stage!r} starts from its first epoch", SnapshotWarning, stacklevel=4)

    def restore(self, state: dict[str, Any], model: torch.nn.Module, opt: torch.optim.Optimizer,
                generator: torch.Generator | None) -> None:
        """Put the model, optimiser and random generators back as `state` saved them.

        A snapshot that does not fit the model or the optimiser (the code changed under the same
        configuration key) is set aside as an unreadable one is: the model and the optimiser are put
        back as they were and `state` is emptied (no loss, no epoch done), so the stage starts over."""
        model_before = {k: v.detach().clone() for k, v in model.state_dict().items()}
        opt_before = copy.deepcopy(opt.state_dict())
        try:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
        except Exception as exc:  # noqa: BLE001 - torch's messages span lines: only the kind is said
            model.load_state_dict(model_before)
            opt.load_state_dict(opt_before)
            self._set_aside(self.path(state["index"], state["stage"]), state["stage"],
                            f"it does not fit this run's model or optimiser ({type(exc).__name__})")
            state.update(losses=[], evals=[], epochs_done=0)
            return
        if generator is not None and state["generator"] is not None:
            generator.set_state(state["generator"])
        set_random_state(unplain_random_state(state))
        self.resumed.append({"stage": state["stage"], "epochs_done": state["epochs_done"],
                             "written_by": state.get("provenance", {})})

    def clear(self) -> None:
        """Remove the run's snapshots (its result is written: nothing is left to resume)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        try:  # and the snapshots folder when no other run's are left in it
            self.folder.parent.rmdir()
        except OSError:
            pass


def _read(path: Path) -> Any:
    """A snapshot's contents: its zip entries checked, then `torch.load(weights_only=True)`;
    ValueError with one line (never torch's advice to load it unsafely) when it cannot be read."""
    try:
        safeio.check_zip(path, "snapshot")
    except safeio.RefusedFileError as exc:
        raise ValueError(exc.reason) from None
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a file that is not its own
        raise ValueError(f"not a narbench snapshot that loads with weights_only=True ({type(exc).__name__}: "
                         "truncated, or it holds more than tensors and plain values)") from None


def _check_state(state: dict[str, Any]) -> None:
    """ValueError unless a snapshot's fields have their types and its random states are ones the
    generators take (tried on scratch generators): nothing is set from a snapshot that fails here."""
    kinds = {"epochs_done": int, "model": dict, "optimizer": dict, "losses": list, "evals": list,
             "torch_rng": torch.Tensor, "numpy_rng": dict, "python_rng": dict, "provenance": dict}
    wrong = [key for key, kind in kinds.items() if not isinstance(state.get(key), kind)]
    if wrong:
        raise ValueError(f"a snapshot without a valid {', '.join(wrong)}")
    try:
        rng = unplain_random_state(state)
        np.random.RandomState().set_state(rng["numpy_rng"])
        random.Random().setstate(rng["python_rng"])
        torch.Generator().set_state(state["torch_rng"])
        if state.get("generator") is not None:
            torch.Generator().set_state(state["generator"])
    except Exception as exc:  # noqa: BLE001 - any of them refused: the snapshot is not one of ours
        raise ValueError(f"a snapshot with random states the generators refuse ({type(exc).__name__})") from None
