"""`run`: the one path through narbench.

dataset -> fixed split -> splitter -> encoder -> trainer -> embeddings -> retrieval -> metrics
-> result file. The CLI's `narbench run` is a thin wrapper over `run(RunConfig(...))`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from narbench import checkpoint, registry
from narbench.dataset import GraphDataset, load_dataset, stratified_subset
from narbench.encoder import Encoder, Labels
from narbench.metrics import METRICS, score_rankings
from narbench.profiles import get_profile
from narbench.result import RunResult, environment, git_commit, write_embeddings
from narbench.retrieval import top_k_cosine
from narbench.splitter import Splitter
from narbench.trainer import Trainer, seed_everything


class ConfigError(ValueError):
    """An invalid combination of run options (the message says which and why)."""


@dataclass(frozen=True)
class RunConfig:
    """Options of one benchmark run (the CLI flags of `narbench run`)."""

    encoder: str = "gcn"
    splitter: str | None = None
    dataset: str = "nas"
    profile: str = "quick"
    seed: int = 0
    device: str = "auto"
    objective: str | None = None
    splitter_params: dict[str, Any] = field(default_factory=dict)
    out: str | None = "runs"
    progress: bool = True
    top_k: int = 100
    save_embeddings: bool = False  # also write `<run_id>.embeddings.npz` (query embeddings + labels)
    save_weights: bool = False  # also write `<run_id>.pt` (trained encoder weights)
    init_from: str | None = None  # start from weights: a `.pt` file or a result `.json` that saved them
    jobs: int | None = None  # CPU processes for data preparation (splitting graphs); None: all cores


@dataclass
class Evaluation:
    """What `run` produced: the result, its file (if written) and the raw retrieval outputs."""

    result: RunResult
    path: Path | None
    query_embeddings: Any
    corpus_embeddings: Any
    ranked: np.ndarray
    per_query: dict[str, np.ndarray]


def resolve(cfg: RunConfig) -> tuple[type[Encoder], Splitter, str]:
    """Load the encoder class and build the splitter; raise on unknown names or bad combos."""
    encoder_cls = registry.load("encoder", cfg.encoder)
    splitter_name = cfg.splitter or encoder_cls.default_splitter
    known = registry.names("splitter")
    if splitter_name not in known:
        raise registry.UnknownNameError("splitter", splitter_name, known)
    if not encoder_cls.uses_splitter and splitter_name != "none":
        raise ConfigError(
            f"encoder {cfg.encoder!r} embeds whole graphs and takes no splitter; use --splitter none "
            f"(got {splitter_name!r})"
        )
    splitter_cls = registry.load("splitter", splitter_name)
    try:
        splitter = splitter_cls(**cfg.splitter_params)
    except TypeError as exc:
        raise ConfigError(f"bad parameters for splitter {splitter_name!r}: {exc}") from exc
    return encoder_cls, splitter, splitter_name


def select(dataset: GraphDataset, profile, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, corpus, query) indices for a profile: stratified subsets of the fixed split."""
    fam = np.array([g.family for g in dataset.graphs])
    split = dataset.split
    train = stratified_subset(split.train, fam[split.train], profile.max_train, seed=seed)
    corpus = stratified_subset(split.train, fam[split.train], profile.max_corpus, seed=seed)
    queries = stratified_subset(split.test, fam[split.test], profile.max_queries, seed=seed)
    # A query is only meaningful when its family has at least one corpus item.
    queries = queries[np.isin(fam[queries], fam[corpus])]
    return train, corpus, queries


def run(cfg: RunConfig, *, dataset: GraphDataset | None = None, console: Console | None = None) -> Evaluation:
    """Run one benchmark configuration end to end and (if `cfg.out`) write its result file.

    `dataset` overrides loading `cfg.dataset` by name (for in-memory datasets).
    """
    console = console or Console(stderr=True)
    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    encoder_cls, splitter, splitter_name = resolve(cfg)
    overrides = {"objective": cfg.objective} if cfg.objective else {}
    try:
        profile = get_profile(cfg.profile, **overrides)
    except (KeyError, ValueError) as exc:
        raise ConfigError(str(exc.args[0])) from exc

    t = time.perf_counter()
    if dataset is None:
        dataset = load_dataset(cfg.dataset)
    train_idx, corpus_idx, query_idx = select(dataset, profile, cfg.seed)
    timings["data"] = time.perf_counter() - t

    graphs = dataset.graphs
    fam_ids = dataset.family_ids()
    ce_ids, n_ce = (dataset.coarse_ids(), len(dataset.coarse_labels))
    if encoder_cls.ce_label == "family":
        ce_ids, n_ce = fam_ids, len(dataset.families)

    seed_everything(cfg.seed)
    trainer = Trainer(cfg.device, cfg.seed, progress=cfg.progress, console=console, jobs=cfg.jobs)
    encoder = encoder_cls(len(dataset.vocab), n_ce, profile, splitter)
    init = checkpoint.load_into(encoder, cfg.encoder, dataset.vocab, cfg.init_from) if cfg.init_from else None

    t = time.perf_counter()
    encoder.fit(trainer, [graphs[i] for i in train_idx], Labels(fam_ids[train_idx], ce_ids[train_idx], n_ce))
    timings["train"] = time.perf_counter() - t

    t = time.perf_counter()
    corpus_emb = encoder.embed(trainer, [graphs[i] for i in corpus_idx])
    query_emb = encoder.embed(trainer, [graphs[i] for i in query_idx])
    timings["embed"] = time.perf_counter() - t

    t = time.perf_counter()
    ranked, _ = top_k_cosine(query_emb, corpus_emb, cfg.top_k, device=trainer.device)
    timings["retrieve"] = time.perf_counter() - t

    t = time.perf_counter()
    means, per_query = score_rankings(fam_ids[query_idx], fam_ids[corpus_idx], ranked.numpy())
    timings["score"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start

    now = datetime.now(timezone.utc)
    run_id = f"{dataset.name}-{cfg.encoder}-{splitter_name}-{cfg.profile}-s{cfg.seed}-{now:%Y%m%dT%H%M%S%fZ}"
    config = {
        "run": {**{k: v for k, v in asdict(cfg).items() if k not in ("out", "progress", "save_embeddings", "save_weights", "jobs")},
                "dataset": dataset.name},
        "profile": asdict(profile),
        "encoder": encoder.config(),
        "splitter": {"name": splitter_name, "params": splitter.params()},
        "training_history": [asdict(h) for h in trainer.histories],
        "encoder_stats": dict(getattr(encoder, "stats", {})),
        "init": init,
    }
    result = RunResult(
        run_id=run_id,
        encoder=cfg.encoder,
        splitter=splitter_name,
        dataset=dataset.describe(),
        profile=cfg.profile,
        seed=cfg.seed,
        config=config,
        metrics={m: means[m] for m in METRICS},
        metrics_extra={m: v for m, v in means.items() if m not in METRICS},
        timings={k: round(v, 4) for k, v in timings.items()},
        device=str(trainer.device) + (f" ({_device_name(trainer.device)})" if trainer.device.type == "cuda" else ""),
        num_queries=int(len(query_idx)),
        num_corpus=int(len(corpus_idx)),
        num_train=int(len(train_idx)),
        environment={**environment(), "entry_points": {"encoder": registry.origin("encoder", cfg.encoder),
                                                       "splitter": registry.origin("splitter", splitter_name)}},
        git_commit=git_commit(),
        created=now.isoformat(),
    )
    if cfg.out and cfg.save_weights:  # side files first: the result file marks the run complete
        checkpoint.save(Path(cfg.out) / f"{run_id}{checkpoint.SUFFIX}", encoder, cfg.encoder, dataset.vocab, run_id)
    if cfg.out and cfg.save_embeddings:
        write_embeddings(Path(cfg.out) / f"{run_id}.embeddings.npz", query_emb,
                         [graphs[i].family for i in query_idx], [graphs[i].coarse for i in query_idx])
    path = result.write(cfg.out, per_query) if cfg.out else None
    return Evaluation(result, path, query_emb, corpus_emb, ranked.numpy(), per_query)


def _device_name(device) -> str:
    import torch

    return torch.cuda.get_device_name(device)
