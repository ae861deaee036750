"""Building a search index (`narbench index build`): fit an encoder on a whole dataset, embed every
graph, and record what a hit shows (`build_index`; written by `narbench.search_engine.index_file.write_index`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from narbench.data.ops import TORCH_CHECKED
from narbench.search_engine.index import SHIPPED, SearchIndex, apply_params, as_numpy, hash64, normalised
from narbench.search_engine.index_file import FORMAT
from narbench.search_engine.weak import WEAK_QUANTILE, WEAK_SAMPLE, model_group, weak_threshold


#: Encoder parameters an index uses unless told otherwise (compact, measured to stay faithful).
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"wl": {"dim": 256},
                                              "graf-lda": {"holdout": "cross-source", "wl_rounds": 3}}


@dataclass(frozen=True)
class IndexConfig:
    """Options of `narbench index build`: which encoder, trained how, on which dataset."""

    encoder: str = SHIPPED.encoder
    dataset: str = "real"
    profile: str = "quick"
    protocol: str = "family"
    seed: int = 0
    device: str = "auto"
    params: dict[str, Any] | None = None  # encoder attributes to set (None: DEFAULT_PARAMS)
    max_dim: int = 256  # wider embeddings are randomly projected to this many dimensions
    progress: bool = True


def build_index(cfg: IndexConfig, *, dataset=None, console=None) -> SearchIndex:
    """Fit `cfg.encoder` on the whole dataset (the profile's training budget, the protocol's
    labels), embed every graph and return the index (write it with `write_index`).

    The header records no time or machine, so the same encoder and data give the same sha256.
    """
    from narbench.data.dataset import load_dataset, stratified_subset
    from narbench.eval.retrieval import check_finite
    from narbench.train.profiles import get_profile
    from narbench.train.protocol import get_protocol
    from narbench.harness.runner import RunConfig, make_labels, resolve
    from narbench.train.trainer import Trainer, seed_everything

    from narbench.core.registry import plugin_call
    from narbench.harness.preflight import check_device

    if isinstance(cfg.max_dim, bool) or not isinstance(cfg.max_dim, int) or cfg.max_dim < 1:
        raise ValueError(f"max_dim must be a positive integer (the index's dimensions), got {cfg.max_dim!r}")
    encoder_cls, splitter, splitter_name = resolve(RunConfig(encoder=cfg.encoder, dataset=cfg.dataset))
    profile, protocol = get_profile(cfg.profile), get_protocol(cfg.protocol)
    check_device(cfg.device)  # before the data is loaded: `--device cuda` on a CPU machine is one line
    ds = dataset if dataset is not None else load_dataset(cfg.dataset)
    graphs = ds.core_graphs  # not real's cross-implementation queries (`GraphDataset.query_only`)
    fam = np.array([g.family for g in graphs])
    train = stratified_subset(np.arange(len(graphs)), fam, profile.max_train, seed=cfg.seed)
    labels, _ = make_labels(ds, protocol, encoder_cls, train)
    seed_everything(cfg.seed)
    trainer = Trainer(cfg.device, cfg.seed, progress=cfg.progress, console=console)
    with plugin_call("encoder", cfg.encoder, "its constructor"):  # a plugin's error: one line naming it
        encoder = encoder_cls(len(ds.vocab), labels.num_ce_classes, profile, splitter)
    params = dict(DEFAULT_PARAMS.get(cfg.encoder, {}) if cfg.params is None else cfg.params)
    apply_params(encoder, params)
    with plugin_call("encoder", cfg.encoder, "fit()"):
        encoder.fit(trainer, [graphs[i] for i in train], labels)
    with plugin_call("encoder", cfg.encoder, "embed() of the corpus"):
        raw = encoder.embed(trainer, graphs)
    check_finite(raw, cfg.encoder, "corpus", graphs)  # NaN rows, a wrong shape or 0 dimensions: no index of them
    raw = as_numpy(raw)
    projection = None
    if raw.shape[1] > cfg.max_dim:
        rng = np.random.default_rng(cfg.seed)
        projection = (rng.standard_normal((raw.shape[1], cfg.max_dim)) / np.sqrt(cfg.max_dim)).astype(np.float32)
    emb = normalised(raw, projection)
    weak = weak_threshold(emb, [model_group(g) for g in graphs], seed=cfg.seed)

    hashes = np.array([hash64(g) for g in graphs], dtype=np.uint64)
    order = np.lexsort((np.array([g.name for g in graphs]), hashes))  # content order, then name
    gs = [graphs[i] for i in order]
    families, coarse, sources = ds.families, ds.coarse_labels, sorted({g.source for g in graphs})
    ops = ds.meta.get("ops")  # real's: the canonical op table ({"version": ...}); nas's: its op list
    canonical = ops if isinstance(ops, dict) else {}
    counts = [np.unique(g.ops, return_counts=True) for g in gs]
    arrays: dict[str, np.ndarray] = {
        "embeddings": emb[order].astype(np.float16),
        "family": np.array([families.index(g.family) for g in gs], dtype=np.uint16),
        "coarse": np.array([coarse.index(g.coarse) for g in gs], dtype=np.uint8),
        "source": np.array([sources.index(g.source) for g in gs], dtype=np.uint8),
        "num_nodes": np.array([g.num_nodes for g in gs], dtype=np.int32),
        "num_edges": np.array([g.num_edges for g in gs], dtype=np.int32),
        "hash64": hashes[order],
        "opc_indptr": np.concatenate([[0], np.cumsum([len(o) for o, _ in counts])]).astype(np.int32),
        "opc_op": np.concatenate([o for o, _ in counts]).astype(np.uint16),
        "opc_count": np.concatenate([c for _, c in counts]).astype(np.int32),
    }
    if projection is not None:
        arrays["projection"] = projection
    # trained weights, and what a training-free encoder fitted on the corpus (`Encoder.FITTED`: an idf,
    # a standardisation, a choice): without them the index could not embed a query
    weights = {key: value.detach().cpu().numpy() for key, value in encoder.state_dict().items()}
    arrays.update({f"weight:{k}": v for k, v in weights.items()})
    header = {
        "format": FORMAT,
        "encoder": {"name": cfg.encoder, "params": params, "trainable": bool(encoder_cls.trainable),
                    "num_ops": len(ds.vocab), "num_classes": labels.num_ce_classes,
                    "splitter": {"name": splitter_name, "params": splitter.params()},
                    "weights": sorted(weights), "config": encoder.config()},
        "profile": cfg.profile, "protocol": cfg.protocol if encoder_cls.trainable else None, "seed": cfg.seed,
        "trained_on": int(len(train)) if encoder_cls.trainable else 0,
        "dataset": {"name": ds.name, "version": ds.version, "sha256": ds.sha256, "num_graphs": len(graphs)},
        "canonical_version": canonical.get("version"),
        "vocab": list(ds.vocab), "families": families, "coarse_labels": coarse, "sources": sources,
        "names": [g.name for g in gs],
        "torch_checked": list(TORCH_CHECKED) if canonical else None,
        "projection": None if projection is None else {"kind": "gaussian", "seed": cfg.seed, "from": raw.shape[1]},
        "weak_below": {"cosine": weak, "quantile": WEAK_QUANTILE, "sample": min(WEAK_SAMPLE, len(graphs)),
                       "groups": "family/model"},
    }
    from narbench import __version__

    header["narbench_version"] = __version__
    return SearchIndex(header, arrays)

