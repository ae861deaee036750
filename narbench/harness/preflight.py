"""Checks before a run: everything that can fail without training fails first, in a second.

`narbench.run` calls `check` before it loads data or trains: the output folder can be written
(names the file system accepts, write permission, free space for what the run writes), the
narbench cache can be written, the `--init-from` checkpoint is one of the right encoder, the
device exists here, and the dataset's data is present. A run that passes can still fail at the
end (a disk filled by someone else meanwhile), and then the runner keeps the metrics it
computed (`runner.ResultWriteError`).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path

#: the `--device` values narbench accepts, as the error message lists them
DEVICES = "auto (CUDA when available, else the CPU), cpu, cuda, or cuda:N for the N-th GPU"


class PreflightError(ValueError):
    """A run that cannot succeed, found before anything was loaded or trained (the message says why)."""


#: Upper bounds of what one run writes into its output folder, in bytes (measured on the shipped
#: profiles: a result file and its per-query sidecar under 1 MB, a quick run's weights 0.7 MB and
#: embeddings 0.6 MB; paper-profile models are larger). Checked against the free space before a run.
OUTPUT_BYTES = {"result": 8 << 20, "weights": 256 << 20, "embeddings": 64 << 20}


def output_bytes(*, save_weights: bool = False, save_embeddings: bool = False) -> int:
    """The free space a run needs in its output folder (an upper bound, `OUTPUT_BYTES`)."""
    return (OUTPUT_BYTES["result"] + OUTPUT_BYTES["weights"] * bool(save_weights)
            + OUTPUT_BYTES["embeddings"] * bool(save_embeddings))


def check_output(out: str | os.PathLike, *, need_bytes: int = 0, what: str = "output folder") -> None:
    """`out` is (or can be created as) a folder this process can write in, with `need_bytes` free.

    Names too long for the file system, a file in the way, no write permission, a read-only
    file system, and too little free space all raise `PreflightError` with one line.
    """
    path = Path(out)
    existing = _existing_ancestor(path, what)
    name_max = _name_max(existing)
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            shown = part if len(part) <= 40 else f"{part[:20]}...{part[-12:]}"
            raise PreflightError(f"{what} {shown!r}: a name of {len(os.fsencode(part))} bytes; the file system "
                                 f"allows {name_max}")
    if existing != path and not existing.is_dir():
        raise PreflightError(f"{what} {out}: {existing} is a file, not a folder")
    if existing == path and not path.is_dir():
        raise PreflightError(f"{what} {out} is a file, not a folder")
    try:  # an actual write: permissions, read-only file systems and quotas all show here
        fd, probe = tempfile.mkstemp(prefix=".narbench-write-check-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise PreflightError(f"{what} {out}: cannot write in {existing} ({exc.strerror or exc})") from None
    if need_bytes:
        free = shutil.disk_usage(existing).free
        if free < need_bytes:
            raise PreflightError(f"{what} {out}: {free / 2**20:.1f} MiB free on its file system; this run "
                                 f"writes up to {need_bytes / 2**20:.0f} MiB there")


def check_output_file(path: str | os.PathLike, *, what: str = "output file") -> None:
    """`path` can be written as a file: not a folder, in a folder that exists and this process can write
    in. Unlike an output folder (made with its parents), the folder of an output file is not made: a
    typo in it is refused in one line (`PreflightError`) instead of becoming a tree of new folders."""
    path = Path(path)
    if path.is_dir():
        raise PreflightError(f"{what} {path} is a folder; give the name of a file to write")
    if not path.parent.exists() and _existing_ancestor(path.parent, what).is_dir():
        raise PreflightError(f"{what} {path}: folder {path.parent} does not exist (create it first)")
    check_output(path.parent, what=f"{what} {path}: folder")


def check_cache() -> None:
    """The narbench cache ($NARBENCH_CACHE, default ~/.cache/narbench) can be written: datasets are
    generated, graphs split and kernels compiled into it."""
    from narbench.core.cache import cache_dir

    path = cache_dir()
    try:
        check_output(path, what="narbench cache (NARBENCH_CACHE)")
    except PreflightError as exc:
        raise PreflightError(f"{exc}; set NARBENCH_CACHE to a folder you can write in") from None


def _existing_ancestor(path: Path, what: str) -> Path:
    """`path` or its nearest ancestor that exists."""
    existing = path
    while True:
        try:
            if existing.exists() or existing == existing.parent:
                return existing
        except OSError as exc:  # ENAMETOOLONG and the like: the lengths are checked next
            if exc.errno not in (errno.ENAMETOOLONG, errno.EACCES):
                raise PreflightError(f"{what} {path}: {exc.strerror or exc}") from None
        existing = existing.parent


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder if folder.is_dir() else folder.parent, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


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
    from narbench.core import registry

    registry.load("dataset", name)().check_available()


def check(cfg, *, dataset_given: bool = False) -> None:
    """All checks for a `RunConfig`: output folder (when `cfg.out`), cache, device, checkpoint, dataset.

    `dataset_given`: the caller passes the data in memory, so `cfg.dataset` is not looked up.
    Raises `PreflightError`, `checkpoint.CheckpointError`, `registry.UnknownNameError` or the
    provider's FileNotFoundError, each with a one-line message.
    """
    from narbench.train import checkpoint

    if cfg.out:
        check_output(cfg.out, need_bytes=output_bytes(save_weights=cfg.save_weights,
                                                      save_embeddings=cfg.save_embeddings))
    if not dataset_given:
        check_cache()
    check_device(cfg.device)
    if cfg.init_from:
        checkpoint.check(cfg.init_from, cfg.encoder)
    if not dataset_given:
        check_dataset(cfg.dataset)
