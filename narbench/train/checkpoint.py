"""Trained weights: save them next to a result, and start a run from them (Table 4 transfer).

A checkpoint holds the encoder's name, its state dict and the op vocabulary it was trained
on. Loading into an encoder for another dataset copies every tensor whose name and shape
match; op-embedding rows are copied by op *name* where both vocabularies have the op, so a
model pre-trained on `nas` keeps its message-passing layers on `real` while the op embedding
and the classifier head (other ops, other classes) start fresh.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import torch

from narbench.core import safeio
from narbench.data.store import atomic_write_bytes

SUFFIX = ".pt"


class CheckpointError(ValueError):
    """A checkpoint that cannot be found, read or used for the requested encoder."""


def save(path: str | Path, encoder: torch.nn.Module, name: str, vocab: list[str], run_id: str) -> Path:
    """Write the encoder's weights atomically; returns the path."""
    buf = io.BytesIO()
    state = {k: v.detach().cpu() for k, v in encoder.state_dict().items()}
    torch.save({"encoder": name, "vocab": list(vocab), "run_id": run_id, "state_dict": state}, buf)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


EXPECTED = ("expected the `<run_id>.pt` that `narbench run --save-weights` writes, "
            "or the result `.json` of such a run")


def describe_file(path: Path) -> str:
    """What a file that is not a checkpoint is, in a few words (for error messages)."""
    if path.is_dir():
        return "a folder"
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if not head:
        return "an empty file"
    for magic, what in ((b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "gzip-compressed data"),
                        (b"\x28\xb5\x2f\xfd", "zstd-compressed data (a narbench dataset file?)"),
                        (b"\x89PNG", "a PNG image"), (b"\x93NUMPY", "a NumPy array")):
        if head.startswith(magic):
            return what
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path.stat().st_size:,} bytes of binary data"
    return "a JSON file" if text.lstrip().startswith(("{", "[")) else "a text file"


def resolve(path: str | Path) -> Path:
    """A checkpoint path from a `.pt` file or a result `.json` (its sibling `<run_id>.pt`).

    Raises `CheckpointError` saying what the file is when it is neither.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint; {EXPECTED}")
    if path.suffix == ".json":
        try:  # the first bytes and the size checked before the rest is read (`safeio`)
            run_id = json.loads(safeio.read_file(path, "result", (b"{",), lstrip=True))["run_id"]
            if not isinstance(run_id, str) or not run_id or Path(run_id).name != run_id or run_id in (".", ".."):
                raise ValueError("run_id is not a file name")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise CheckpointError(f"{path} is {describe_file(path)}, not a narbench result file; {EXPECTED}") from None
        path = path.with_name(run_id + SUFFIX)
        if not path.is_file():
            raise CheckpointError(f"{path}: the run saved no weights (run it with --save-weights)")
    return path


def read(source: str | Path, name: str | None = None) -> tuple[Path, dict[str, Any]]:
    """(path, contents) of the checkpoint `source` names (see `resolve`), of encoder `name` if given.

    `CheckpointError` says what the file is when it is not a narbench checkpoint, or whose it is.
    """
    path = resolve(source)
    try:  # a zip of stored entries within the cap (`safeio.check_zip`), then tensors and plain values only
        safeio.check_zip(path, "checkpoint")
    except safeio.RefusedFileError as exc:
        what = f": {exc.reason}" if exc.reason.startswith("refused") else \
            f" is {describe_file(path)}, not a checkpoint torch can read"
        raise CheckpointError(f"{path}{what}; {EXPECTED}") from None
    try:
        with warnings.catch_warnings():  # torch warns about the "pickle protocol" of any non-torch file first
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # torch raises several types for a file that is not its own
        raise CheckpointError(f"{path} is {describe_file(path)}, not a checkpoint torch can read; {EXPECTED}") from None
    if not _well_formed(ckpt):
        raise CheckpointError(f"{path} is a torch file but not a narbench checkpoint (no encoder name, vocabulary "
                              f"and weights); {EXPECTED}")
    if name is not None and ckpt["encoder"] != name:
        raise CheckpointError(f"{path}: weights of encoder {ckpt['encoder']!r}, not {name!r}")
    return path, ckpt


def _well_formed(ckpt: Any) -> bool:
    """An encoder name, a vocabulary of op names and a state dict of tensors (what `save` writes)."""
    return (isinstance(ckpt, dict) and isinstance(ckpt.get("encoder"), str)
            and isinstance(ckpt.get("vocab"), list) and all(isinstance(op, str) for op in ckpt["vocab"])
            and isinstance(ckpt.get("state_dict"), dict)
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in ckpt["state_dict"].items()))


def check(source: str | Path, name: str) -> Path:
    """Check before a run that `source` is a readable checkpoint of encoder `name`; returns its path."""
    return read(source, name)[0]


def load_into(encoder: torch.nn.Module, name: str, vocab: list[str], source: str | Path) -> dict[str, Any]:
    """Initialise `encoder` from a checkpoint; returns what was copied (recorded in the result)."""
    path, ckpt = read(source, name)
    src_state, src_vocab = ckpt["state_dict"], ckpt["vocab"]
    target = encoder.state_dict()
    embeddings = {f"{n}.weight" for n, m in encoder.named_modules() if isinstance(m, torch.nn.Embedding)}
    src_index = {op: i for i, op in enumerate(src_vocab)}
    shared = [(i, src_index[op]) for i, op in enumerate(vocab) if op in src_index]
    copied, by_name, skipped = [], [], []
    for key, value in target.items():
        src = src_state.get(key)
        if src is None or src.shape[1:] != value.shape[1:]:
            skipped.append(key)
        elif key in embeddings and list(src_vocab) != list(vocab):
            for dst_row, src_row in shared:  # op-embedding rows, matched by op name
                target[key][dst_row] = src[src_row]
            by_name.append(key)
        elif src.shape == value.shape:
            target[key] = src.clone()
            copied.append(key)
        else:
            skipped.append(key)
    encoder.load_state_dict(target)
    return {"path": str(path), "run_id": ckpt.get("run_id"), "copied": len(copied), "by_op_name": by_name,
            "shared_ops": len(shared), "skipped": skipped}
