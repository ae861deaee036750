"""Where numba caches compiled code (ranx's metrics, the motif splitter's kernels).

Both use `@njit(cache=True)`: compiled once, then loaded from disk by later processes. numba
caches next to the sources (`__pycache__`) when that directory is writable. `setup_numba_cache()`
(called before numba is first imported) sets `NUMBA_CACHE_DIR=<narbench cache>/numba` when it is
not (a read-only install), so the compilation is still paid once per machine, not once per run.
An explicit `NUMBA_CACHE_DIR` is left alone.

The first run on a machine compiles every kernel it uses (36-97 s on a 2-core CPU) before its
first progress bar: `announce_first_compile` says so in one line when a kernel's cache index
(`*.nbi`) is missing, so that the pause does not look like a hang.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

_PACKAGES = ("ranx", "narbench", "narbench.splitters")


def setup_numba_cache() -> None:
    if "NUMBA_CACHE_DIR" in os.environ or "numba" in sys.modules:
        return
    for name in _PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
        if origin is not None and not os.access(origin, os.W_OK):
            from narbench.core.cache import cache_dir

            os.environ["NUMBA_CACHE_DIR"] = str(cache_dir() / "numba")
            return


#: the numba kernels a run compiles: (package, subfolder, module stems). ranx's metrics serve
#: every run; the graph-part kernels and the motif splitter's serve runs with a splitter.
METRIC_KERNELS = (("ranx", "metrics", ("reciprocal_rank", "average_precision", "ndcg")),)
SPLIT_KERNELS = (("narbench.train", "", ("_parts_kernels",)),
                 ("narbench.splitters", "", ("_motif_windows", "_motif_phases", "_motif_segments",
                                         "_motif_sequence")))
FIRST_COMPILE = "compiling numba kernels, once per machine (about 1 min); later runs load them from disk"


def modules_of(splits: bool) -> tuple:
    """The kernels of a run: the metrics', and the splitters' when it `splits` graphs."""
    return METRIC_KERNELS + (SPLIT_KERNELS if splits else ())


def uncompiled(kernels=METRIC_KERNELS + SPLIT_KERNELS) -> list[str]:
    """The kernel modules with no numba cache index yet (neither beside the source nor under
    `NUMBA_CACHE_DIR`), as `package.module` names; found without importing numba or them."""
    setup_numba_cache()
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    missing = []
    for package, sub, stems in kernels:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0]) / sub
        for stem in stems:
            if not (folder / f"{stem}.py").is_file():
                continue
            pattern = f"{stem}.*.nbi"
            if any((folder / "__pycache__").glob(pattern)):
                continue
            if user_dir and any(Path(user_dir).rglob(pattern)):
                continue
            missing.append(f"{package}.{sub + '.' if sub else ''}{stem}")
    return missing


def announce_first_compile(console, kernels=METRIC_KERNELS + SPLIT_KERNELS) -> bool:
    """Print `FIRST_COMPILE` on `console` when a kernel of `kernels` will be compiled; True if so."""
    if not uncompiled(kernels):
        return False
    console.print(f"[bold]note:[/bold] {FIRST_COMPILE}", soft_wrap=True, highlight=False)
    return True
