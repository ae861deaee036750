"""narbench benchmarks: named figures, one line each; asserts nothing (targets live here, not in tests).

    python benchmarks/bench.py                    # every figure (slow: several minutes)
    python benchmarks/bench.py --only score-nas   # one figure (repeat --only for several)
    python benchmarks/bench.py --list             # the figure names

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
                   (medians of epochs 2..E); gflops is narbench's matmul FLOP/s, limit_gflops one
                   core's torch.mm FLOP/s on the batch's shapes; peak_rss_mb and peer_peak_rss_mb
                   each child's peak resident memory (ru_maxrss, the largest over the rounds; it
                   counts the parent's pages at the fork, parent_peak_rss_mb, the loaded dataset)

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
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from narbench.core import registry
from narbench.data.dataset import load_dataset
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.eval.retrieval import top_k_cosine
from narbench.train.trainer import Trainer, seed_everything

ROOT = Path(__file__).resolve().parents[1]
FIGURES: dict[str, object] = {}


def figure(name: str):
    def register(fn):
        FIGURES[name] = fn
        return fn

    return register


def line(name: str, **fields) -> None:
    """Print one figure line: `name key=value ...` (floats with 4 significant digits)."""
    parts = [name]
    for k, v in fields.items():
        if isinstance(v, float):
            v = f"{v:.4g}"
        parts.append(f"{k}={v}")
    print(" ".join(parts), flush=True)


def timed(fn, repeats: int = 1) -> tuple[float, object]:
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


@figure("nas-generation")
def bench_generation(args) -> None:
    from narbench.datasets.nas import generate

    seconds, (graphs, _, _) = timed(lambda: generate(seed=0), repeats=3)
    line("nas-generation", graphs=len(graphs), seconds=seconds, repeats=3)


@figure("encoders")
def bench_encoders(args) -> None:
    ds = load_dataset("nas")
    rng = np.random.default_rng(0)
    idx = rng.choice(ds.split.train, size=min(args.train_graphs, len(ds.split.train)), replace=False)
    graphs = [ds.graphs[i] for i in idx]
    fam = ds.family_ids()[idx]
    profile = get_profile(args.profile)
    profile = replace(profile, train=replace(profile.train, epochs=1))
    corpus_graphs = [ds.graphs[i] for i in ds.split.train]
    query_graphs = [ds.graphs[i] for i in ds.split.test[:500]]
    # The first fit pays for CUDA/library start-up: do one small fit untimed.
    cls = registry.load("encoder", args.encoders[0])
    enc = cls(len(ds.vocab), len(ds.families), profile, registry.load("splitter", cls.default_splitter)())
    enc.fit(Trainer(args.device, 0, progress=False), graphs[:64], Labels(fam[:64], fam[:64], len(ds.families)))
    for name in args.encoders:
        seed_everything(0)
        trainer = Trainer(args.device, 0, progress=False)
        cls = registry.load("encoder", name)
        splitter = registry.load("splitter", cls.default_splitter)()
        enc = cls(len(ds.vocab), len(ds.families), profile, splitter)
        t_train, _ = timed(lambda: enc.fit(trainer, graphs, Labels(fam, fam, len(ds.families))))
        t_embed, corpus = timed(lambda: enc.embed(trainer, corpus_graphs))
        queries = enc.embed(trainer, query_graphs)
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        t_ret, _ = timed(lambda: top_k_cosine(queries, corpus, 100, device=trainer.device), repeats=3)
        # Second pass over the same graphs: partitions and motif embeddings are cached, so for
        # `ours` this is the macro-graph GCN alone (the paper's claim: cheaper than whole graphs).
        t_again, _ = timed(lambda: enc.embed(trainer, corpus_graphs))
        line("encoders", encoder=name, device=str(trainer.device), model=args.profile, train_graphs=len(graphs),
             train_graphs_per_s=len(graphs) / t_train, embed_ms_per_graph=1000 * t_embed / len(corpus_graphs),
             repeat_embed_ms_per_graph=1000 * t_again / len(corpus_graphs),
             retrieve_ms_per_query=1000 * t_ret / len(query_graphs))


@figure("motif-nas")
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


@figure("motif-real")
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


@figure("motif-real-cache")
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


def _nas_rankings():
    """(query labels, corpus labels, ranked) for the full nas split: a noisy ranking with hits."""
    ds = load_dataset("nas")
    fam = ds.family_ids()
    q, c = fam[ds.split.test], fam[ds.split.train]
    rng = np.random.default_rng(0)
    # embeddings near one point per family: rankings with many (not only) relevant items on top
    centres = rng.normal(size=(int(fam.max()) + 1, 16)).astype(np.float32)
    qe = torch.as_tensor(centres[q] + rng.normal(scale=1.5, size=(len(q), 16)).astype(np.float32))
    ce = torch.as_tensor(centres[c] + rng.normal(scale=1.5, size=(len(c), 16)).astype(np.float32))
    ranked, _ = top_k_cosine(qe, ce, 100)
    return q, c, ranked.numpy()


@figure("score-nas")
def bench_score(args) -> None:
    from narbench.eval.metrics import score_rankings

    q, c, ranked = _nas_rankings()
    score_rankings(q[:20], c, ranked[:20])  # numba compilation / cache load, untimed
    seconds, (means, _) = timed(lambda: score_rankings(q, c, ranked))
    line("score-nas", queries=len(q), corpus=len(c), seconds=seconds, ndcg_at_20=means["ndcg@20"])


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


@figure("score-numba")
def bench_score_numba(args) -> None:
    """ranx's numba compilation: first scoring call in a fresh process, cold and warm cache."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
        out = []
        for _ in range(2):  # cold (empty cache dir), then warm (what the first run left)
            res = subprocess.run([sys.executable, "-c", _FIRST_SCORE], env=env, check=True, capture_output=True,
                                 text=True)
            out.append([float(x) for x in res.stdout.split()])
    line("score-numba", cold_seconds=out[0][1], warm_seconds=out[1][1], import_seconds=out[1][0])


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


@figure("motif-numba")
def bench_motif_numba(args) -> None:
    """The motif splitter's and the parts' numba kernels: first split (and keys) in a fresh
    process with an empty numba cache (compilation) and with the cache the first left."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
        out = []
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", _FIRST_SPLIT], env=env, check=True, capture_output=True,
                                 text=True)
            out.append([float(x) for x in res.stdout.split()])
    line("motif-numba", cold_seconds=out[0][1], warm_seconds=out[1][1], import_seconds=out[1][0])


@figure("make-run")
def bench_make_run(args) -> None:
    exe = Path(sys.executable).with_name("narbench")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NARBENCH_CACHE": str(Path(tmp) / "cache"), "NARBENCH_NO_PROGRESS": "1"}
        if args.run_threads:
            env["OMP_NUM_THREADS"] = str(args.run_threads)
        cmd = [str(exe), "run", "--encoder", "ours", "--splitter", "motif", "--dataset", "nas",
               "--out", str(Path(tmp) / "runs"), "--no-progress"]
        if args.run_jobs:
            cmd += ["--jobs", str(args.run_jobs)]
        import resource

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = json.loads(next((Path(tmp) / "runs").glob("*.json")).read_text())
    tm = res["timings"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line("make-run", seconds=seconds, cpu_seconds=cpu, cores=os.cpu_count(),
         torch_threads=res["environment"]["torch_threads"], jobs=args.run_jobs or "all", train=tm["train"],
         embed=tm["embed"], score=tm["score"], mrr_at_20=res["metrics"]["mrr@20"])


@figure("embed-real")
def bench_embed_real(args) -> None:
    ds = load_dataset("real")
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(len(ds.graphs), size=min(args.real_graphs, len(ds.graphs)), replace=False))
    graphs = [ds.graphs[i] for i in idx]
    profile = get_profile("quick")
    out = {}
    for name in ("gcn", "ours"):
        seed_everything(0)
        trainer = Trainer("cpu", 0, progress=False)
        cls = registry.load("encoder", name)
        enc = cls(len(ds.vocab), len(ds.families), profile, registry.load("splitter", cls.default_splitter)())
        first, _ = timed(lambda: enc.embed(trainer, graphs))  # fills the motif and embedding caches
        warm, _ = timed(lambda: enc.embed(trainer, graphs))
        out[name] = (first, warm)
    line("embed-real", graphs=len(graphs), nodes=sum(g.num_nodes for g in graphs), gcn_seconds=out["gcn"][1],
         ours_seconds=out["ours"][1], ratio=out["ours"][1] / out["gcn"][1],
         ours_first_pass_seconds=out["ours"][0], threads=torch.get_num_threads())


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far (ru_maxrss), in MB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10)


def _in_child(fn, *a, peak: bool = False):
    """fn(*a) in a forked process (fresh copy of this one, allocator state included); its result.

    `peak=True`: (result, the child's peak resident memory in MB), ru_maxrss measured in the child
    at its end (it counts the pages shared with this process at the fork: the loaded dataset)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def target():
        try:
            value = fn(*a)
            send.send(("ok", (value, _peak_rss_mb()) if peak else value))
        except BaseException as exc:  # noqa: BLE001  (handed to the parent, which raises)
            send.send(("error", repr(exc)))

    proc = ctx.Process(target=target)
    proc.start()
    status, value = recv.recv()
    proc.join()
    if status != "ok":
        raise RuntimeError(f"train-real child failed: {value}")
    return value


def _epoch_seconds(stamps: list[float], end: float, per_epoch: int) -> list[float]:
    """Seconds per epoch from the start times of every batch's forward."""
    starts = stamps[::per_epoch] + [end]
    return [b - a for a, b in zip(starts, starts[1:])]


def _train_narbench(enc, graphs, labels, malloc_tuning: bool, per_epoch: int, compile: bool = False) -> list[float]:
    torch.set_num_threads(1)
    seed_everything(0)
    stamps: list[float] = []
    enc.register_forward_pre_hook(lambda *_: stamps.append(time.perf_counter()))
    trainer = Trainer("cpu", 0, progress=False, jobs=1, malloc_tuning=malloc_tuning, compile=compile)
    enc.fit(trainer, graphs, labels)
    if trainer.compile_failure:
        raise RuntimeError(f"--compile: torch.compile failed ({trainer.compile_failure})")
    return _epoch_seconds(stamps, time.perf_counter(), per_epoch)  # the first includes any compilation


class _PeerGCN(torch.nn.Module):
    """The plain-PyG peer: embedding, 3 x GCNConv with ReLU and dropout, mean pooling, a classifier."""

    def __init__(self, num_ops: int, hidden: int, layers: int, dropout: float, num_classes: int) -> None:
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.embedding = torch.nn.Embedding(num_ops, hidden)
        self.convs = torch.nn.ModuleList(GCNConv(hidden, hidden) for _ in range(layers))
        self.dropout = torch.nn.Dropout(dropout)
        self.classifier = torch.nn.Linear(hidden, num_classes)

    def forward(self, batch):
        from torch_geometric.nn import global_mean_pool

        h = self.embedding(batch.x)
        for conv in self.convs:
            h = self.dropout(torch.relu(conv(h, batch.edge_index)))
        return global_mean_pool(h, batch.batch, size=batch.num_graphs)


def _peer_step(model, batch, cfg):
    from narbench.train.losses import supervised_contrastive

    emb = model(batch)
    return supervised_contrastive(emb, batch.y_cl, cfg.temperature) + \
        torch.nn.functional.cross_entropy(model.classifier(emb), batch.y_ce)


def _train_peer(datas, num_ops: int, num_classes: int, profile) -> list[float]:
    from torch_geometric.loader import DataLoader

    torch.set_num_threads(1)
    seed_everything(0)
    m, cfg = profile.model, profile.train
    model = _PeerGCN(num_ops, m.hidden, m.layers, m.dropout, num_classes).train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loader = DataLoader(datas, batch_size=cfg.batch_size, shuffle=True)
    seconds = []
    for _ in range(cfg.epochs):
        t = time.perf_counter()
        for batch in loader:
            loss = _peer_step(model, batch, cfg)
            opt.zero_grad()
            loss.backward()
            opt.step()
        seconds.append(time.perf_counter() - t)
    return seconds


def _epoch_flops(datas, num_ops: int, num_classes: int, profile) -> tuple[float, float]:
    """(matmul FLOPs of one training epoch, forward and backward; mean nodes per batch)."""
    from torch.utils.flop_counter import FlopCounterMode
    from torch_geometric.loader import DataLoader

    torch.set_num_threads(1)
    seed_everything(0)
    m, cfg = profile.model, profile.train
    model = _PeerGCN(num_ops, m.hidden, m.layers, m.dropout, num_classes).train()
    loader = DataLoader(datas, batch_size=cfg.batch_size, shuffle=False)
    nodes = []
    with FlopCounterMode(display=False) as counter:
        for batch in loader:
            nodes.append(batch.num_nodes)
            _peer_step(model, batch, cfg).backward()
    return float(counter.get_total_flops()), float(np.mean(nodes))


def _matmul_gflops(rows: int, hidden: int) -> float:
    """One core's torch.mm GFLOP/s on a GCN batch's shapes: X W (forward), G W^T and X^T G (backward)."""
    torch.set_num_threads(1)
    x, w, g = torch.randn(rows, hidden), torch.randn(hidden, hidden), torch.randn(rows, hidden)
    shapes = [(x, w), (g, w.T), (x.T, g)]

    def products() -> None:
        for a, b in shapes:
            torch.mm(a, b)

    products()  # warm-up
    best, _ = timed(products, repeats=30)
    return 3 * 2 * rows * hidden * hidden / best / 1e9


@figure("train-real")
def bench_train_real(args) -> None:
    from narbench.data.dataset import stratified_subset
    from narbench.train.encoder import graph_to_data

    ds = load_dataset("real")
    fam = ds.family_ids()
    idx = stratified_subset(ds.split.train, fam[ds.split.train], args.train_real_graphs, seed=0)
    graphs = [ds.graphs[i] for i in idx]
    labels = Labels(fam[idx], fam[idx], len(ds.families))
    profile = get_profile("quick", epochs=args.epochs)
    datas = [graph_to_data(g, len(ds.vocab), int(c), int(c)) for g, c in zip(graphs, fam[idx])]
    per_epoch = -(-len(graphs) // profile.train.batch_size)
    cls = registry.load("encoder", "gcn")
    parent_rss = _peak_rss_mb()  # what every child starts with: the pages it shares with this process
    ours, peer, ours_rss, peer_rss, first = [], [], [], [], []
    for _ in range(args.rounds):
        enc = cls(len(ds.vocab), len(ds.families), profile)
        seconds, rss = _in_child(_train_narbench, enc, graphs, labels, args.malloc_tuning, per_epoch, args.compile,
                                 peak=True)
        ours.append(statistics.mean(seconds[1:]))
        first.append(seconds[0])
        ours_rss.append(rss)
        seconds, rss = _in_child(_train_peer, datas, len(ds.vocab), len(ds.families), profile, peak=True)
        peer.append(statistics.mean(seconds[1:]))
        peer_rss.append(rss)
    flops, rows = _in_child(_epoch_flops, datas, len(ds.vocab), len(ds.families), profile)
    limit = _in_child(_matmul_gflops, round(rows), profile.model.hidden)
    x, y = statistics.median(ours), statistics.median(peer)
    extra = {"compile_seconds": statistics.median(first) - x} if args.compile else {}
    line("train-real", graphs=len(graphs), epochs=args.epochs, seconds_per_epoch=x, peer_seconds_per_epoch=y,
         gflops=flops / x / 1e9, limit_gflops=limit, peak_rss_mb=round(max(ours_rss)),
         peer_peak_rss_mb=round(max(peer_rss)), parent_peak_rss_mb=round(parent_rss),
         malloc_tuning=args.malloc_tuning, compile=args.compile, **extra)


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
