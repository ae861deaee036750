"""The numba figures for `benchmarks.speed.bench`: the first scoring call and the first motif split
in a fresh process, with an empty numba cache (compilation) and with the cache the first run left."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from benchmarks.timing import line

_FIRST_SCORE = """
import time
t = time.perf_counter()
import numpy as np
import narbench.eval.metrics as m
import ranx.metrics
t_import = time.perf_counter() - t
t = time.perf_counter()
m.score_rankings(np.array([0, 1]), np.array([0, 1, 0, 1]), np.array([[0, 1, 2, 3], [1, 0, 3, 2]]))
print(t_import, time.perf_counter() - t)
"""

_FIRST_SPLIT = """
import time
t = time.perf_counter()
import narbench.train.parts
from narbench.datasets.nas import generate
from narbench.train.partcache import compute_parts
from narbench.splitters.motif import MotifSplitter
graph = generate(seed=0, n_classes=1, per_class=1)[0][0]
t_import = time.perf_counter() - t
t = time.perf_counter()
compute_parts(MotifSplitter(), graph)
print(t_import, time.perf_counter() - t)
"""


def _cold_and_warm(snippet: str) -> list[list[float]]:
    """[[import s, call s] cold, [import s, call s] warm]: `snippet` run twice in a fresh Python
    sharing one numba cache directory, empty at the first run (cold), what the first left at the second."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
        out = []
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", snippet], env=env, check=True, capture_output=True,
                                 text=True)
            out.append([float(x) for x in res.stdout.split()])
    return out


def bench_score_numba(args) -> None:
    """ranx's numba compilation: first scoring call in a fresh process, cold and warm cache."""
    out = _cold_and_warm(_FIRST_SCORE)
    line("score-numba", cold_seconds=out[0][1], warm_seconds=out[1][1], import_seconds=out[1][0])


def bench_motif_numba(args) -> None:
    """The motif splitter's and the parts' numba kernels: first split (and keys) in a fresh
    process with an empty numba cache (compilation) and with the cache the first left."""
    out = _cold_and_warm(_FIRST_SPLIT)
    line("motif-numba", cold_seconds=out[0][1], warm_seconds=out[1][1], import_seconds=out[1][0])
