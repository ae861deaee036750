"""narbench benchmarks: prints figures, asserts nothing (performance targets live here, not in tests).

    python benchmarks/bench.py [--device auto] [--encoders gcn gat] [--train-graphs 3000]

Figures: NAS generation time for 30,000 graphs; training throughput (graphs/s) per encoder;
embedding time per graph; retrieval time per query against the full NAS corpus; and, when the
motif splitter is installed, motif sampling time per graph.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from narbench import registry
from narbench.dataset import load_dataset
from narbench.encoder import Labels
from narbench.profiles import get_profile
from narbench.retrieval import top_k_cosine
from narbench.trainer import Trainer, seed_everything


def timed(fn, repeats: int = 1) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bench_generation(console: Console) -> None:
    from narbench.datasets.nas import generate

    seconds, (graphs, _, _) = timed(lambda: generate(seed=0), repeats=3)
    console.print(f"NAS generation: {len(graphs):,} graphs in {seconds:.2f} s (best of 3, one process)")


def bench_encoders(console: Console, names: list[str], device: str, n_train: int, profile_name: str) -> None:
    ds = load_dataset("nas")
    rng = np.random.default_rng(0)
    idx = rng.choice(ds.split.train, size=min(n_train, len(ds.split.train)), replace=False)
    graphs = [ds.graphs[i] for i in idx]
    fam = ds.family_ids()[idx]
    profile = get_profile(profile_name)
    profile = replace(profile, train=replace(profile.train, epochs=1))
    table = Table(title=f"encoders on nas ({profile_name} model, {len(graphs)} graphs, 1 epoch)")
    embed_ms: dict[str, tuple[float, float]] = {}
    for col in ("encoder", "device", "train graphs/s", "embed ms/graph", "repeat embed ms/graph", "retrieve ms/query"):
        table.add_column(col, justify="right")
    corpus_graphs = [ds.graphs[i] for i in ds.split.train]
    query_graphs = [ds.graphs[i] for i in ds.split.test[:500]]
    # The first fit pays for CUDA/library start-up: do one small fit untimed.
    cls = registry.load("encoder", names[0])
    enc = cls(len(ds.vocab), len(ds.families), profile, registry.load("splitter", cls.default_splitter)())
    enc.fit(Trainer(device, 0, progress=False), graphs[:64], Labels(fam[:64], fam[:64], len(ds.families)))
    for name in names:
        seed_everything(0)
        trainer = Trainer(device, 0, progress=False)
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
        embed_ms[name] = (1000 * t_embed / len(corpus_graphs), 1000 * t_again / len(corpus_graphs))
        table.add_row(name, str(trainer.device), f"{len(graphs) / t_train:,.0f}", f"{embed_ms[name][0]:.3f}",
                      f"{embed_ms[name][1]:.3f}", f"{1000 * t_ret / len(query_graphs):.3f}")
    console.print(table)
    if "gcn" in embed_ms:
        for name, (cold, warm) in embed_ms.items():
            if name != "gcn":
                console.print(f"embedding time {name} / gcn on the same graphs: {cold / embed_ms['gcn'][0]:.2f}x "
                              f"(first pass), {warm / embed_ms['gcn'][1]:.2f}x (repeat pass)")
    console.print(f"(retrieval: exact cosine top-100 over {len(corpus_graphs):,} corpus graphs, batches of 1024)")


def bench_motifs(console: Console) -> None:
    try:
        splitter = registry.load("splitter", "motif")()
    except Exception as exc:  # the motif splitter is optional for this script
        console.print(f"motif splitter unavailable: {exc}")
        return
    ds = load_dataset("nas")
    times = []
    for g in ds.graphs[:500]:
        t = time.perf_counter()
        splitter.split(g)
        times.append(time.perf_counter() - t)
    console.print(f"motif sampling on 500 nas graphs: median {1000 * statistics.median(times):.2f} ms, "
                  f"max {1000 * max(times):.2f} ms per graph")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--encoders", nargs="+", default=["gcn", "gat"])
    parser.add_argument("--train-graphs", type=int, default=3000)
    parser.add_argument("--profile", default="quick", help="whose model size to use (quick or paper)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["generation", "encoders", "motifs"])
    args = parser.parse_args()
    console = Console()
    console.print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
                  f"cuda {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
    if "generation" not in args.skip:
        bench_generation(console)
    if "encoders" not in args.skip:
        bench_encoders(console, args.encoders, args.device, args.train_graphs, args.profile)
    if "motifs" not in args.skip:
        bench_motifs(console)


if __name__ == "__main__":
    main()
