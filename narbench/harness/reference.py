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

A band cannot be loosened by hand: each must be what its recorded derivation gives,
`max(floor, factor * spread)` (`expected_band`), with narbench's `FACTOR`, its `FLOOR` for a trained
encoder and 0 for a training-free one, and a spread in [0, 1] (metrics are in [0, 1]); a v1
tolerance must be below 1. A reference with a band of 1e9, or a factor of 1e9, is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from narbench.core import safeio

VERSION = 2
READABLE = (1, 2)
#: v1 references without a `tolerance` of their own
DEFAULT_TOLERANCE = 1e-6
#: band = max(FLOOR, FACTOR * spread) for trained encoders. FACTOR 3: the measured spread is a sample of the
#: environments that exist (an Intel MKL host, another torch patch release); FLOOR 1e-5: the thread-count
#: noise seen on one host (docs/gate.md), for metrics that every measured environment gave identically.
FACTOR = 3.0
FLOOR = 1e-5
#: a recorded band may differ from its derivation by float formatting only
_BAND_RTOL = 1e-9


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
    if version == 1 and "tolerance" in data and not (finite(data["tolerance"]) and 0 <= data["tolerance"] < 1):
        raise bad(f"tolerance {data['tolerance']!r} must be a finite number >= 0 and below 1 (at 1 every metric "
                  "in [0, 1] passes)")
    if version == 2:
        bands = data.get("bands")
        if not isinstance(bands, dict) or not isinstance(bands.get("environments"), list):
            raise bad("'bands' must say which environments the bands were measured in ('environments': [...])")
        for name, rule in (("factor", FACTOR), ("floor", FLOOR)):
            if not (finite(bands.get(name)) and bands[name] >= 0):
                raise bad(f"bands.{name} {bands.get(name)!r} must be a finite number >= 0")
            if bands[name] != rule:
                raise bad(f"bands.{name} is {bands[name]!r}, not narbench's rule ({name} {rule!r})")
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
            problem = derivation_problem(entry)
            if problem:
                raise bad(f"entry {key!r} {problem}")
    return data


def expected_band(derivation: Mapping[str, Any], metric: str) -> float:
    """What a derivation gives for `metric`: max(floor, factor * spread), the spread being the larger of the
    one measured now and the one carried over from environments measured before."""
    carried = (derivation.get("carried") or {}).get("spread") or {}
    spread = max(float(derivation["spread"][metric]), float(carried.get(metric, 0.0)))
    return max(float(derivation["floor"]), float(derivation["factor"]) * spread)


def derivation_problem(entry: Mapping[str, Any]) -> str | None:
    """Why an entry's bands are not what its derivation gives (the end of a sentence), or None."""
    der = entry["derivation"]
    trained = der.get("trained")
    if not isinstance(trained, bool):
        return "does not say whether its encoder trains (derivation.trained)"
    rule = {"factor": FACTOR, "floor": FLOOR if trained else 0.0}
    for name, value in rule.items():
        if der.get(name) != value:
            return (f"derivation.{name} is {der.get(name)!r}; narbench's rule gives {value!r} for a "
                    f"{'trained' if trained else 'training-free'} encoder")
    carried = (der.get("carried") or {}).get("spread") or {}
    spreads = [der.get("spread") or {}, carried]
    if not isinstance(spreads[0], dict) or not isinstance(carried, dict):
        return "has a derivation.spread that is not an object of metric -> spread"
    for metric, band in entry["band"].items():
        if metric not in spreads[0]:
            return f"has no measured spread for {metric} (derivation.spread)"
        for where, values in zip(("spread", "carried.spread"), spreads):
            value = values.get(metric, 0.0)
            if not (finite(value) and 0 <= value <= 1):
                return f"derivation.{where} of {metric!r} is {value!r}, not a spread of a metric in [0, 1]"
        want = expected_band(der, metric)
        if not math.isclose(float(band), want, rel_tol=_BAND_RTOL, abs_tol=0.0):
            return (f"band of {metric!r} is {band!r} but its derivation gives {want!r} (max(floor, factor x spread)): "
                    "a band is measured, never set by hand")
    return None


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a reference file (`GateError` in one line otherwise)."""
    path = Path(path)
    try:
        text = safeio.read_file(path, "gate reference").decode("utf-8")
    except safeio.RefusedFileError as exc:
        raise GateError(f"reference file {exc}") from None
    except FileNotFoundError:
        raise GateError(f"reference file {path} does not exist: the gate compares with a committed reference "
                        "(narbench's is leaderboard/reference.json in its repository); check the path, or restore "
                        "the file from version control") from None
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
    try:
        atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())
    except OSError as exc:
        raise GateError(f"cannot write the reference file {path}: {exc.strerror or exc}; it was left as it was") from None


def write_v1(path: str | Path, entries: Mapping[str, Any], tolerance: float) -> None:
    """A version-1 reference (one tolerance): what the pytest plugin keeps for a third party."""
    write(path, {"version": 1, "tolerance": tolerance, "entries": dict(entries)})


def check_writable(path: str | Path, what: str = "reference file") -> None:
    """`path` can be written as a file (its folder exists or can be made, and this process may write there);
    `GateError` in one line otherwise, before any run."""
    from narbench.harness.preflight import PreflightError, check_output

    path = Path(path)
    if path.is_dir():
        raise GateError(f"{what} {path} is a folder; give the name of a file to write")
    try:
        check_output(path.parent, what=f"{what} {path}: folder")
    except PreflightError as exc:
        raise GateError(str(exc)) from None


def check_derivations(reference: Mapping[str, Any], encoders: Iterable[str]) -> None:
    """`GateError` when an entry of one of `encoders` records its encoder as trained while it is training-free
    (or the reverse): its band would come from the wrong rule (a floor instead of 0, exact)."""
    from narbench.core import registry

    wanted = set(encoders)
    for key, entry in (reference.get("entries") or {}).items():
        der = entry.get("derivation")
        parts = key.split("/")
        if not isinstance(der, dict) or len(parts) != 3 or parts[1] not in wanted:
            continue
        trains = bool(getattr(registry.load("encoder", parts[1]), "trainable", True))
        if der.get("trained") is not trains:
            raise GateError(f"reference entry {key!r} is derived as a{' trained' if der.get('trained') else ' training-free'}"
                            f" encoder's, but {parts[1]} is {'trained' if trains else 'training-free'}: its bands "
                            "follow the wrong rule")
