"""The figures of a run's stages for `benchmarks.speed.bench`: nas generation, encoders' training,
embedding and retrieval, scoring, a whole `make run`, and `ours` against `gcn` embedding `real`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks.timing import line, run_timed, timed
from narbench.core import registry
from narbench.data.dataset import load_dataset
from narbench.eval.retrieval import top_k_cosine
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer, seed_everything


def bench_generation(args) -> None:
    from narbench.datasets.nas import generate

    seconds, (graphs, _, _) = timed(lambda: generate(seed=0), repeats=3)
    line("nas-generation", graphs=len(graphs), seconds=seconds, repeats=3)


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


def bench_score(args) -> None:
    from narbench.eval.metrics import score_rankings

    q, c, ranked = _nas_rankings()
    score_rankings(q[:20], c, ranked[:20])  # numba compilation / cache load, untimed
    seconds, (means, _) = timed(lambda: score_rankings(q, c, ranked))
    line("score-nas", queries=len(q), corpus=len(c), seconds=seconds, ndcg_at_20=means["ndcg@20"])


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
        seconds, cpu = run_timed(cmd, env=env, stdout=subprocess.DEVNULL)
        res = json.loads(next((Path(tmp) / "runs").glob("*.json")).read_text())
    tm = res["timings"]
    line("make-run", seconds=seconds, cpu_seconds=cpu, cores=os.cpu_count(),
         torch_threads=res["environment"]["torch_threads"], jobs=args.run_jobs or "all", train=tm["train"],
         embed=tm["embed"], score=tm["score"], mrr_at_20=res["metrics"]["mrr@20"])


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
