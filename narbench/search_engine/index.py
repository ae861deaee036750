"""The search index: every corpus graph's embedding plus what a hit shows, in one checksummed file.

`narbench search` must answer without loading the `real` dataset, so the index carries
everything a query needs: the encoder's name, parameters and (for a trained encoder) weights and
op vocabulary; one L2-normalised float16 embedding per graph; and per graph its name, family,
coarse label, source zoo, node and edge counts, op-type counts (for the "why close" line) and a
64-bit content-hash prefix (to tell an exact duplicate). Rows are stored in content-hash order,
so ranking ties break by graph content, as in `narbench.eval.retrieval.tiebreak_keys`.

File layout (`.nari`): the container of `narbench.data.store` (version 2, the shipped index's: a
checksum of the file, then zstd over the payload; version 1, older files: zstd with its frame checksum) around a
canonical payload of magic bytes, a JSON header and named numpy arrays; the sha256 is taken over
the payload, like `narbench.data.store`. On read, every per-graph array must have one row per name
and every label and op id must index its list (`_check_arrays`).
The shipped index (`narbench/data/`) is pinned by `SHIPPED`; switching the default encoder is
`narbench index build --encoder E --out narbench/data/index-real-E.nari` and the one-line
`SHIPPED = ...` change that command prints.

Compactness: embeddings wider than `IndexConfig.max_dim` go through a seeded Gaussian random
projection (stored in the file); `wl` instead hashes straight to 256 dimensions (its `dim`
parameter), which keeps its unseen-split NDCG@20 (0.8023 vs 0.8027 at 2048; docs/search.md), and
`graf-lda` keeps the at most 256 discriminant axes its validation split picks.

Weak hits: the index records `weak_below`, the cosine below which a hit is weak
(`narbench.search_engine.weak`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.data.ops import TORCH_CHECKED
from narbench.data.store import CorruptFileError, pack_sections, read_arrays, read_payload, unpack_head, write_payload
from narbench.search_engine.weak import WEAK_QUANTILE, WEAK_SAMPLE, model_group, weak_threshold  # noqa: F401 - re-exported

MAGIC = b"NARBENCH-INDEX\x001\x00"
FORMAT = 1
SUFFIX = ".nari"


@dataclass(frozen=True)
class ShippedIndex:
    """The index that ships as package data: its encoder and the sha256 of its payload."""

    encoder: str
    sha256: str
    dataset: str = "real-2.2"

    @property
    def filename(self) -> str:
        return f"index-{self.dataset}-{self.encoder}{SUFFIX}"


#: The default index (`narbench index build --encoder graf-lda` on `real` 2.2: `DEFAULT_PARAMS`'
#: holdout=cross-source, wl_rounds=3, 256-d, float16; issue 38, docs/search.md). The `wl` index it
#: replaced (sha256 a5cea0175d00...) and the one on real 2.1 (b8f3bdfa93f0...) left the package;
#: `narbench index build --encoder wl [--dataset real-2.1]` rebuilds them.
SHIPPED = ShippedIndex("graf-lda", "bdf825561df83ddcae913a9fe39c236026459b8d5a2ddf7de259961ac7daaf0c")

#: Encoder parameters an index uses unless told otherwise (compact, measured to stay faithful).
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"wl": {"dim": 256},
                                              "graf-lda": {"holdout": "cross-source", "wl_rounds": 3}}


class IndexFileError(CorruptFileError):
    """An index file that is missing, damaged, not pinned as expected, or unusable."""


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


def shipped_path() -> Path:
    return Path(str(resources.files("narbench"))) / "data" / SHIPPED.filename


def cache_path(encoder: str, dataset: str = "real") -> Path:
    """Where `narbench index build` writes an index by default (`$NARBENCH_CACHE/index/`)."""
    from narbench.core.cache import cache_dir

    return cache_dir() / "index" / f"index-{dataset}-{encoder}{SUFFIX}"


def hash64(graph: ArchGraph) -> int:
    """The first 64 bits of `ArchGraph.content_hash` (exact-duplicate check, tie-break order)."""
    return int(graph.content_hash()[:16], 16)


@dataclass
class SearchIndex:
    """A loaded index: header (encoder, vocabulary, names, labels) and per-graph arrays."""

    header: dict[str, Any]
    arrays: dict[str, np.ndarray]
    sha256: str = ""
    path: str = ""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ per-graph data
    def __len__(self) -> int:
        return len(self.header["names"])

    @property
    def encoder_name(self) -> str:
        return self.header["encoder"]["name"]

    @property
    def vocab(self) -> list[str]:
        return self.header["vocab"]

    @property
    def names(self) -> list[str]:
        return self.header["names"]

    @property
    def canonical_version(self) -> str | None:
        """The canonical rules the index's graphs follow, which a query's graph is rewritten by
        (`narbench.data.canonical`); None when its graphs are not canonical graphs. Where the header does
        not say (an index written before it did, or built from a dataset that does not record its rules):
        the rules whose vocabulary is the index's (2.2 adds `causal_attention`; of versions sharing one
        vocabulary, the oldest, which the header-less indexes were built with)."""
        from narbench.data.canonical import VERSIONS, canonical_vocabulary

        if self.header.get("canonical_version"):
            return self.header["canonical_version"]
        return next((v for v in VERSIONS if list(self.vocab) == list(canonical_vocabulary(v))), None)

    def row_of(self, name: str) -> int | None:
        rows = self._cache.get("rows")
        if rows is None:
            rows = self._cache["rows"] = {n: i for i, n in enumerate(self.names)}
        return rows.get(name)

    def record(self, row: int) -> dict[str, Any]:
        """Name, family, coarse label, source and size of the graph in `row`."""
        h, a = self.header, self.arrays
        return {"name": h["names"][row], "family": h["families"][a["family"][row]],
                "coarse": h["coarse_labels"][a["coarse"][row]], "source": h["sources"][a["source"][row]],
                "num_nodes": int(a["num_nodes"][row]), "num_edges": int(a["num_edges"][row])}

    def op_counts(self, row: int) -> dict[str, int]:
        """{op name: count} of the graph in `row`."""
        a = self.arrays
        lo, hi = a["opc_indptr"][row], a["opc_indptr"][row + 1]
        return {self.vocab[o]: int(c) for o, c in zip(a["opc_op"][lo:hi].tolist(), a["opc_count"][lo:hi].tolist())}

    def duplicates(self, graph: ArchGraph) -> list[int]:
        """Rows whose graph is identical to `graph` (same content hash; `graph` in this vocabulary)."""
        return np.flatnonzero(self.arrays["hash64"] == np.uint64(hash64(graph))).tolist()

    @property
    def embeddings(self) -> np.ndarray:
        """L2-normalised float32 embeddings [N, D] (converted once from the stored float16)."""
        emb = self._cache.get("emb")
        if emb is None:
            emb = self._cache["emb"] = np.ascontiguousarray(self.arrays["embeddings"], dtype=np.float32)
        return emb

    # ------------------------------------------------------------------ query side
    def encoder(self):
        """The index's encoder, rebuilt once (weights loaded, parameters set) for embedding queries."""
        enc = self._cache.get("encoder")
        if enc is None:
            enc = self._cache["encoder"] = _rebuild_encoder(self)
        return enc

    def embed(self, graphs: list[ArchGraph]) -> np.ndarray:
        """Embed graphs (in this index's vocabulary) as the corpus was: projected, L2-normalised."""
        import torch

        from narbench.eval.retrieval import check_finite
        from narbench.train.trainer import Trainer

        trainer = self._cache.get("trainer")
        if trainer is None:
            trainer = self._cache["trainer"] = Trainer("cpu", 0, progress=False)
        from narbench.core.registry import plugin_call

        with torch.no_grad(), plugin_call("encoder", self.encoder_name, "embed() of the query"):
            emb = self.encoder().embed(trainer, graphs)
        check_finite(emb, self.encoder_name, "query", graphs)  # NaN would score every hit as NaN
        return _finish(_numpy(emb), self.arrays.get("projection"))

    @property
    def weak_below(self) -> float | None:
        """Hits with a cosine below this are weak (`weak_threshold`); None: this index has none."""
        if "weak_below" in self.header:
            return self.header["weak_below"]["cosine"]
        return None

    @property
    def pinned(self) -> bool:
        """Whether this is the shipped index (its payload's sha256 is `SHIPPED`'s). Any other index, one a
        user built or was handed, is unpinned: nothing vouches for its labels (a file with two family
        names swapped and its checksum recomputed reads as valid), and every output says so."""
        return bool(self.sha256) and self.sha256 == SHIPPED.sha256

    def describe(self) -> str:
        h = self.header
        params = ", ".join(f"{k}={v}" for k, v in h["encoder"]["params"].items())
        pin = ("" if self.pinned else f", unpinned (sha256 {self.sha256[:12]}…, not the shipped index)" if self.sha256
               else ", unpinned (built in this process, not the shipped index)")
        return (f"{self.encoder_name}{f' ({params})' if params else ''} on {h['dataset']['name']} "
                f"{h['dataset']['version']}, {len(self):,} graphs, {self.arrays['embeddings'].shape[1]}-d{pin}")


# ---------------------------------------------------------------------- building


def _numpy(emb) -> np.ndarray:
    """An encoder's embeddings (a tensor, or an array) as float32 numpy."""
    return emb.detach().float().cpu().numpy() if hasattr(emb, "detach") else np.asarray(emb, dtype=np.float32)


def _finish(emb: np.ndarray, projection: np.ndarray | None) -> np.ndarray:
    emb = np.asarray(emb, dtype=np.float32)
    if projection is not None:
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        emb = emb @ projection.astype(np.float32)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _apply_params(encoder, params: dict[str, Any]) -> None:
    """Set encoder attributes (`--param`): only existing plain values (a number, a string, a flag, None),
    each to a value of its type (an int where a float is); anything else is a `ValueError` naming it."""
    plain = (bool, int, float, str)
    for key, value in params.items():
        current = getattr(encoder, key, None) if not key.startswith("_") else None
        if key.startswith("_") or not hasattr(encoder, key) or not (current is None or isinstance(current, plain)):
            raise ValueError(f"encoder {encoder.name!r} has no parameter {key!r}")
        same = type(value) is type(current) or (type(current) is float and type(value) is int)
        if current is not None and not same:
            raise ValueError(f"encoder {encoder.name!r}: parameter {key!r} takes {_KINDS[type(current)]} "
                             f"(default {current!r}), got {value!r}")
        setattr(encoder, key, value)


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
    _apply_params(encoder, params)
    with plugin_call("encoder", cfg.encoder, "fit()"):
        encoder.fit(trainer, [graphs[i] for i in train], labels)
    with plugin_call("encoder", cfg.encoder, "embed() of the corpus"):
        raw = encoder.embed(trainer, graphs)
    check_finite(raw, cfg.encoder, "corpus", graphs)  # NaN rows, a wrong shape or 0 dimensions: no index of them
    raw = _numpy(raw)
    projection = None
    if raw.shape[1] > cfg.max_dim:
        rng = np.random.default_rng(cfg.seed)
        projection = (rng.standard_normal((raw.shape[1], cfg.max_dim)) / np.sqrt(cfg.max_dim)).astype(np.float32)
    emb = _finish(raw, projection)
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


def _rebuild_encoder(index: SearchIndex):
    import torch

    from narbench.core import registry
    from narbench.train.profiles import get_profile

    enc = index.header["encoder"]
    try:
        encoder_cls = registry.load("encoder", enc["name"])
        splitter = None
        if enc["splitter"]["name"] != "none" or encoder_cls.uses_splitter:
            splitter = registry.load("splitter", enc["splitter"]["name"])(**enc["splitter"]["params"])
        encoder = encoder_cls(enc["num_ops"], enc["num_classes"], get_profile(index.header["profile"]), splitter)
        _apply_params(encoder, enc["params"])
        if enc["weights"]:
            state = {k: torch.from_numpy(np.array(index.arrays[f"weight:{k}"])) for k in enc["weights"]}
            encoder.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - any failure means this index cannot embed queries here
        raise IndexFileError(f"index {index.path or '(in memory)'}: cannot rebuild its encoder {enc['name']!r} "
                             f"({type(exc).__name__}: {exc}); rebuild the index with "
                             f"`narbench index build --encoder {enc['name']}`") from exc
    return encoder.eval()


# ---------------------------------------------------------------------- file format


def encode_index(index: SearchIndex) -> bytes:
    """The canonical uncompressed payload (what the sha256 is taken over)."""
    header = {**index.header, "arrays": sorted(index.arrays)}
    return pack_sections(MAGIC, header, (index.arrays[key] for key in header["arrays"]))


def write_index(index: SearchIndex, path: str | Path, *, level: int = 19) -> str:
    """Write the index atomically (`narbench.data.store.write_payload`); returns the payload's sha256."""
    return write_payload(path, encode_index(index), level=level)


def read_index(path: str | Path, expected_sha256: str | None = None) -> SearchIndex:
    """Read an index file; `IndexFileError` (naming the fix) if it is missing, damaged or unexpected."""
    path = Path(path)
    fix = "rebuild it with `narbench index build`" if expected_sha256 is None else \
        "reinstall narbench to restore the shipped index, or rebuild it with `narbench index build`"
    try:
        payload, digest = read_payload(path, expected_sha256, kind="index")
    except FileNotFoundError as exc:
        raise IndexFileError(f"index file not found: {path}; {fix}") from exc
    except CorruptFileError as exc:
        raise IndexFileError(f"index {path} is damaged ({exc}); {fix}") from exc
    try:
        header, buf = unpack_head(payload, MAGIC, "index")
        if header.get("format") != FORMAT:
            raise ValueError(f"format {header.get('format')!r}, this narbench reads {FORMAT}")
        arrays = read_arrays(buf, header.pop("arrays"))
        _check_arrays(header, arrays)
    except Exception as exc:  # noqa: BLE001 - numpy's and json's parsers raise many types on damaged bytes
        raise IndexFileError(f"index {path} is not a readable narbench index ({type(exc).__name__}: {exc}); "
                             f"{fix}") from exc
    return SearchIndex(header, arrays, sha256=digest, path=str(path))


def _check_arrays(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """`ValueError` naming the first inconsistency: rows per graph, label and op ids in range."""
    n = len(header["names"])
    shape = arrays["embeddings"].shape
    if len(shape) != 2 or shape[1] < 1:  # 0 dimensions: every cosine 0, arbitrary hits
        raise ValueError(f"its embeddings have shape {list(shape)}: an index needs one row per graph of at least "
                         "one dimension")
    for key in ("embeddings", "family", "coarse", "source", "num_nodes", "num_edges", "hash64"):
        if len(arrays[key]) != n:
            raise ValueError(f"array {key!r} has {len(arrays[key])} rows for {n} graph names")
    for key, labels in (("family", "families"), ("coarse", "coarse_labels"), ("source", "sources")):
        if n and int(arrays[key].max()) >= len(header[labels]):
            raise ValueError(f"array {key!r} holds id {int(arrays[key].max())} but there are {len(header[labels])} {labels}")
    indptr, ops = arrays["opc_indptr"].astype(np.int64), arrays["opc_op"]
    if len(indptr) != n + 1 or indptr[0] != 0 or (np.diff(indptr) < 0).any() or indptr[-1] != len(ops) \
            or len(arrays["opc_count"]) != len(ops):
        raise ValueError("the op-count arrays are inconsistent (opc_indptr does not index opc_op)")
    if len(ops) and int(ops.max()) >= len(header["vocab"]):
        raise ValueError(f"op id {int(ops.max())} outside the vocabulary of {len(header['vocab'])} ops")


@functools.lru_cache(maxsize=4)
def _load_cached(path: str, expected: str | None, mtime: float) -> SearchIndex:
    return read_index(path, expected)


def load_index(encoder: str | None = None, path: str | Path | None = None) -> SearchIndex:
    """The index to search, read once per process.

    `path`: that file. Otherwise the shipped index (sha256-pinned) when `encoder` is None or
    its encoder, else the one `narbench index build --encoder ENCODER` wrote to the cache.
    """
    if path is None and encoder in (None, SHIPPED.encoder):
        path, expected = shipped_path(), SHIPPED.sha256
    elif path is None:
        path, expected = cache_path(encoder), None
        if not path.is_file():
            from narbench.core.registry import UnknownNameError, names

            if encoder not in names("encoder"):  # a typo: say so, not how to build an index for it
                raise IndexFileError(str(UnknownNameError("encoder", encoder, names("encoder"))))
            raise IndexFileError(f"no index for encoder {encoder!r} (looked for {path}); build it with "
                                 f"`narbench index build --encoder {encoder}`")
    else:
        expected = None
    path = Path(path)
    if path.is_dir():
        raise IndexFileError(f"index {path} is a folder, not an index file: give the {SUFFIX} file that "
                             "`narbench index build --out` wrote")
    mtime = path.stat().st_mtime if path.is_file() else 0.0
    index = _load_cached(str(path), expected, mtime)
    if encoder is not None and index.encoder_name != encoder:
        raise IndexFileError(f"index {path} was built with encoder {index.encoder_name!r}, not {encoder!r}; "
                             f"drop --encoder or build one with `narbench index build --encoder {encoder}`")
    return index
