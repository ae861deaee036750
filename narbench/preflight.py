"""Checks before a run: everything that can fail without training fails first, in a second.

`narbench.run` calls `check` before it loads data or trains: the output folder can be written,
the `--init-from` checkpoint is one of the right encoder, the device exists here, and the
dataset's data is present. A run that passes can still fail at the end (a disk that fills up),
and then the runner keeps the metrics it computed (`runner.ResultWriteError`).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

#: the `--device` values narbench accepts, as the error message lists them
DEVICES = "auto (CUDA when available, else the CPU), cpu, cuda, or cuda:N for the N-th GPU"


class PreflightError(ValueError):
    """A run that cannot succeed, found before anything was loaded or trained (the message says why)."""


def check_output(out: str | os.PathLike) -> None:
    """The output folder `out` is (or can be created as) a folder this process can write in."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise PreflightError(f"output folder {out} is a file, not a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise PreflightError(f"output folder {out}: {existing} is a file, not a folder")
    try:  # an actual write: permissions, read-only file systems and quotas all show here
        fd, probe = tempfile.mkstemp(prefix=".narbench-write-check-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise PreflightError(f"output folder {out}: cannot write in {existing} ({exc.strerror or exc})") from None


def check_device(device: str) -> None:
    """`device` is one narbench runs on and exists on this machine."""
    m = re.fullmatch(r"auto|cpu|cuda(?::(\d+))?", device)
    if m is None:
        raise PreflightError(f"unknown device {device!r}; narbench runs on {DEVICES}")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise PreflightError(f"device {device!r}: CUDA is not available on this machine; use cpu or auto")
        if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
            raise PreflightError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                                 f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")


def check_dataset(name: str) -> None:
    """The registered dataset `name` can be loaded here (`DatasetProvider.check_available`)."""
    from narbench import registry

    registry.load("dataset", name)().check_available()


def check(cfg, *, dataset_given: bool = False) -> None:
    """All checks for a `RunConfig`: output folder (when `cfg.out`), device, checkpoint, dataset.

    `dataset_given`: the caller passes the data in memory, so `cfg.dataset` is not looked up.
    Raises `PreflightError`, `checkpoint.CheckpointError`, `registry.UnknownNameError` or the
    provider's FileNotFoundError, each with a one-line message.
    """
    from narbench import checkpoint

    if cfg.out:
        check_output(cfg.out)
    check_device(cfg.device)
    if cfg.init_from:
        checkpoint.check(cfg.init_from, cfg.encoder)
    if not dataset_given:
        check_dataset(cfg.dataset)
