"""Result files: one JSON per run with the metrics and everything needed to reproduce them.

Written atomically (temp file + rename), so an interrupted run never leaves half a result.
Per-query scores go to a gzip sidecar (`<run_id>.queries.json.gz`) for significance tests.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import subprocess
import sys
from dataclasses import MISSING, asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from narbench.core import safeio
from narbench.data.store import atomic_write_bytes

SCHEMA_VERSION = 2
#: the per-query sidecar of `<run_id>.json`: `<run_id>.queries.json.gz`
SIDECAR_SUFFIX = ".queries.json.gz"
#: Schema-1 files (before protocols) trained eq. 5 on the family and the classifier on
#: `config.encoder.ce_label`; `RunResult.read` names their protocol from that.
MIXED_PROTOCOL = "schema1-mixed"
_PACKAGES = ("narbench", "torch", "torch_geometric", "ranx", "numpy", "scikit-learn", "pandas", "zstandard")


@dataclass
class RunResult:
    """Everything one `narbench run` measured, and how."""

    run_id: str
    encoder: str
    splitter: str
    dataset: dict[str, Any]
    profile: str
    seed: int
    config: dict[str, Any]
    metrics: dict[str, float]
    metrics_extra: dict[str, float]
    timings: dict[str, float]
    device: str
    num_queries: int
    num_corpus: int
    num_train: int
    environment: dict[str, Any] = field(default_factory=dict)
    git_commit: str | None = None
    created: str = ""
    split: str = "standard"
    protocol: str = "family"
    schema: int = SCHEMA_VERSION
    #: `narbench.harness.confighash`: what makes two runs the same run (None in files written before it)
    config_hash: str | None = None
    #: the split's named query subsets (`Split.subsets`): name -> {"queries": n, "positions": [index into the per-query scores], "metrics": {metric: mean}}
    subsets: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, out_dir: str | Path, per_query: dict[str, np.ndarray] | None = None) -> Path:
        """Write `<out_dir>/<run_id>.json` (and the per-query sidecar) atomically."""
        out_dir = Path(out_dir)
        path = out_dir / f"{self.run_id}.json"
        if per_query is not None:
            sidecar = {name: [round(float(v), 6) for v in vals] for name, vals in per_query.items()}
            data = gzip.compress(json.dumps(sidecar, sort_keys=True).encode(), mtime=0)
            atomic_write_bytes(out_dir / f"{self.run_id}{SIDECAR_SUFFIX}", data)
        atomic_write_bytes(path, (json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n").encode())
        return path

    @classmethod
    def read(cls, path: str | Path) -> "RunResult":
        """Load a result file; a malformed one raises ValueError naming the file."""
        path = Path(path)
        try:
            # the first bytes decide before the rest is read, and the size is capped (`safeio.LIMITS`)
            raw = json.loads(safeio.read_file(path, "result", (b"{",), lstrip=True).decode("utf-8"))
            if not isinstance(raw, dict):
                raise ValueError(f"{path}: not a valid narbench result file (a JSON {type(raw).__name__}, "
                                 "not an object)")
            if not {"run_id", "schema"} & set(raw):  # say nothing of another JSON file's keys
                raise ValueError(f"{path}: not a valid narbench result file (neither a run_id nor a schema)")
            if raw.get("schema") == 1:
                raw = _from_schema1(raw)
            _check_field_names(path, raw)
            return cls(**raw)
        except safeio.RefusedFileError as exc:
            reason = exc.reason if exc.reason.startswith("not a") else f"not a valid narbench result file ({exc.reason})"
            raise ValueError(f"{path}: {reason}") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a valid narbench result file (not UTF-8 text)") from None
        except (json.JSONDecodeError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: not a valid narbench result file ({exc})") from exc


def _check_field_names(path: Path, raw: dict[str, Any]) -> None:
    """A top-level field RunResult does not have (a newer narbench's, a typo) or a required one missing:
    ValueError naming the file, the field and this narbench's schema version."""
    known = {f.name: f for f in fields(RunResult)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        schema = raw.get("schema")
        newer = (f"; the file says schema {schema!r}, written by a newer narbench?"
                 if isinstance(schema, int) and schema > SCHEMA_VERSION else "")
        raise ValueError(f"{path}: field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                         f"{'are' if len(unknown) > 1 else 'is'} unknown to this narbench's result schema "
                         f"(schema version {SCHEMA_VERSION}){newer}")
    missing = [name for name, f in known.items() if name not in raw
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise ValueError(f"{path}: not a valid narbench result file (missing field{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)})")


def _from_schema1(raw: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 result as schema 2: the standard split, and the protocol its labels were.

    Schema 1 had one split and no protocol: eq. 5 on the family, the classifier head on
    `config.encoder.ce_label`. A run with no training (e.g. `random`) saw no labels.
    """
    cfg = raw.get("config") or {}
    trained = bool(cfg.get("training_history"))
    ce = (cfg.get("encoder") or {}).get("ce_label", "coarse")
    protocol = "family" if (ce == "family" or not trained) else MIXED_PROTOCOL
    labels = {"cl": "family", "ce": ce} if trained else None
    return {**raw, "config": {**cfg, "labels": cfg.get("labels", labels)}, "split": "standard", "protocol": protocol}


def write_embeddings(path: str | Path, embeddings: Any, family: list[str], coarse: list[str]) -> Path:
    """Write query embeddings (float16) and their family / coarse labels to an `.npz`, atomically."""
    import io

    emb = embeddings.detach().cpu().numpy() if hasattr(embeddings, "detach") else np.asarray(embeddings)
    buf = io.BytesIO()
    np.savez_compressed(buf, embeddings=emb.astype(np.float16), family=np.array(family, dtype=str),
                        coarse=np.array(coarse, dtype=str))
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def environment() -> dict[str, Any]:
    """Python, platform and package versions of this process."""
    import torch

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "cuda": torch.version.cuda,
        "torch_threads": torch.get_num_threads(),
        "cpu": cpu_info(),
    }


def cpu_info() -> dict[str, str | None]:
    """The CPU model and the instruction set torch's kernels dispatch to (`AVX512`, `AVX2`, ...).

    Two hosts of one cloud type can differ here, and then float results differ in the last digits
    (a re-run on another host matched a committed `real` 1.0 result to 3e-4, one on the same host
    type bit for bit), so a result says which it ran on.
    """
    import torch

    model = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # older torch
        capability = None
    return {"model": model, "capability": capability}


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The commit of the narbench checkout (with `-dirty` when it has changes), if any.

    `$NARBENCH_GIT_COMMIT` overrides it, for runs from an installed wheel on another machine.
    """
    if os.environ.get("NARBENCH_GIT_COMMIT"):
        return os.environ["NARBENCH_GIT_COMMIT"]
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None
