"""Stage-1 probe of `ours`: loss, health and a validation kNN probe of F_s after every epoch.

Validation is carved from the profile's *training* subset, never from the test queries: a
stratified sixth of the training graphs (by family, the run's seed) are the probe's queries,
the other five sixths its corpus, and stage 1 trains on the corpus part only. The probe reads
a graph as the mean of the unit-normalised F_s embeddings of its parts (no training on top),
and P@10 is the share of a probe query's 10 nearest corpus graphs (cosine) of its family.
Health (`narbench.train.health`) is F_s's raw output on the encoder's fixed motif sample.

    python -m benchmarks.method.stage1_probe --dataset nas --profile quick --seed 0 \\
        --encoder-param stage1_lr=0.01 --encoder-param last_activation=true

prints one line per epoch (0 = untrained) and, with --json FILE, writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from narbench.train import losses
from narbench.cli.args import parse_param
from narbench.data.dataset import load_dataset, stratified_subset
from narbench.train.profiles import get_profile
from narbench.core.registry import load
from narbench.harness.runner import select
from narbench.train.trainer import Trainer, seed_everything


def graph_vectors(enc, trainer, motifs) -> torch.Tensor:
    """Mean of the unit-normalised F_s embeddings of each graph's parts (the probe's readout)."""
    keys = sorted({k for p in motifs for k in p.keys})
    emb = trainer.embed(enc.pair.f_s, [enc._motif_data[k] for k in keys], 1024, desc="probe motifs")
    emb = torch.nn.functional.normalize(emb, dim=1)
    row = {k: i for i, k in enumerate(keys)}
    out = torch.stack([emb[[row[k] for k in p.keys]].mean(0) for p in motifs])
    return torch.nn.functional.normalize(out, dim=1)


def precision_at(q: torch.Tensor, c: torch.Tensor, fq: np.ndarray, fc: np.ndarray, k: int = 10) -> float:
    top = (q @ c.T).topk(k, dim=1).indices.numpy()
    return float((fc[top] == fq[:, None]).mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="nas")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=None, help="stage-1 epochs (default: the profile's)")
    ap.add_argument("--temperature", type=float, default=None, help="stage-1 temperature (default: the profile's)")
    ap.add_argument("--encoder-param", dest="params", action="append", type=parse_param, default=[])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    ds = load_dataset(args.dataset)
    profile = get_profile(args.profile)
    train, _, _ = select(ds, profile, args.seed)
    fam = np.array([g.family for g in ds.graphs])
    val = stratified_subset(train, fam[train], len(train) // 6, seed=args.seed)
    rest = np.setdiff1d(train, val)
    seed_everything(args.seed)
    trainer = Trainer("cpu", args.seed, progress=False)
    enc = load("encoder", "ours")(len(ds.vocab), len(ds.families), profile, load("splitter", "motif")())
    enc.set_params(dict(args.params))
    g_rest, g_val = [ds.graphs[i] for i in rest], [ds.graphs[i] for i in val]
    m_rest = enc._motifs(trainer, g_rest, "split")
    m_val = enc._motifs(trainer, g_val, "split")
    sample = enc.health_sample_keys(m_rest, args.seed)
    cfg = enc.stage1_config()
    from dataclasses import replace

    cfg = replace(cfg, epochs=args.epochs or cfg.epochs, temperature=args.temperature or cfg.temperature)
    pairs = enc.stage1_pairs(g_rest, m_rest)
    rows = []

    def probe(epoch: int, loss: float | None) -> None:
        enc.pair.eval()
        h = enc.motif_health(trainer, sample)
        p10 = precision_at(graph_vectors(enc, trainer, m_val), graph_vectors(enc, trainer, m_rest), fam[val], fam[rest])
        rows.append({"epoch": epoch, "loss": loss, **h, "val_p@10": round(p10, 4)})
        print(f"epoch {epoch}: loss {'-' if loss is None else f'{loss:.4f}'}  eff.rank {h['effective_rank']:.2f}  "
              f"dead {h['dead_dims']}/{h['dims']}  val P@10 {p10:.4f}", flush=True)

    print(f"{args.dataset} {args.profile} seed {args.seed}: {len(pairs)} pairs, {len(sample)} health motifs, "
          f"probe {len(val)} queries / {len(rest)} corpus; params {enc.params()}; lr {cfg.lr} t {cfg.temperature}",
          flush=True)
    t = time.perf_counter()
    probe(0, None)

    def step(model, batch):
        a, c = batch
        return losses.info_nce(model.f_s(a), model.f_c(c), cfg.temperature)

    trainer.fit(enc.pair, pairs, cfg, step, stage="stage 1", on_epoch=lambda e, loss: probe(e + 1, loss))
    print(f"{time.perf_counter() - t:.0f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "lr": cfg.lr, "temperature": cfg.temperature,
                                               "params": enc.params(), "epochs": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
