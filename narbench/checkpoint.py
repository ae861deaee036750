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
from pathlib import Path
from typing import Any

import torch

from narbench.store import atomic_write_bytes

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


def resolve(path: str | Path) -> Path:
    """A checkpoint path from a `.pt` file or a result `.json` (its sibling `<run_id>.pt`)."""
    path = Path(path)
    if path.suffix == ".json":
        try:
            run_id = json.loads(path.read_text())["run_id"]
        except (OSError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{path}: not a readable narbench result file ({exc})") from exc
        path = path.with_name(run_id + SUFFIX)
        if not path.is_file():
            raise CheckpointError(f"{path}: the run saved no weights (run it with --save-weights)")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    return path


def load_into(encoder: torch.nn.Module, name: str, vocab: list[str], source: str | Path) -> dict[str, Any]:
    """Initialise `encoder` from a checkpoint; returns what was copied (recorded in the result)."""
    path = resolve(source)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged file
        raise CheckpointError(f"{path}: cannot read the checkpoint ({exc})") from exc
    if ckpt.get("encoder") != name:
        raise CheckpointError(f"{path}: weights of encoder {ckpt.get('encoder')!r}, not {name!r}")
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
