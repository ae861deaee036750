"""What the benchmark scripts share: the checkout's root, timing a call, the one-line figure and the report.

Every script runs as a module from the checkout's root (`python -m benchmarks.speed.bench`), so
`narbench`, `tests` and `benchmarks` import from the checkout with no path set by hand. A figure
prints as one line `name key=value ...` (`line`); a value passed as a string prints as given, so a
script keeps its own number format.
"""

from __future__ import annotations

import importlib
import resource
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

#: the checkout's root (the folder holding benchmarks/, narbench/, examples/ and tests/)
ROOT = Path(__file__).resolve().parents[1]


def study_parser(doc: str):
    """The argument parser of a study script (its docstring's first line as description): `--dataset` (default
    `real`) and `--out` (a folder for results.json, `report`); a script adds its own options."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--dataset", default="real")
    parser.add_argument("--out", type=Path, default=None, help="write results.json into this folder")
    return parser


def line(name: str, **fields) -> None:
    """Print one figure line: `name key=value ...` (floats with 4 significant digits, strings as given)."""
    parts = [name]
    for k, v in fields.items():
        if isinstance(v, float):
            v = f"{v:.4g}"
        parts.append(f"{k}={v}")
    print(" ".join(parts), flush=True)


def report(data: dict, out: Path | None) -> None:
    """Print a script's report as JSON and, when `out` is a folder, write it there as `results.json`."""
    import json

    text = json.dumps(data, indent=1)
    print(text)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(text + "\n")


def timed(fn, repeats: int = 1) -> tuple[float, object]:
    """(best wall seconds over `repeats` calls of fn(), the last call's result)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def cpu_timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result): on a shared machine the CPU time
    of a one-process figure says what the wall time would be on an idle core."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def warm_times(fn, repeat: int) -> list[float]:
    """Wall seconds of `repeat` calls of fn() after one untimed (warm-up) call, sorted."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)


def run_timed(cmd: list[str], **kwargs) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its children) of `subprocess.run(cmd, check=True, ...)`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, **kwargs)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (ru_maxrss), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10)


def example(name: str) -> ModuleType:
    """The module examples/<name>.py (the hand-written models the benchmarks search and extract)."""
    folder = str(ROOT / "examples")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)
