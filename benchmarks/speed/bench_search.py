"""Benchmarks of `narbench search` against the issue's targets; prints `name key=value ...` lines.

    python -m benchmarks.speed.bench_search                 # API and CLI targets
    python -m benchmarks.speed.bench_search --only faiss    # FAISS on 1,000,000 synthetic 512-d vectors

* api-model: warm `narbench.search(module)` (index loaded), extraction included, for a
  hand-written transformer encoder of a few thousand ops and a residual CNN (target <= 50 ms).
* api-graph: warm search of a saved graph file (target <= 5 ms).
* cli-file: `narbench search examples/out_of_zoo.py:ResidualCNN` end to end in a fresh process,
  imports included (target <= 5 s on a 2-core CPU); wall and CPU seconds.
* faiss: `IVF{nlist},SQ8` over a synthetic clustered corpus against exact search: build
  seconds, one-query p50 latency and recall@100 (share of the exact top 100 found).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.timing import ROOT, example, line, run_timed, warm_times


def _p50(fn, repeat: int) -> float:
    return statistics.median(warm_times(fn, repeat))


def bench_api(repeat: int) -> None:
    import torch

    import narbench
    from narbench.search_engine.index_file import load_index
    from narbench.data.store import write_graphs

    zoo = example("out_of_zoo")
    ResidualCNN, TransformerEncoder = zoo.ResidualCNN, zoo.TransformerEncoder
    index = load_index()
    for name, model in (("transformer-64-layers", TransformerEncoder(layers=64)), ("residual-cnn", ResidualCNN())):
        result = narbench.search(model)
        times = warm_times(lambda: narbench.search(model), repeat)
        p50, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
        line("api-model", model=name, ops=result.num_nodes, device=result.info["device"], p50_ms=f"{p50 * 1e3:.1f}",
             p90_ms=f"{p90 * 1e3:.1f}", target_ms=50, threads=torch.get_num_threads())
    from narbench.search_engine.target import resolve_target

    graph = resolve_target(TransformerEncoder(layers=64), index).graph
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "query.narg"
        write_graphs(path, [graph], index.vocab, {})
        p50 = _p50(lambda: narbench.search(str(path)), repeat)
        line("api-graph", ops=graph.num_nodes, p50_ms=f"{p50 * 1e3:.2f}", target_ms=5)
        name = index.names[len(index) // 2]
        p50 = _p50(lambda: narbench.search(name), repeat)
        line("api-name", p50_ms=f"{p50 * 1e3:.2f}")


def bench_cli(repeat: int) -> None:
    exe = Path(sys.executable).with_name("narbench")
    cmd = [str(exe), "search", "examples/out_of_zoo.py:ResidualCNN"]
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = run_timed(cmd, cwd=ROOT, capture_output=True)
        walls.append(wall)
        cpus.append(cpu)
    load = os.getloadavg()[0]
    line("cli-file", cmd=f"'{' '.join(cmd[1:])}'", wall_s_p50=f"{statistics.median(walls):.2f}",
         cpu_s_p50=f"{statistics.median(cpus):.2f}", target_s=5, cores=os.cpu_count(), load1=f"{load:.1f}")


def synthetic(n: int, d: int, clusters: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around `clusters` random centres (families), like a corpus of embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, d)).astype(np.float32)
    out = np.empty((n, d), dtype=np.float32)
    step = 100_000
    for s in range(0, n, step):
        m = min(step, n - s)
        out[s : s + m] = centres[rng.integers(0, clusters, m)] + 0.7 * rng.standard_normal((m, d)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def bench_faiss(n: int, d: int, queries: int, nprobe: list[int]) -> None:
    from narbench.search_engine.backends import ExactBackend, FaissBackend, ivf_lists

    t = time.perf_counter()
    corpus = synthetic(n + queries, d, clusters=max(10, n // 1000))
    corpus, qs = corpus[:n], corpus[n:]
    line("faiss-data", n=n, d=d, queries=queries, seconds=f"{time.perf_counter() - t:.1f}")
    t = time.perf_counter()
    exact = ExactBackend(corpus)
    truth = np.concatenate([exact.search(qs[i : i + 50], 100)[0] for i in range(0, queries, 50)])
    exact_p50 = _p50(lambda: exact.search(qs[:1], 100), 5)
    line("faiss-exact", seconds=f"{time.perf_counter() - t:.1f}", query_p50_ms=f"{exact_p50 * 1e3:.1f}")
    t = time.perf_counter()
    backend = FaissBackend(corpus)
    line("faiss-build", factory=backend.factory, nlist=ivf_lists(n), seconds=f"{time.perf_counter() - t:.1f}")
    for probe in nprobe:
        backend.nprobe = probe
        backend._set_nprobe()
        found = backend.search(qs, 100)[0]
        recall = np.mean([len(set(f) & set(g)) / 100 for f, g in zip(found.tolist(), truth.tolist())])
        lat = []
        for i in range(min(queries, 200)):
            s = time.perf_counter()
            backend.search(qs[i : i + 1], 100)
            lat.append(time.perf_counter() - s)
        line("faiss-query", nprobe=probe, p50_ms=f"{statistics.median(lat) * 1e3:.2f}", **{"recall@100": f"{recall:.4f}"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["api", "cli", "faiss"], action="append")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 32, 64])
    args = parser.parse_args()
    only = set(args.only or ["api", "cli"])
    if "api" in only:
        bench_api(args.repeat)
    if "cli" in only:
        bench_cli(max(3, args.repeat // 4))
    if "faiss" in only:
        bench_faiss(args.n, args.dim, args.queries, args.nprobe)


if __name__ == "__main__":
    main()
