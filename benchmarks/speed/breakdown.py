"""Where an epoch's time goes: narbench's training step by phase beside the plain-PyG peer's.

    python -m benchmarks.speed.breakdown [--device cpu|cuda] [--train-real-graphs 600] [--epochs 3] [--rounds 2]
    python -m benchmarks.speed.bench --only train-breakdown     # the same, as a figure of bench.py

The data and models are train-real's (`peer_training`): gcn at the quick recipe on narbench's
stratified selection of `real` training graphs, against a plain-PyG loop of the same model and loss.
Each loop runs in a forked process (one torch thread on the CPU), alternated `--rounds` times; a
phase's figure is the median over rounds of its mean over epochs 2..E (the first is warm-up).
Phases (`narbench.train.steptimes`): batch (building it and moving it to the device), forward (with
the loss), backward, optimiser (zeroing, all-reduce, step), sync (reading a value back to the host);
`other` is the epoch's wall time outside them (the loop, progress). `prepare` is once per run:
graphs to tensors, packing. On CUDA the events' device time per phase is printed beside the host's,
and the GPU's utilisation is sampled during narbench's epochs (when torch can read it).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from benchmarks.speed import peer_training
from benchmarks.timing import line
from narbench.train.steptimes import PHASES, StepTimes
from narbench.train.trainer import Trainer, resolve_device, seed_everything


def _narbench(enc, graphs, labels, device: str, compile: bool) -> dict:
    """narbench's loop, timed by phase: {"epochs": [EpochTimes], "prepare": s, "util": [%]}."""
    torch.set_num_threads(1)
    seed_everything(0)
    trainer = Trainer(device, 0, progress=False, jobs=1, malloc_tuning=True, compile=compile)
    trainer.step_times = StepTimes(trainer.device)
    util, stop = [], threading.Event()
    sampler = threading.Thread(target=_sample_utilisation, args=(util, stop), daemon=True)
    if trainer.device.type == "cuda":
        sampler.start()
    t = time.perf_counter()
    enc.fit(trainer, graphs, labels)
    total = time.perf_counter() - t
    stop.set()
    if trainer.compile_failure:
        raise RuntimeError(f"--compile: torch.compile failed ({trainer.compile_failure})")
    epochs = trainer.step_times.epochs
    return {"epochs": epochs, "prepare": total - sum(e.wall for e in epochs), "util": util}


def _sample_utilisation(out: list, stop: threading.Event) -> None:
    """GPU utilisation (%) every 0.1 s until `stop` (nothing when torch cannot read it: no pynvml)."""
    while not stop.wait(0.1):
        try:
            out.append(float(torch.cuda.utilization()))
        except Exception:  # noqa: BLE001 - no NVML here: utilisation is simply not reported
            return


def _peer(datas, num_ops: int, num_classes: int, profile, device: str) -> dict:
    """The plain-PyG peer, timed by the same phases."""
    from torch_geometric.loader import DataLoader

    torch.set_num_threads(1)
    seed_everything(0)
    dev = resolve_device(device)
    m, cfg = profile.model, profile.train
    model = peer_training._PeerGCN(num_ops, m.hidden, m.layers, m.dropout, num_classes).to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loader = DataLoader(datas, batch_size=cfg.batch_size, shuffle=True)
    timer = StepTimes(dev)
    for _ in range(cfg.epochs):
        timer.begin_epoch()
        batches = iter(loader)
        while True:
            with timer.phase("batch"):
                batch = next(batches, None)
                if batch is None:
                    break
                batch = batch.to(dev)
            with timer.phase("forward"):
                loss = peer_training._peer_step(model, batch, cfg)
            with timer.phase("optimiser"):
                opt.zero_grad()
            with timer.phase("backward"):
                loss.backward()
            with timer.phase("optimiser"):
                opt.step()
            timer.step_done()
        timer.end_epoch()
    return {"epochs": timer.epochs, "prepare": 0.0, "util": []}


def _summary(runs: list[dict]) -> dict[str, float]:
    """Per phase (host and device), `other`, `epoch` and `prepare`: median over runs of the mean
    over epochs 2..E."""
    def med(fn) -> float:
        return statistics.median(statistics.mean(fn(e) for e in run["epochs"][1:]) for run in runs)

    out = {p: med(lambda e, p=p: e.host[p]) for p in PHASES}
    out["epoch"] = med(lambda e: e.wall)
    out["other"] = out["epoch"] - sum(out[p] for p in PHASES)
    out["prepare"] = statistics.median(run["prepare"] for run in runs)
    if runs[0]["epochs"][0].device:
        out.update({f"device_{p}": med(lambda e, p=p: e.device[p]) for p in PHASES})
    return out


def _table(ours: dict[str, float], peer: dict[str, float]) -> str:
    rows = [*PHASES, "other", "epoch"]
    device = "device_batch" in ours
    head = f"{'phase':<10} {'narbench s':>11} {'share':>6} {'peer s':>9} {'share':>6}"
    head += f" {'narbench gpu s':>15} {'peer gpu s':>11}" if device else ""
    lines = [head]
    for r in rows:
        text = (f"{r:<10} {ours[r]:>11.4f} {ours[r] / ours['epoch']:>6.1%} {peer[r]:>9.4f} "
                f"{peer[r] / peer['epoch']:>6.1%}")
        if device and r in PHASES:
            text += f" {ours[f'device_{r}']:>15.4f} {peer[f'device_{r}']:>11.4f}"
        lines.append(text)
    lines.append(f"{'prepare':<10} {ours['prepare']:>11.4f} {'(once)':>6}")
    return "\n".join(lines)


def bench_train_breakdown(args) -> None:
    """The per-phase table of narbench's epoch and the peer's, then one `train-breakdown` line."""
    data = peer_training.train_real_data(args.train_real_graphs, args.epochs)
    ours_runs, peer_runs, util = [], [], []
    for _ in range(args.rounds):
        enc = data.cls(data.num_ops, data.num_classes, data.profile)
        fork = args.device == "cpu"
        run = peer_training._in_child(_narbench, enc, data.graphs, data.labels, args.device, args.compile, fork=fork)
        ours_runs.append(run)
        util += run["util"]
        peer_runs.append(peer_training._in_child(_peer, data.datas, data.num_ops, data.num_classes, data.profile,
                                                 args.device, fork=fork))
    ours, peer = _summary(ours_runs), _summary(peer_runs)
    flops, rows = peer_training._in_child(peer_training._epoch_flops, data.datas, data.num_ops, data.num_classes,
                                          data.profile)
    limit = peer_training._in_child(peer_training._matmul_gflops, round(rows), data.profile.model.hidden)
    print(f"# train-breakdown: gcn, real quick, {len(data.graphs)} graphs, {data.per_epoch} steps/epoch, "
          f"device {args.device}, medians of epochs 2..{args.epochs} over {args.rounds} rounds")
    print(_table(ours, peer), flush=True)
    extra = {"gpu_util_mean": statistics.mean(util)} if util else {}
    line("train-breakdown", graphs=len(data.graphs), epochs=args.epochs, seconds_per_epoch=ours["epoch"],
         peer_seconds_per_epoch=peer["epoch"], speedup=peer["epoch"] / ours["epoch"],
         gflops=flops / ours["epoch"] / 1e9, limit_gflops=limit,
         pct_of_limit=100 * flops / ours["epoch"] / 1e9 / limit, prepare_seconds=ours["prepare"],
         compile=args.compile, **extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--train-real-graphs", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="narbench's loop with Trainer(compile=True)")
    bench_train_breakdown(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
