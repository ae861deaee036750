"""The motif splitter's figures for `benchmarks.speed.bench`: sampling time per nas graph, and the
motif work on the whole `real` set without and with the parts cache (`digest` pins the output)."""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.timing import cpu_timed, line
from narbench.core import registry
from narbench.data.dataset import load_dataset
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer


def bench_motif_nas(args) -> None:
    splitter = registry.load("splitter", "motif")()
    ds = load_dataset("nas")
    t = time.perf_counter()
    splitter.split(ds.graphs[500])  # the first call loads (or compiles) the compiled kernels
    first = time.perf_counter() - t
    times = []
    for g in ds.graphs[:500]:
        t = time.perf_counter()
        splitter.split(g)
        times.append(time.perf_counter() - t)
    line("motif-nas", graphs=500, median_ms=1000 * statistics.median(times), max_ms=1000 * max(times),
         first_call_ms=1000 * first)


def _motif_encoder(ds, profile_name: str = "quick"):
    from narbench.baselines.ours import MotifEncoder
    from narbench.splitters.motif import MotifSplitter

    return MotifEncoder(len(ds.vocab), len(ds.families), get_profile(profile_name), MotifSplitter())


def _digest(motifs) -> str:
    """sha256 over every graph's macro edges, part keys and part nodes (equal digests: equal output)."""
    h = hashlib.sha256()
    for parts in motifs:
        h.update(np.ascontiguousarray(parts.macro_edges, dtype="<i8").tobytes())
        for i, key in enumerate(parts.keys):
            h.update(key)
            h.update(np.ascontiguousarray(parts.part(i), dtype="<i8").tobytes())
    return h.hexdigest()[:16]


def _real_graphs(args):
    ds = load_dataset("real")
    return ds, (ds.graphs[: args.limit] if args.limit else ds.graphs)


def bench_motif_real(args) -> None:
    """Split + every part's subgraph and key, one process, no parts cache (the first computation)."""
    ds, graphs = _real_graphs(args)
    enc = _motif_encoder(ds)
    enc.parts_cache = None
    trainer = Trainer("cpu", 0, progress=False, jobs=1)
    seconds, cpu, motifs = cpu_timed(lambda: enc._motifs(trainer, graphs, "split graphs"))
    parts = sum(p.num_parts for p in motifs)
    distinct = len({key for p in motifs for key in p.keys})
    line("motif-real", graphs=len(graphs), seconds=seconds, cpu_seconds=cpu, jobs=1, parts=parts,
         distinct=distinct, digest=_digest(motifs))


def bench_motif_real_cache(args) -> None:
    """All the motif work of a run that trains on every `real` graph (parts of every graph,
    every distinct motif's subgraph and its context graph): first with an empty parts cache
    (splitting in `jobs` processes, all cores), then again with a fresh encoder (the cache warm)."""
    from narbench.train.partcache import PartsCache

    ds, graphs = _real_graphs(args)
    with tempfile.TemporaryDirectory() as tmp:
        out = []
        for _ in range(2):
            enc = _motif_encoder(ds)
            enc.parts_cache = PartsCache(Path(tmp) / "parts.sqlite")
            trainer = Trainer("cpu", 0, progress=False)

            def motif_work():
                motifs = enc._motifs(trainer, graphs, "split graphs")
                first: dict = {}
                for gi, p in enumerate(motifs):
                    for pi, key in enumerate(p.keys):
                        first.setdefault(key, (gi, pi))
                enc._contexts(graphs, motifs, first)
                return motifs

            seconds, cpu, motifs = cpu_timed(motif_work)
            out.append((seconds, cpu))
            enc.parts_cache.close()
        size = (Path(tmp) / "parts.sqlite").stat().st_size
    line("motif-real-cache", graphs=len(graphs), cold_seconds=out[0][0], jobs=trainer.jobs, warm_seconds=out[1][0],
         warm_cpu_seconds=out[1][1], cache_mb=size / 2**20, digest=_digest(motifs))
