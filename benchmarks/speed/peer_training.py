"""The train-real figure for `benchmarks.speed.bench`: narbench's training loop against a plain-PyG
loop of the same model and loss (the peer), each in a forked process, with matmul FLOP/s and peak memory."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.timing import line, peak_rss_mb, timed
from narbench.core import registry
from narbench.data.dataset import load_dataset
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer, seed_everything


def _in_child(fn, *a, peak: bool = False, fork: bool = True):
    """fn(*a) in a forked process (fresh copy of this one, allocator state included); its result.

    `peak=True`: (result, the child's peak resident memory in MB), ru_maxrss measured in the child
    at its end (it counts the pages shared with this process at the fork: the loaded dataset).
    Once this process has initialised CUDA a forked child cannot use it (the H200 lease of 2026-11-30:
    `CUDA error: initialization error`), so fn then runs here, one call after the other; `fork=False`
    (a CUDA benchmark, whose parent may have touched the driver outside torch) asks for that always."""
    import multiprocessing as mp

    if not fork or torch.cuda.is_initialized():
        value = fn(*a)
        return (value, peak_rss_mb()) if peak else value

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def target():
        try:
            value = fn(*a)
            send.send(("ok", (value, peak_rss_mb()) if peak else value))
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


@dataclass(frozen=True)
class TrainRealData:
    """train-real's inputs: the selected `real` graphs, their labels, the peer's PyG Data and the recipe."""

    graphs: list
    labels: Labels
    datas: list
    num_ops: int
    num_classes: int
    profile: object
    per_epoch: int
    cls: type


def train_real_data(n_graphs: int, epochs: int) -> TrainRealData:
    """narbench's stratified selection of `n_graphs` `real` training graphs, at the quick recipe."""
    from narbench.data.dataset import stratified_subset
    from narbench.train.encoder import graph_to_data

    ds = load_dataset("real")
    fam = ds.family_ids()
    idx = stratified_subset(ds.split.train, fam[ds.split.train], n_graphs, seed=0)
    graphs = [ds.graphs[i] for i in idx]
    profile = get_profile("quick", epochs=epochs)
    datas = [graph_to_data(g, len(ds.vocab), int(c), int(c)) for g, c in zip(graphs, fam[idx])]
    return TrainRealData(graphs, Labels(fam[idx], fam[idx], len(ds.families)), datas, len(ds.vocab),
                         len(ds.families), profile, -(-len(graphs) // profile.train.batch_size),
                         registry.load("encoder", "gcn"))


def bench_train_real(args) -> None:
    data = train_real_data(args.train_real_graphs, args.epochs)
    graphs, labels, datas, profile = data.graphs, data.labels, data.datas, data.profile
    parent_rss = peak_rss_mb()  # what every child starts with: the pages it shares with this process
    ours, peer, ours_rss, peer_rss, first = [], [], [], [], []
    for _ in range(args.rounds):
        enc = data.cls(data.num_ops, data.num_classes, profile)
        seconds, rss = _in_child(_train_narbench, enc, graphs, labels, args.malloc_tuning, data.per_epoch,
                                 args.compile, peak=True)
        ours.append(statistics.mean(seconds[1:]))
        first.append(seconds[0])
        ours_rss.append(rss)
        seconds, rss = _in_child(_train_peer, datas, data.num_ops, data.num_classes, profile, peak=True)
        peer.append(statistics.mean(seconds[1:]))
        peer_rss.append(rss)
    flops, rows = _in_child(_epoch_flops, datas, data.num_ops, data.num_classes, profile)
    limit = _in_child(_matmul_gflops, round(rows), profile.model.hidden)
    x, y = statistics.median(ours), statistics.median(peer)
    extra = {"compile_seconds": statistics.median(first) - x} if args.compile else {}
    line("train-real", graphs=len(graphs), epochs=args.epochs, seconds_per_epoch=x, peer_seconds_per_epoch=y,
         speedup=y / x, gflops=flops / x / 1e9, limit_gflops=limit, pct_of_limit=100 * flops / x / 1e9 / limit,
         peak_rss_mb=round(max(ours_rss)), peer_peak_rss_mb=round(max(peer_rss)),
         parent_peak_rss_mb=round(parent_rss), malloc_tuning=args.malloc_tuning, compile=args.compile, **extra)
