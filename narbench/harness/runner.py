"""`run`: the one path through narbench.

dataset -> fixed split -> splitter -> encoder -> trainer -> embeddings -> retrieval -> metrics
-> result file. The CLI's `narbench run` is a thin wrapper over `run(RunConfig(...))`.
"""

from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from narbench.train import checkpoint, distributed
from narbench.harness import curve as curves, preflight
from narbench.core import jit, registry
from narbench.harness.confighash import result_hash
from narbench.harness.runrecord import (Record, Setup, Sides, make_result, reset_peak_memory, subset_metrics,
                                        subset_positions)
from narbench.harness.runtable import render  # noqa: F401 - `runner.render`, the run table
from narbench.data.dataset import GraphDataset, UnknownSplitError, evaluation_sides, load_dataset, stratified_subset
from narbench.train.encoder import Encoder, Labels
from narbench.eval.holdout import HOLDOUT_RULES
from narbench.eval.metrics import score_rankings
from narbench.eval.relevance import RULE as RELEVANCE_RULE, has_several, relevance_labels
from narbench.train.profiles import get_profile
from narbench.train.protocol import DEFAULT_PROTOCOL, Protocol, get_protocol
from narbench.eval.result import SIDECAR_SUFFIX, RunResult, git_commit, package_versions, write_embeddings
from narbench.eval.retrieval import check_finite, tiebreak_keys, top_k_cosine
from narbench.train.splitter import Splitter
from narbench.train.resume import Snapshots
from narbench.train.trainer import Trainer, seed_everything


class ConfigError(ValueError):
    """An invalid combination of run options (the message says which and why)."""


class ResultWriteError(OSError):
    """The run finished but its files could not be written; `evaluation` holds what it measured.

    Nothing of the run is left in the output folder (files written before the failure are removed).
    """

    def __init__(self, evaluation: "Evaluation", out: str, cause: OSError) -> None:
        self.evaluation = evaluation
        super().__init__(f"cannot write the result to {out}: {cause.strerror or cause}; nothing was written")


@dataclass(frozen=True)
class RunConfig:
    """Options of one benchmark run (the CLI flags of `narbench run`).

    `encoder`, `splitter` (None: the encoder's default) and `dataset` are registered names;
    `split` a split of the dataset; `protocol` which labels trainable encoders get; `profile`
    the data and recipe budget (`narbench.train.profiles`); `objective` overrides the profile's loss
    terms; `splitter_params` are the splitter's parameters; `encoder_params` the encoder's
    (`Encoder.PARAMS`: ablations and recipe switches, recorded in the result); `device` is auto, cpu, cuda or
    cuda:N; `out` the folder for the result file (None: write nothing); `top_k` the ranking
    depth; `init_from` a checkpoint (`.pt`) or the result `.json` of a run that saved one;
    `compile` runs the model's forward through `torch.compile` (`narbench.train.compiled`: results
    agree with eager ones to rounding, not bit for bit; recorded and hashed); `resume` keeps epoch
    snapshots (`narbench.train.resume`) in `out`/.snapshots while a run that writes a result
    trains, so running a killed run again goes on from its last finished epoch (same numbers).
    """

    encoder: str = "gcn"
    splitter: str | None = None
    dataset: str = "nas"
    split: str = "standard"  # a split of the dataset (`dataset.splits`): real has `standard` and `unseen`
    protocol: str = DEFAULT_PROTOCOL  # which labels trainable encoders get (`narbench.train.protocol`)
    profile: str = "quick"
    seed: int = 0
    device: str = "auto"
    objective: str | None = None
    splitter_params: dict[str, Any] = field(default_factory=dict)
    encoder_params: dict[str, Any] = field(default_factory=dict)  # the encoder's `PARAMS` (ablations)
    out: str | None = "runs"
    progress: bool = True
    top_k: int = 100
    save_embeddings: bool = False  # also write `<run_id>.embeddings.npz` (query embeddings + labels)
    save_weights: bool = False  # also write `<run_id>.pt` (trained encoder weights)
    init_from: str | None = None  # start from weights: a `.pt` file or a result `.json` that saved them
    jobs: int | None = None  # CPU processes for data preparation (splitting graphs); None: all cores
    compile: bool = False  # torch.compile the model's forward for training and embedding
    resume: bool = True  # with `out`: snapshot every training epoch, and go on from one a killed run left
    epochs: int | None = None  # the graph-level stage's epochs instead of the profile's (hashed when set)
    curve: bool = False  # learning curve: train on the training graphs less a validation split (`narbench.harness.curve`)
    holdout: str = "family"  # with `curve`: the validation split's rule (`narbench.eval.holdout.HOLDOUT_RULES`; hashed when not family)


@dataclass
class Evaluation:
    """What `run` produced: the result, its file (if written) and the raw retrieval outputs."""

    result: RunResult
    path: Path | None
    query_embeddings: Any
    corpus_embeddings: Any
    ranked: np.ndarray
    per_query: dict[str, np.ndarray]


#: `RunConfig` fields that say where a run writes and how it reports, not what it computes
NOT_CONFIGURATION = ("out", "progress", "save_embeddings", "save_weights", "jobs", "resume")

#: folder of a run's epoch snapshots in its output folder (`narbench.train.resume`), one per configuration
SNAPSHOTS = ".snapshots"

#: seeds accepted: what numpy's and torch's generators take everywhere
MAX_SEED = 2**32 - 1


def check_config(cfg: RunConfig) -> None:
    """The numeric options are in range (`ConfigError` otherwise), checked before anything runs."""
    if not isinstance(cfg.seed, (int, np.integer)) or not 0 <= cfg.seed <= MAX_SEED:
        raise ConfigError(f"seed must be an integer from 0 to {MAX_SEED}, got {cfg.seed!r}")
    if cfg.jobs is not None and (not isinstance(cfg.jobs, (int, np.integer)) or cfg.jobs < 1):
        raise ConfigError(f"jobs must be a positive integer (or None: all cores), got {cfg.jobs!r}")
    if not isinstance(cfg.top_k, int) or cfg.top_k < 1:
        raise ConfigError(f"top_k must be a positive integer, got {cfg.top_k!r}")
    if cfg.epochs is not None and (isinstance(cfg.epochs, bool) or not isinstance(cfg.epochs, (int, np.integer))
                                   or cfg.epochs < 1):
        raise ConfigError(f"epochs must be a positive integer (or None: the profile's), got {cfg.epochs!r}")


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
    unknown = sorted(set(cfg.encoder_params) - set(getattr(encoder_cls, "PARAMS", {})))
    if unknown:
        known = ", ".join(getattr(encoder_cls, "PARAMS", {})) or "none"
        raise ConfigError(f"encoder {cfg.encoder!r} has no parameter {', '.join(map(repr, unknown))} (its parameters: {known})")
    splitter_cls = registry.load("splitter", splitter_name)
    try:
        splitter = splitter_cls(**cfg.splitter_params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad parameters for splitter {splitter_name!r}: {exc}") from exc
    return encoder_cls, splitter, splitter_name


def select(dataset: GraphDataset, profile, seed: int, split: str = "standard") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, corpus, query) indices for a profile: stratified subsets of the fixed split."""
    fam = np.array([g.family for g in dataset.graphs])
    split = dataset.get_split(split)
    train = stratified_subset(split.train, fam[split.train], profile.max_train, seed=seed)
    corpus, queries = evaluation_sides(fam, split, profile.max_corpus, profile.max_queries, seed)
    return train, corpus, queries


def make_labels(dataset: GraphDataset, protocol: Protocol, encoder_cls: type[Encoder], idx: np.ndarray) -> tuple[Labels, dict | None]:
    """The protocol's training labels for graphs `idx`, and their record for the result file."""
    ids = {"family": (dataset.family_ids(), len(dataset.families)),
           "coarse": (dataset.coarse_ids(), len(dataset.coarse_labels))}
    cl, ce = protocol.labels(encoder_cls)
    labels = Labels(ids[cl][0][idx], ids[ce][0][idx], ids[ce][1])
    return labels, ({"cl": cl, "ce": ce, "num_ce_classes": ids[ce][1]} if encoder_cls.trainable else None)


def run(cfg: RunConfig, *, dataset: GraphDataset | None = None, console: Console | None = None) -> Evaluation:
    """Run one benchmark configuration end to end and, if `cfg.out`, write its result file.

    Args:
        cfg: the run's options.
        dataset: an in-memory dataset to use instead of loading `cfg.dataset` by name.
        console: where progress bars go (default: stderr).
    Returns:
        An `Evaluation`: the `RunResult`, the path of its file (None without `cfg.out`), the
        embeddings, the rankings and the per-query scores.
    Raises:
        Before loading or training anything (`narbench.harness.preflight`): `ConfigError`,
        `PreflightError`, `registry.UnknownNameError`, `checkpoint.CheckpointError`, or the
        dataset's FileNotFoundError. After training: `EmbeddingError` when the encoder's corpus
        or query embeddings hold NaN or inf (nothing is scored or written). After the run:
        `ResultWriteError`, holding the evaluation, when the files cannot be written; an
        interrupted run writes nothing.
    """
    console = console or Console(stderr=True)
    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    setup = _preflight(cfg, dataset_given=dataset is not None, console=console)

    t = time.perf_counter()
    dataset, sides = _load_data(cfg, dataset, setup.profile)
    timings["data"] = time.perf_counter() - t

    graphs = dataset.graphs
    fam_ids = dataset.family_ids()
    relevance = relevance_labels(graphs, fam_ids)  # the family ids, or each graph's families where one has several
    _hold_out(cfg, sides, fam_ids, graphs)
    labels, label_record = make_labels(dataset, setup.protocol, setup.encoder_cls, sides.train)

    seed_everything(cfg.seed)
    commit = git_commit()
    snapshots = _snapshots(cfg, dataset, setup.profile, commit)
    trainer = Trainer(cfg.device, cfg.seed, progress=cfg.progress, console=console, jobs=cfg.jobs, compile=cfg.compile,
                      snapshots=snapshots)
    reset_peak_memory(trainer.device)
    encoder, init = _build_encoder(cfg, setup, dataset, labels)
    if sides.held_out is not None:
        trainer.epoch_eval = _curve_probe(cfg, encoder, trainer, graphs, relevance, sides)

    t = time.perf_counter()
    _train(cfg, encoder, trainer, [graphs[i] for i in sides.train], labels)
    timings["train"] = time.perf_counter() - t

    t = time.perf_counter()
    corpus_graphs = [graphs[i] for i in sides.corpus]
    corpus_emb = _embed(cfg, encoder, trainer, corpus_graphs, "corpus")
    query_graphs = [graphs[i] for i in sides.queries]
    query_emb = _embed(cfg, encoder, trainer, query_graphs, "query")
    timings["embed"] = time.perf_counter() - t

    t = time.perf_counter()
    ranked, _ = top_k_cosine(query_emb, corpus_emb, cfg.top_k, device=trainer.device,
                             tiebreak=tiebreak_keys(corpus_graphs))
    timings["retrieve"] = time.perf_counter() - t

    t = time.perf_counter()
    means, per_query = score_rankings(relevance[sides.queries], relevance[sides.corpus], ranked.numpy())
    timings["score"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start

    options = {k: v for k, v in asdict(cfg).items() if k not in NOT_CONFIGURATION}
    record = Record(label_record, init, snapshots, commit)
    result = make_result(options, setup, dataset, sides, encoder, trainer, record, means, timings)
    result.subsets = subset_metrics(subset_positions(dataset.get_split(cfg.split), sides.queries), per_query)
    if has_several(relevance):  # a graph with several families: the result says how relevance was judged
        result.dataset["relevance"] = RELEVANCE_RULE
    result.config_hash = result_hash(result)
    evaluation = Evaluation(result, None, query_emb, corpus_emb, ranked.numpy(), per_query)
    if cfg.out and distributed.is_main():  # torchrun: rank 0 writes
        evaluation.path = _write(cfg, evaluation, encoder, dataset, query_graphs)
    if snapshots is not None:  # the result is written: nothing is left to resume
        snapshots.clear()
    return evaluation


def _preflight(cfg: RunConfig, *, dataset_given: bool, console: Console) -> Setup:
    """Check the options and resolve them (encoder, splitter, profile, protocol), then everything
    `narbench.harness.preflight` can check before loading or training anything."""
    check_config(cfg)
    encoder_cls, splitter, splitter_name = resolve(cfg)
    if cfg.curve and not encoder_cls.trainable:
        raise ConfigError(f"encoder {cfg.encoder!r} is training-free: it has no epochs to draw a learning curve of")
    if cfg.holdout not in HOLDOUT_RULES:
        raise ConfigError(f"unknown hold-out {cfg.holdout!r}; known: {', '.join(HOLDOUT_RULES)}")
    if cfg.holdout != "family" and not cfg.curve:
        raise ConfigError(f"--holdout {cfg.holdout} chooses a learning curve's validation split: it goes with --curve")
    overrides = {"objective": cfg.objective} if cfg.objective else {}
    if cfg.epochs is not None:
        overrides["epochs"] = int(cfg.epochs)
    try:
        profile = get_profile(cfg.profile, **overrides)
        protocol = get_protocol(cfg.protocol)
    except (KeyError, ValueError) as exc:
        raise ConfigError(str(exc.args[0])) from exc
    preflight.check(cfg, dataset_given=dataset_given)
    if cfg.progress:
        jit.announce_first_compile(console, jit.modules_of(splitter_name != "none"))
    return Setup(encoder_cls, splitter, splitter_name, profile, protocol)


def _load_data(cfg: RunConfig, dataset: GraphDataset | None, profile) -> tuple[GraphDataset, Sides]:
    """The dataset (`cfg.dataset` loaded by name unless given) and the profile's subsets of its split."""
    if dataset is None:
        dataset = load_dataset(cfg.dataset)
    try:
        train_idx, corpus_idx, query_idx = select(dataset, profile, cfg.seed, cfg.split)
    except UnknownSplitError as exc:
        raise ConfigError(str(exc)) from exc
    if not len(query_idx):  # e.g. real's `novel`: whole families held out, for out-of-family detection
        raise ConfigError(f"split {cfg.split!r} of {dataset.name} has no query whose family is in its corpus: there "
                          "is nothing to score retrieval on (`novel` is measured by python -m benchmarks.search.novel)")
    return dataset, Sides(train_idx, corpus_idx, query_idx)


def _hold_out(cfg: RunConfig, sides: Sides, fam_ids: np.ndarray, graphs: list) -> None:
    """`--curve`: hold the validation queries out of the training graphs (`sides.train` becomes the pool
    it trains on; the validation queries are what the curve may choose on)."""
    if not cfg.curve:
        return
    try:
        sides.held_out = curves.hold_out(sides.train, fam_ids, np.array([g.source for g in graphs]), cfg.holdout)
    except ValueError as exc:
        raise ConfigError(f"--curve: {exc}") from exc
    sides.train = sides.held_out.pool


def _snapshots(cfg: RunConfig, dataset: GraphDataset, profile, commit: str | None) -> Snapshots | None:
    """The run's epoch snapshots (`narbench.train.resume`), when it resumes and writes a result (rank 0)."""
    if cfg.resume and cfg.out and distributed.is_main():
        key = snapshot_key(cfg, dataset, profile)
        return Snapshots(Path(cfg.out) / SNAPSHOTS / key, key, {"git_commit": commit, "host": platform.node()})
    return None


def _build_encoder(cfg: RunConfig, setup: Setup, dataset: GraphDataset, labels: Labels) -> tuple[Encoder, dict | None]:
    """The encoder, with its parameters set and (`--init-from`) its saved weights loaded, and their record."""
    with registry.plugin_call("encoder", cfg.encoder, "its constructor"):  # a plugin's error: one line naming it
        encoder = setup.encoder_cls(len(dataset.vocab), labels.num_ce_classes, setup.profile, setup.splitter)
        encoder.use_vocabulary(dataset.vocab)
    if cfg.encoder_params:
        try:
            encoder.set_params(cfg.encoder_params)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    init = checkpoint.load_into(encoder, cfg.encoder, dataset.vocab, cfg.init_from) if cfg.init_from else None
    return encoder, init


def _curve_probe(cfg: RunConfig, encoder: Encoder, trainer: Trainer, graphs: list, relevance: np.ndarray,
                 sides: Sides):
    """The learning curve's per-epoch probe (`Trainer.epoch_eval`), judged as the run is (`relevance`)."""
    def embed_now(gs):
        encoder.weights_changed()  # an encoder caching embeddings of a part of itself recomputes them
        return encoder.embed(trainer, gs)

    return curves.probe(embed_now, graphs, relevance, sides.held_out, sides.corpus, sides.queries, cfg.top_k)


def _train(cfg: RunConfig, encoder: Encoder, trainer: Trainer, graphs: list, labels: Labels) -> None:
    """Fit the encoder on the training graphs, then detach the learning curve's probe (if any)."""
    with registry.plugin_call("encoder", cfg.encoder, "fit()"):
        encoder.fit(trainer, graphs, labels)
    trainer.epoch_eval = None


def _embed(cfg: RunConfig, encoder: Encoder, trainer: Trainer, graphs: list, side: str):
    """The embeddings of the corpus or the queries (`side`); `EmbeddingError` when any is NaN or inf."""
    with registry.plugin_call("encoder", cfg.encoder, f"embed() of the {'queries' if side == 'query' else 'corpus'}"):
        emb = encoder.embed(trainer, graphs)
    check_finite(emb, cfg.encoder, side, graphs)
    return emb


def snapshot_key(cfg: RunConfig, dataset: GraphDataset, profile) -> str:
    """16 hex digits naming what decides a run's training: its options (not where it writes or how
    it reports), the dataset's content, the profile, and the narbench and torch versions."""
    import hashlib
    import json

    import torch

    options = {k: v for k, v in asdict(cfg).items() if k not in NOT_CONFIGURATION}
    if options.get("holdout") == "family":  # the default, as before the option existed: snapshots keep their key
        del options["holdout"]
    text = json.dumps({"run": options, "dataset": dataset.describe(cfg.split), "profile": asdict(profile),
                       "narbench": package_versions().get("narbench"), "torch": torch.__version__},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _write(cfg: RunConfig, ev: Evaluation, encoder: Encoder, dataset: GraphDataset, queries: list) -> Path:
    """Write the run's files into `cfg.out`: all of them, or (interrupted, failed) none."""
    out, run_id = Path(cfg.out), ev.result.run_id
    files = [out / f"{run_id}{SIDECAR_SUFFIX}", out / f"{run_id}.json"]
    try:  # side files first: the result file, written last, marks the run complete
        if cfg.save_weights:
            files.append(checkpoint.save(out / f"{run_id}{checkpoint.SUFFIX}", encoder, cfg.encoder, dataset.vocab,
                                         run_id))
        if cfg.save_embeddings:
            files.append(write_embeddings(out / f"{run_id}.embeddings.npz", ev.query_embeddings,
                                          [g.family for g in queries], [g.coarse for g in queries]))
        return ev.result.write(out, ev.per_query)
    except BaseException as exc:
        for path in files:
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ResultWriteError(ev, cfg.out, exc) from exc
        raise

