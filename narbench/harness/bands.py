"""Bands: how far a gate metric may move for unchanged code, measured across environments.

Trained encoders' metrics differ across machines by float noise (kernel ISA, thread count, torch
release, CPU or CUDA wheel): `narbench check` on an AVX2 host against a reference written on an
AVX512 host moved gin's metrics by up to 7e-4. The gate allows, per (dataset, encoder, metric),

    band = max(floor, factor * spread)        (training-free encoders: factor * spread, i.e. 0 when exact)

where `spread` is max - min of the metric over the environments measured. A *measurement* is one
gate run in one environment, written by `narbench check --record FILE`; `narbench check --update`
derives the bands from its own run, the variants this machine can simulate (other kernel ISAs via
`ATEN_CPU_CAPABILITY`; run here in subprocesses) and any `--spread FILE` measurements from other
installs (torch releases, CUDA wheels, other hosts). The gate pins its thread count on every host,
so bands come from runs at that count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from narbench.core import safeio
from narbench.harness.reference import FACTOR, FLOOR, GateError, finite

#: FACTOR and FLOOR (`narbench.harness.reference`, which refuses a reference whose bands follow another rule):
#: band = max(FLOOR, FACTOR * spread) for trained encoders
RULE = ("band = max(floor, factor * spread) for trained encoders, factor * spread for training-free ones "
        "(0: exact); spread = max - min of the metric over the environments measured")
MEASUREMENT_KIND = "narbench-gate-measurement"
#: kernel sets `ATEN_CPU_CAPABILITY` can select, from the most basic; a CPU runs those up to its own
ISAS = ("default", "avx2", "avx512")
CAPABILITY_VARIABLE = "ATEN_CPU_CAPABILITY"


@dataclass(frozen=True)
class Environment:
    """What decides a trained encoder's float noise: torch release and build, kernel ISA, threads."""

    torch: str
    build: str  # "cpu" or "cuda" (the wheel, not the device: the gate always runs on the CPU)
    isa: str  # torch's kernel set: DEFAULT, AVX2, AVX512
    threads: int
    cpu: str | None = None

    @classmethod
    def current(cls, threads: int) -> Environment:
        import torch

        from narbench.eval.result import cpu_info

        build = "cuda" if torch.version.cuda else "cpu"
        return cls(torch.__version__.split("+")[0], build, torch.backends.cpu.get_cpu_capability(), int(threads),
                   cpu_info().get("model"))

    @property
    def name(self) -> str:
        return f"torch {self.torch} {self.build}, {self.isa}, {self.threads} threads" + (f", {self.cpu}" if self.cpu else "")

    def same_kind(self, other: Mapping[str, Any]) -> bool:
        """Same torch minor release, build, ISA and thread count as a recorded environment."""
        minor = ".".join(self.torch.split(".")[:2])
        return (".".join(str(other.get("torch", "")).split(".")[:2]) == minor and other.get("build") == self.build
                and str(other.get("isa", "")).upper() == self.isa.upper() and other.get("threads") == self.threads)


def outside(current: Environment, measured: Sequence[Mapping[str, Any]]) -> bool:
    """True when no measured environment is of the current one's kind: the bands may not cover it."""
    return not any(current.same_kind(env) for env in measured)


# -- measurements ------------------------------------------------------------------------------------
def measurement(entries: Mapping[str, Any], env: Environment) -> dict[str, Any]:
    """One gate run's metrics in one environment, in the `--record` file format."""
    return {"kind": MEASUREMENT_KIND, "environment": asdict(env),
            "entries": {k: {"metrics": dict(v["metrics"]), "config": v.get("config", {})} for k, v in entries.items()}}


def write_measurement(path: str | Path, data: Mapping[str, Any]) -> None:
    from narbench.data.store import atomic_write_bytes

    try:
        atomic_write_bytes(path, (json.dumps(data, indent=1) + "\n").encode())
    except OSError as exc:
        raise GateError(f"cannot write the measurement file {path}: {exc.strerror or exc}") from None


def read_measurement(path: str | Path) -> dict[str, Any]:
    """A `--record` file (`GateError` in one line when it is not one)."""
    path = Path(path)
    try:
        data = json.loads(safeio.read_file(path, "gate reference").decode("utf-8"))
    except safeio.RefusedFileError as exc:
        raise GateError(f"measurement file {exc}") from None
    except FileNotFoundError:
        raise GateError(f"measurement file {path} does not exist (write one with `narbench check --record FILE`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GateError(f"measurement file {path} is unreadable: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != MEASUREMENT_KIND or not isinstance(data.get("entries"), dict) \
            or not isinstance(data.get("environment"), dict):
        raise GateError(f"measurement file {path} is not a `narbench check --record` file")
    for key, entry in data["entries"].items():
        metrics = entry.get("metrics") if isinstance(entry, dict) else None
        if not isinstance(metrics, dict) or not all(finite(v) for v in metrics.values()):
            raise GateError(f"measurement file {path}: entry {key!r} has no finite metrics")
    return data


def local_variants(threads: int) -> list[tuple[str, int]]:
    """(ATEN_CPU_CAPABILITY, threads) pairs this machine can run besides its own setting: every other
    kernel ISA its CPU supports, at `threads`. Not other thread counts: the gate pins its threads
    (`GATE_THREADS`) on every host, so their noise (measured: docs/gate.md) never reaches a verdict.

    Its own setting honours `ATEN_CPU_CAPABILITY` (`default` here simulates a CPU without AVX2); what the
    CPU supports does not (`hardware_isa`), so a user who set it still gets the other kernel sets measured."""
    import torch

    own = torch.backends.cpu.get_cpu_capability().lower()
    top = hardware_isa()
    supported = ISAS[: ISAS.index(top) + 1] if top in ISAS else ("default",)
    return [(isa, threads) for isa in supported if isa != own]


def hardware_isa() -> str:
    """The kernel set torch picks on this CPU when `ATEN_CPU_CAPABILITY` is not set (lower case). torch
    reports the variable's value when it is set (even one the CPU lacks), so then a child without it is asked."""
    import torch

    if not os.environ.get(CAPABILITY_VARIABLE):
        return torch.backends.cpu.get_cpu_capability().lower()
    env = {k: v for k, v in os.environ.items() if k != CAPABILITY_VARIABLE}
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    try:
        proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return "default"
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip().lower() if proc.returncode == 0 and lines else "default"


def measure(isa: str, threads: int, encoders: Iterable[str] | None, datasets: Iterable[str] | None, path: Path,
            python: str | None = None) -> dict[str, Any]:
    """Run the gate in a subprocess under kernel set `isa` with `threads` threads; its measurement.
    `encoders` / `datasets` as `narbench check` takes them (comma-separated names; None: all)."""
    # the same import path as this process (plugins put on sys.path at run time included)
    path_env = os.pathsep.join(p for p in sys.path if p) if python is None else os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": isa, "NARBENCH_NO_PROGRESS": "1", "PYTHONPATH": path_env}
    cmd = [python or sys.executable, "-m", "narbench.cli", "check", "--record", str(path), "--threads", str(threads),
           "--no-compare"]
    for flag, names in (("--encoders", encoders), ("--datasets", datasets)):
        if names:
            cmd += [flag, ",".join(names)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise GateError(f"measuring under ATEN_CPU_CAPABILITY={isa}, {threads} threads failed: {tail[0]}")
    return read_measurement(path)


# -- derivation -------------------------------------------------------------------------------------------
def derive(entries: Mapping[str, Any], env: Environment, measurements: Sequence[Mapping[str, Any]],
           trained: Mapping[str, bool], previous: Mapping[str, Any] | None = None,
           factor: float = FACTOR, floor: float = FLOOR) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Reference entries (this run's metrics, a band per metric, its derivation) and the environments used.

    `entries` are this run's (reference format); `measurements` other environments' runs of the same
    code; `trained[key]` whether the entry's encoder trains (training-free ones get no floor).
    `previous` is the old reference: where an entry's old derivation measured environments not
    measured now (another torch release, another host), their spread is carried over, named.
    """
    envs = [{"name": env.name, **asdict(env)}] + [{"name": Environment(**m["environment"]).name, **m["environment"]}
                                                  for m in measurements]
    out: dict[str, Any] = {}
    for key, entry in entries.items():
        values = {m: [float(v)] for m, v in entry["metrics"].items()}
        names = [envs[0]["name"]]
        for meas, menv in zip(measurements, envs[1:]):
            other = meas["entries"].get(key)
            if other is None:
                continue
            names.append(menv["name"])
            for m, v in other["metrics"].items():
                if m in values:
                    values[m].append(float(v))
        spread = {m: max(vs) - min(vs) for m, vs in values.items()}
        carried: dict[str, Any] = {}
        old = ((previous or {}).get("entries") or {}).get(key) or {}
        old_der = old.get("derivation") or {}
        old_names = [n for n in old_der.get("environments", []) + old_der.get("carried", {}).get("environments", [])
                     if n not in names]
        if old_names:
            old_spread = {**(old_der.get("carried", {}).get("spread") or {})}
            for m, s in (old_der.get("spread") or {}).items():
                old_spread[m] = max(float(s), float(old_spread.get(m, 0.0)))
            carried = {"environments": sorted(set(old_names)), "spread": {m: old_spread.get(m, 0.0) for m in spread}}
        low = floor if trained.get(key, True) else 0.0
        band = {m: max(low, factor * max(spread[m], float(carried.get("spread", {}).get(m, 0.0)))) for m in spread}
        derivation = {"trained": bool(trained.get(key, True)), "factor": factor, "floor": low, "environments": names,
                      "spread": spread}
        if carried:
            derivation["carried"] = carried
        out[key] = {"metrics": dict(entry["metrics"]), "band": band, "derivation": derivation,
                    "config": entry.get("config", {})}
    return out, envs


def measured_environments(previous: Mapping[str, Any] | None, envs: Sequence[Mapping[str, Any]],
                          entries: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reference's environment list after an update: the new ones, then old ones still carried,
    each only where some entry's derivation names it (measured or carried)."""
    used = {n for e in entries.values() for n in
            e["derivation"]["environments"] + e["derivation"].get("carried", {}).get("environments", [])}
    seen = {e["name"] for e in envs}
    old = [e for e in ((previous or {}).get("bands") or {}).get("environments", []) if e.get("name") not in seen]
    return [dict(e) for e in [*envs, *old] if e.get("name") in used]
