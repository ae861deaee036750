"""narbench benchmarks: named figures, one line each; asserts nothing (targets live here, not in tests).

    python -m benchmarks.speed.bench                    # every figure (slow: several minutes)
    python -m benchmarks.speed.bench --only score-nas   # one figure (repeat --only for several)
    python -m benchmarks.speed.bench --list             # the figure names

Every figure prints one line `name key=value ...`. Figures:

  nas-generation   NAS generation time for 30,000 graphs (best of 3, one process)
  encoders         per encoder (--encoders): training throughput, embedding and retrieval time on nas
  motif-nas        motif sampling time per graph on 500 nas graphs (median, max)
  motif-real       motif sampling + part extraction (every part's subgraph and key) of the whole
                   `real` set, one process, no cache; `digest` fingerprints every partition and key
  motif-real-cache all the motif work of a run over every `real` graph (parts, motif subgraphs, context
                   graphs) with the parts cache: first run (empty cache, `jobs` = all cores), then
                   a second run (a fresh encoder reading the cache)
  motif-numba      first split in a fresh process: the compiled kernels' compilation with an empty
                   numba cache (cold) and loading them from the cache the first left (warm)
  score-nas        ranx scoring of the full nas split (3,000 queries x 27,000 corpus, top 100), warm
  score-numba      first scoring call in a fresh process: ranx's numba compilation with an empty
                   cache (cold) and with the cache the first left (warm); import time apart
  make-run         `narbench run --encoder ours --splitter motif --dataset nas` (quick profile, what
                   `make run` runs) in a subprocess, with a fresh cache directory
  embed-real       embedding time of `ours` against `gcn` on the same `real` graphs, warm caches
  train-real       gcn training (quick recipe) on narbench's stratified selection of --train-real-graphs
                   `real` training graphs, one torch thread: seconds per epoch of narbench's loop
                   (`narbench run`'s, malloc tuning on as the CLI has it) against a plain-PyG loop of the
                   same model and loss on the same graphs (the peer), each run in a forked process
                   so that both start from the same untouched allocator, alternated --rounds times
                   (medians of epochs 2..E); speedup = peer / narbench; gflops is narbench's matmul
                   FLOP/s, limit_gflops one core's torch.mm FLOP/s on the batch's shapes,
                   pct_of_limit their ratio in %; peak_rss_mb and peer_peak_rss_mb
                   each child's peak resident memory (ru_maxrss, the largest over the rounds; it
                   counts the parent's pages at the fork, parent_peak_rss_mb, the loaded dataset)
  train-breakdown  train-real's two loops timed by phase (building batches, forward, backward,
                   optimiser, syncs; CUDA events on a GPU): a table, then one line
                   (`benchmarks.speed.breakdown`)

Options: --device, --encoders, --train-real-graphs, --epochs, --rounds, --no-malloc-tuning (train-real:
narbench's loop as before the tuning), --compile (train-real: narbench's loop through torch.compile,
the peer eager; compile_seconds is the first epoch's excess over a timed one), --train-graphs,
--profile (model size for `encoders`), --real-graphs (graphs of `real` for embed-real), --limit (only the first N graphs of `real` in
the motif-real figures, for a quick look), --run-threads / --run-jobs (make-run: torch threads
and splitting processes; one thread and one job make it a one-core CPU-bound figure, which a
machine shared with other jobs disturbs far less than two busy torch threads).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from benchmarks.speed import breakdown, motif_figures, numba_figures, peer_training, run_figures

#: every figure, in the order a run without --only prints them
FIGURES = {
    "nas-generation": run_figures.bench_generation,
    "encoders": run_figures.bench_encoders,
    "motif-nas": motif_figures.bench_motif_nas,
    "motif-real": motif_figures.bench_motif_real,
    "motif-real-cache": motif_figures.bench_motif_real_cache,
    "score-nas": run_figures.bench_score,
    "score-numba": numba_figures.bench_score_numba,
    "motif-numba": numba_figures.bench_motif_numba,
    "make-run": run_figures.bench_make_run,
    "embed-real": run_figures.bench_embed_real,
    "train-real": peer_training.bench_train_real,
    "train-breakdown": breakdown.bench_train_breakdown,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=None, metavar="NAME", help="run only this figure")
    parser.add_argument("--list", action="store_true", help="list the figure names and exit")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--encoders", nargs="+", default=["gcn", "gat"])
    parser.add_argument("--train-graphs", type=int, default=3000)
    parser.add_argument("--profile", default="quick", help="model size for `encoders` (quick or paper)")
    parser.add_argument("--real-graphs", type=int, default=2000, help="graphs of `real` for embed-real")
    parser.add_argument("--train-real-graphs", type=int, default=600, help="train-real: graphs of `real`")
    parser.add_argument("--epochs", type=int, default=3, help="train-real: epochs per loop (the first untimed)")
    parser.add_argument("--rounds", type=int, default=2, help="train-real: alternations of narbench and the peer")
    parser.add_argument("--no-malloc-tuning", dest="malloc_tuning", action="store_false",
                        help="train-real: narbench's loop without malloc tuning (as before issue 27)")
    parser.add_argument("--compile", action="store_true",
                        help="train-real: narbench's loop with Trainer(compile=True) (the peer stays eager)")
    parser.add_argument("--limit", type=int, default=None, help="motif-real: only the first N graphs")
    parser.add_argument("--run-threads", type=int, default=None,
                        help="make-run: OMP_NUM_THREADS for the run (default: torch's own choice)")
    parser.add_argument("--run-jobs", type=int, default=None, help="make-run: --jobs for the run (default: all cores)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(FIGURES))
        return 0
    names = args.only or list(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, cores {os.cpu_count()}, "
          f"cuda {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}", flush=True)
    for name in names:
        FIGURES[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
