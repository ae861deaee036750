"""The build's per-spec result files: one small zstd-compressed JSON per model spec.

Each extracted (or failed) spec is recorded in `<out>/results/<slug>.json.zst` as soon as it is
done, so an interrupted build resumes where it stopped. A damaged file reads as missing (redone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from narbench.core import safeio
from narbench.data.store import atomic_write_bytes
from narbench.zoo.spec import Spec

RESULT_SUFFIX = ".json.zst"
OK, NOT_APPLICABLE, FAILED = "ok", "not-applicable", "failed"


def result_path(out_dir: Path, spec: Spec) -> Path:
    return out_dir / "results" / f"{spec.slug}{RESULT_SUFFIX}"


def write_result(out_dir: Path, spec: Spec, result: dict[str, Any]) -> None:
    import zstandard

    payload = json.dumps({"key": spec.key, "spec": spec.to_json(), **result}, sort_keys=True).encode()
    atomic_write_bytes(result_path(out_dir, spec), zstandard.ZstdCompressor(level=3).compress(payload))


def read_result(out_dir: Path, spec: Spec) -> dict[str, Any] | None:
    """The recorded result of `spec`, or None: none yet, or one that is damaged, not a zstd frame, or
    over its cap once decompressed (`safeio.LIMITS["zoo result"]`, checked before and while it
    decompresses): the spec is then redone."""
    path = result_path(out_dir, spec)
    if not path.is_file():
        return None
    try:
        data = safeio.read_file(path, "zoo result", (safeio.ZSTD_MAGIC,))
        return json.loads(safeio.zstd_decompress(data, path, "zoo result"))
    except Exception:  # noqa: BLE001 - a damaged result is redone
        return None
