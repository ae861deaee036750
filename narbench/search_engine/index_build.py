"""Building a search index (`narbench index build`): fit an encoder on a whole dataset, embed every
graph, and record what a hit shows (`build_index`; written by `narbench.search_engine.index_file.write_index`).
`fit_encoder` and `assemble` are its two halves (the index choice, `benchmarks/search/choose_index.py`, fits
on a validation pool and assembles several indexes from one fit); `fuse_*` parameters ask for an index fused
with WL (`narbench.search_engine.fusion`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from narbench.data.mapping import corpus_rules, read_newest
from narbench.data.ops import TORCH_CHECKED
from narbench.search_engine.index import SHIPPED, SearchIndex, apply_params, as_numpy, hash64, normalised
from narbench.search_engine.fusion import Fusion, FusedEncoder, cut, split_params
from narbench.search_engine.index_file import FORMAT
from narbench.search_engine.weak import WEAK_QUANTILE, WEAK_SAMPLE, model_group, weak_threshold


#: Encoder parameters an index uses unless told otherwise (compact, measured to stay faithful). graf-lda's: chosen
#: on validation by benchmarks/search/choose_index.py; since 2026-11-29 (its rule averaging a `wildval` side too)
#: unfused, WL read in op roles, a family's sources treated as nuisance with g = 256; before it, fused with WL in
#: op roles at share 0.2 (`fuse_wl=0.2, fuse_wl_alphabet=roles`, without `sources`/`nuisance`)
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "wl": {"dim": 256},
    "graf-lda": {"holdout": "cross-source", "wl_rounds": 3, "wl_alphabet": "roles", "sources": "nuisance",
                 "nuisance": 256.0, "spellings": 32.0, "outside": 64.0}}


@dataclass(frozen=True)
class IndexConfig:
    """Options of `narbench index build`: which encoder, trained how, on which dataset."""

    encoder: str = SHIPPED.encoder
    dataset: str = "real"
    profile: str = "quick"
    protocol: str = "family"
    seed: int = 0
    device: str = "auto"
    params: dict[str, Any] | None = None  # encoder attributes to set, and fuse_* (None: DEFAULT_PARAMS)
    rules: str | None = None  # read the corpus under passes up to these canonical rules (None: all, `newest_corpus`)
    max_dim: int = 256  # wider embeddings are randomly projected to this many dimensions
    progress: bool = True


@dataclass
class Fitted:
    """An encoder fitted for an index (`fit_encoder`): what embeds the corpus and a query (`embedder`: the
    encoder, or `FusedEncoder` around it), and what the header records."""

    encoder: Any
    encoder_cls: type
    splitter_name: str
    splitter: Any
    params: dict[str, Any]
    fusion: Fusion | None
    labels: Any
    train: np.ndarray
    trainer: Any
    embedder: Any


def build_index(cfg: IndexConfig, *, dataset=None, console=None) -> SearchIndex:
    """Fit `cfg.encoder` on the whole dataset (the profile's training budget, the protocol's
    labels), embed every graph and return the index (write it with `write_index`).

    The header records no time or machine, so the same encoder and data give the same sha256.
    """
    from narbench.core.registry import plugin_call
    from narbench.data.dataset import load_dataset
    from narbench.harness.preflight import check_device
    from narbench.harness.runner import RunConfig, resolve

    if isinstance(cfg.max_dim, bool) or not isinstance(cfg.max_dim, int) or cfg.max_dim < 1:
        raise ValueError(f"max_dim must be a positive integer (the index's dimensions), got {cfg.max_dim!r}")
    resolve(RunConfig(encoder=cfg.encoder, dataset=cfg.dataset))  # an unknown name, before the data is loaded
    index_params(cfg)  # a bad fusion too
    check_device(cfg.device)  # before the data is loaded: `--device cuda` on a CPU machine is one line
    ds = newest_corpus(dataset if dataset is not None else load_dataset(cfg.dataset), cfg.rules)
    fitted = fit_encoder(cfg, ds, console=console)
    with plugin_call("encoder", cfg.encoder, "embed() of the corpus"):
        raw = fitted.embedder.embed(fitted.trainer, ds.core_graphs)
    index = assemble(cfg, ds, fitted, raw)
    from narbench.search_engine.outside_fit import attach

    # the out-of-family score, fitted on the `novel` split's validation families
    attach(cfg, ds, index, build_index, scatter_index)
    return index


def scatter_index(cfg: IndexConfig, ds, outside_sets: tuple[str, ...]) -> SearchIndex:
    """An index built as `cfg` asks on `ds` (`newest_corpus`'s) with graf-lda's `outside` scatter from `outside_sets`
    only and no out-of-family score: a fold of `outside_fit.cross_fitted`, whose models it never read."""
    fitted = fit_encoder(cfg, ds, outside_sets=outside_sets)
    return assemble(cfg, ds, fitted, fitted.embedder.embed(fitted.trainer, ds.core_graphs))


def newest_corpus(ds, upto: str | None = None):
    """`ds` with its graphs read under the newest canonical rules that are passes over canonical graphs
    (`narbench.data.mapping.read_newest`): the index reads its corpus as it reads a query's graph (real 2.3's graphs
    under 2.6), so a rule of such a pass reaches search without a new dataset; the dataset itself is unchanged. The
    copy's op table records the rules its graphs now follow (`version`) and those the dataset's follow (`read_from`).
    `upto`: the passes up to these rules only (`IndexConfig.rules`: an index of earlier rules, to compare)."""
    version = ds.canonical_version
    graphs, newest = read_newest(ds.graphs, ds.vocab, version, upto)
    if newest == version:
        return ds
    ops = ds.meta["ops"]
    read = {**ops, "version": newest, "read_from": version}
    if "rules_sha256" in ops:
        from narbench.data.canonical_rules import rules_sha256

        read["rules_sha256"] = rules_sha256(newest)
    return replace(ds, graphs=graphs, meta={**ds.meta, "ops": read})


def fit_encoder(cfg: IndexConfig, ds, train: np.ndarray | None = None, *, console=None,
                outside_sets: tuple[str, ...] | None = None) -> Fitted:
    """`cfg.encoder` fitted on `ds.core_graphs[train]` (default: the profile's stratified subset of them,
    seed `cfg.seed`), with the index's parameters (`DEFAULT_PARAMS` unless `cfg.params`; `fuse_*` ask for a
    fusion with WL, `narbench.search_engine.fusion`). An encoder that reads outside models (`use_outside`:
    `graf-lda` with `outside` > 0) gets the fitting models of `outside_sets` (default: the validation sets the
    out-of-family score is fitted on, `outside_fit.REFIT_SETS`) in the rules the index reads its corpus by."""
    from narbench.core.registry import plugin_call
    from narbench.data.dataset import stratified_subset
    from narbench.harness.runner import RunConfig, make_labels, resolve
    from narbench.train.profiles import get_profile
    from narbench.train.protocol import get_protocol
    from narbench.train.trainer import Trainer, seed_everything

    encoder_cls, splitter, splitter_name = resolve(RunConfig(encoder=cfg.encoder, dataset=cfg.dataset))
    profile, protocol = get_profile(cfg.profile), get_protocol(cfg.protocol)
    params, fusion = index_params(cfg)
    graphs = ds.core_graphs  # not real's cross-implementation queries (`GraphDataset.query_only`)
    if train is None:
        fam = np.array([g.family for g in graphs])
        train = stratified_subset(np.arange(len(graphs)), fam, profile.max_train, seed=cfg.seed)
    labels, _ = make_labels(ds, protocol, encoder_cls, train)
    seed_everything(cfg.seed)
    trainer = Trainer(cfg.device, cfg.seed, progress=cfg.progress, console=console)
    with plugin_call("encoder", cfg.encoder, "its constructor"):  # a plugin's error: one line naming it
        encoder = encoder_cls(len(ds.vocab), labels.num_ce_classes, profile, splitter)
    apply_params(encoder, params)
    encoder.use_vocabulary(ds.vocab)  # as the runner gives it: an encoder may read ops by name
    if getattr(encoder, "outside", 0) and hasattr(encoder, "use_outside"):
        params = _give_outside(cfg, ds, encoder, params, outside_sets)
    with plugin_call("encoder", cfg.encoder, "fit()"):
        encoder.fit(trainer, [graphs[i] for i in train], labels)
    embedder = encoder
    if fusion is not None:
        cut(encoder, cfg.encoder, fusion)
        embedder = FusedEncoder(encoder, fusion, ds.vocab, profile)
    return Fitted(encoder, encoder_cls, splitter_name, splitter, params, fusion, labels, np.asarray(train), trainer,
                  embedder)


def _give_outside(cfg: IndexConfig, ds, encoder, params: dict[str, Any],
                  outside_sets: tuple[str, ...] | None) -> dict[str, Any]:
    """Give `encoder` (`outside` > 0) the fitting models of `outside_sets` (default `outside_fit.REFIT_SETS`) read
    under the corpus's rules; the parameters the index records. Where the dataset has none of them in its vocabulary
    (any dataset but real 2.3) or the labels are not families: an error when the parameters were asked for
    (`cfg.params`), and with `DEFAULT_PARAMS` a warning and `outside` off, so the defaults build an index of any
    dataset, recorded without it (what was built)."""
    import warnings

    from narbench.search_engine.outside_fit import REFIT_SETS
    from narbench.search_engine.outside_models import fitting_models

    sets = REFIT_SETS if outside_sets is None else tuple(outside_sets)
    graphs_out: list = []
    if cfg.protocol != "family":
        why = f"the outside models' families are labels of protocol 'family', not {cfg.protocol!r}"
    else:
        ops = ds.meta.get("ops")
        rules = corpus_rules(ops.get("version") if isinstance(ops, dict) else None, ds.core_graphs, ds.vocab)
        graphs_out, classes = fitting_models(ds, sets, rules)
        why = (f"encoder {cfg.encoder!r} with outside={encoder.outside:g} reads the fitting models of validation sets, "
               f"and dataset {ds.name!r} has none of {', '.join(sets) or 'no sets'} in its vocabulary")
    if graphs_out:
        encoder.use_outside(graphs_out, classes, sets=sets)
        return params
    if cfg.params is not None or outside_sets is not None:
        raise ValueError(why)
    warnings.warn(f"{why}: the default outside={encoder.outside:g} is off for this index", stacklevel=3)
    encoder.outside = 0.0
    return {k: v for k, v in params.items() if k != "outside"}


def index_params(cfg: IndexConfig) -> tuple[dict[str, Any], Fusion | None]:
    """(the encoder's parameters, the fusion asked for or None): `cfg.params`, else `DEFAULT_PARAMS`'."""
    params, fusion = split_params(cfg.encoder, dict(DEFAULT_PARAMS.get(cfg.encoder, {}) if cfg.params is None
                                                     else cfg.params))
    if fusion is not None and fusion.width > cfg.max_dim:  # a projection would blur the weighted cosines
        raise ValueError(f"a fused index is never projected: fuse_dims + fuse_wl_dim ({fusion.width}) must be at "
                         f"most max_dim ({cfg.max_dim})")
    return params, fusion


#: what `fit_record` keeps of an encoder's choice of setting (no time: the same data give the same index bytes)
FIT_KEYS = ("picked", "metric", "scores", "validation_queries", "pool", "fraction", "seed", "holdout", "skipped")


def fit_record(encoder) -> dict[str, Any] | None:
    """What an encoder chose when fitted on the corpus, for the header: graf-lda's setting and every setting's score
    on its inner hold-out (`stats["selection"]`, without its seconds); None for an encoder that records no choice."""
    stats = getattr(encoder, "stats", None)
    selection = stats.get("selection") if isinstance(stats, dict) else None
    if not isinstance(selection, dict):
        return None
    import json

    out = {}
    for key in FIT_KEYS:
        try:  # a plugin's record may hold what JSON cannot: that key is left out, not the index
            out[key] = json.loads(json.dumps(selection[key], allow_nan=False))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def assemble(cfg: IndexConfig, ds, fitted: Fitted, raw) -> SearchIndex:
    """The index of `ds.core_graphs` from their embeddings `raw` by `fitted` (rows in graph order)."""
    from narbench.eval.retrieval import check_finite

    graphs, encoder, encoder_cls, labels = ds.core_graphs, fitted.encoder, fitted.encoder_cls, fitted.labels
    splitter, splitter_name, params, train = fitted.splitter, fitted.splitter_name, fitted.params, fitted.train
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
                    "weights": sorted(weights), "config": encoder.config(), "fit": fit_record(encoder)},
        "profile": cfg.profile, "protocol": cfg.protocol if encoder_cls.trainable else None, "seed": cfg.seed,
        "trained_on": int(len(train)) if encoder_cls.trainable else 0,
        "dataset": {"name": ds.name, "version": ds.version, "sha256": ds.sha256, "num_graphs": len(graphs)},
        "canonical_version": corpus_rules(canonical.get("version"), graphs, ds.vocab),
        "vocab": list(ds.vocab), "families": families, "coarse_labels": coarse, "sources": sources,
        "names": [g.name for g in gs],
        "torch_checked": list(TORCH_CHECKED) if canonical else None,
        "projection": None if projection is None else {"kind": "gaussian", "seed": cfg.seed, "from": raw.shape[1]},
        "weak_below": {"cosine": weak, "quantile": WEAK_QUANTILE, "sample": min(WEAK_SAMPLE, len(graphs)),
                       "groups": "family/model"},
    }
    if fitted.fusion is not None:
        header["fusion"] = fitted.fusion.record()
    more = [g.families[1:] for g in gs]  # graphs that several families share keep them all (real 2.3 on)
    if any(more):
        header["more_families"] = sorted({f for m in more for f in m})
        arrays["more_indptr"] = np.concatenate([[0], np.cumsum([len(m) for m in more])]).astype(np.int32)
        arrays["more_family"] = np.array([header["more_families"].index(f) for m in more for f in m], dtype=np.uint16)
    from narbench import __version__

    header["narbench_version"] = __version__
    return SearchIndex(header, arrays)

