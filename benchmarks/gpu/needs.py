"""Which packages narbench declares that this Python lacks (issue 62): run by install.sh on a lent GPU machine
after narbench is installed with `--no-deps`, so a missing one (zstandard, 2026-11-30) stops the lease before its
first run instead of failing every run. Prints what to carry and exits 1 when something is missing."""

from __future__ import annotations

import importlib.metadata as md
import sys

from packaging.requirements import Requirement


def missing(requirements: list[str]) -> list[str]:
    """The names of `requirements` (PEP 508 strings) that apply here (markers, no extras) and are not installed."""
    out = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            md.version(req.name)
        except md.PackageNotFoundError:
            out.append(req.name)
    return out


def main() -> int:
    lacking = missing(md.requires("narbench") or [])
    if lacking:
        print(f"narbench needs {', '.join(lacking)}, which this machine lacks: carry their wheels "
              "(bash benchmarks/gpu/wheels.sh)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
