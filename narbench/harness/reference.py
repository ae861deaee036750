"""The gate's reference file: its schema, and reading it only when every number in it is usable.

Version 2 (what `narbench check --update` writes):

    {"version": 2,
     "bands": {"rule": "...", "factor": 3.0, "floor": 1e-05,
               "environments": [{"name": ..., "torch": ..., "build": ..., "isa": ..., "threads": ..., "cpu": ...}]},
     "entries": {"nas/gcn/none": {"metrics": {"mrr@20": ..., ...},      # one run, this environment
                                  "band": {"mrr@20": ..., ...},         # drop allowed per metric
                                  "derivation": {...},                  # how the band was derived
                                  "config": {...}}}}

Version 1 (one `tolerance` for every metric; what the pytest plugin writes for a third party's
encoder) is read too. A reference that would switch the gate off without saying so (a NaN
number, a negative band, an entry without metrics or bands) is refused with one line naming the
problem (`GateError`): the CLI exits 2 and compares nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

VERSION = 2
READABLE = (1, 2)
#: v1 references without a `tolerance` of their own
DEFAULT_TOLERANCE = 1e-6


class GateError(RuntimeError):
    """The gate cannot run at all (no reference file, unreadable or invalid reference, bad options)."""


def finite(value: Any) -> bool:
    """A real number (not a bool, not a string) that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate(data: Any, where: str = "reference") -> dict[str, Any]:
    """`data` when it is a usable reference, else `GateError` with the first problem found."""
    def bad(problem: str) -> GateError:
        return GateError(f"{where} is not a usable narbench reference: {problem}")

    if not isinstance(data, dict):
        raise bad(f"expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version not in READABLE:
        raise bad(f"version {version!r}; this narbench reads versions {', '.join(map(str, READABLE))}")
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise bad("'entries' must be an object of <dataset>/<encoder>/<splitter> keys")
    if version == 1 and "tolerance" in data and not (finite(data["tolerance"]) and data["tolerance"] >= 0):
        raise bad(f"tolerance {data['tolerance']!r} must be a finite number >= 0")
    if version == 2:
        bands = data.get("bands")
        if not isinstance(bands, dict) or not isinstance(bands.get("environments"), list):
            raise bad("'bands' must say which environments the bands were measured in ('environments': [...])")
        for name in ("factor", "floor"):
            if not (finite(bands.get(name)) and bands[name] >= 0):
                raise bad(f"bands.{name} {bands.get(name)!r} must be a finite number >= 0")
    for key, entry in entries.items():
        if not isinstance(entry, dict):
            raise bad(f"entry {key!r} must be an object")
        metrics = entry.get("metrics")
        if not isinstance(metrics, dict) or not metrics:
            raise bad(f"entry {key!r} has no metrics")
        for metric, value in metrics.items():
            if not finite(value):
                raise bad(f"entry {key!r} metric {metric!r} is {value!r}, not a finite number")
        if version == 2:
            band = entry.get("band")
            if not isinstance(band, dict):
                raise bad(f"entry {key!r} has no band")
            missing = sorted(set(metrics) - set(band))
            if missing:
                raise bad(f"entry {key!r} has no band for {', '.join(missing)}")
            for metric, value in band.items():
                if not (finite(value) and value >= 0):
                    raise bad(f"entry {key!r} band of {metric!r} is {value!r}, not a finite number >= 0")
            if not isinstance(entry.get("derivation"), dict):
                raise bad(f"entry {key!r} does not say how its band was derived ('derivation')")
    return data


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a reference file (`GateError` in one line otherwise)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GateError(f"reference file {path} does not exist; create it with `narbench check --update`") from None
    except UnicodeDecodeError:
        raise GateError(f"reference file {path} is not text (binary content); expected narbench reference JSON") from None
    except OSError as exc:
        raise GateError(f"reference file {path} is unreadable: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GateError(f"reference file {path} is not valid JSON: {exc}") from None
    return validate(data, f"reference file {path}")


def bands_of(data: Mapping[str, Any], key: str, tolerance: float | None = None) -> dict[str, float]:
    """The drop allowed per metric of entry `key`: `tolerance` for every metric when given, else
    the entry's bands (v2) or the file's tolerance (v1)."""
    entry = data["entries"][key]
    if tolerance is not None:
        return {m: float(tolerance) for m in entry["metrics"]}
    if data.get("version") == 1:
        return {m: float(data.get("tolerance", DEFAULT_TOLERANCE)) for m in entry["metrics"]}
    return {m: float(v) for m, v in entry["band"].items()}


def write(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write a reference atomically (temp file + rename), entries sorted, after validating it."""
    from narbench.data.store import atomic_write_bytes

    data = {**data, "entries": {k: data["entries"][k] for k in sorted(data["entries"])}}
    validate(data, f"the reference about to be written to {path}")
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def write_v1(path: str | Path, entries: Mapping[str, Any], tolerance: float) -> None:
    """A version-1 reference (one tolerance): what the pytest plugin keeps for a third party."""
    write(path, {"version": 1, "tolerance": tolerance, "entries": dict(entries)})
