"""The search index: every corpus graph's embedding plus what a hit shows (`SearchIndex`).

`narbench search` must answer without loading the `real` dataset, so the index carries
everything a query needs: the encoder's name, parameters and (for a trained encoder) weights and
op vocabulary; one L2-normalised float16 embedding per graph; and per graph its name, family,
coarse label, source zoo, node and edge counts, op-type counts (for the "why close" line) and a
64-bit content-hash prefix (to tell an exact duplicate). Rows are stored in content-hash order,
so ranking ties break by graph content, as in `narbench.eval.retrieval.tiebreak_keys`.

An index is built by `narbench.search_engine.index_build` and kept in one checksummed file
(`narbench.search_engine.index_file`: the format, `load_index`). The shipped index
(`narbench/data/`) is pinned by `SHIPPED`; switching the default encoder is
`narbench index build --encoder E --out narbench/data/index-real-E.nari` and the one-line
`SHIPPED = ...` change that command prints.

Compactness: embeddings wider than `index_build.IndexConfig.max_dim` go through a seeded Gaussian random
projection (stored in the file); `wl` instead hashes straight to 256 dimensions (its `dim`
parameter), which keeps its unseen-split NDCG@20 (0.8023 vs 0.8027 at 2048; docs/search.md), and
`graf-lda` keeps the at most 256 discriminant axes its validation split picks.

Weak hits: the index records `weak_below`, the cosine below which a hit is weak
(`narbench.search_engine.weak`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.data.store import CorruptFileError

SUFFIX = ".nari"


@dataclass(frozen=True)
class ShippedIndex:
    """The index that ships as package data: its encoder and the sha256 of its payload."""

    encoder: str
    sha256: str
    dataset: str = "real-2.3"
    fused: str = ""  # the floor the index is fused with (`narbench.search_engine.fusion`), named in the file's name

    @property
    def filename(self) -> str:
        return f"index-{self.dataset}-{self.encoder}{'+' + self.fused if self.fused else ''}{SUFFIX}"


#: The default index (`narbench index build --encoder graf-lda` on `real` 2.3: `index_build.DEFAULT_PARAMS`'
#: holdout=cross-source, wl_rounds=3 with its WL block read in op roles, a family's sources as nuisance (g = 256),
#: since session 83 one design's spelling variants as nuisance too (spellings=32, decided by its carry rule on
#: `wildval30`: docs/search.md "Spellings as nuisance"; f63da0bcd9d9... before it, whose arrays differ), since
#: session 87 the validation sets' fitting models as nuisance too (outside=64, its scatter and its out-of-family score
#: from wildval 1-37, decided by its carry rule on `wildval37`: "Outside implementations as nuisance"; 9d8dbdc2988d...
#: before it, whose arrays differ),
#: unfused, 256-d, float16, corpus and queries read by canonical 2.16 (docs/search.md "The index": 2.16's rule reads raw
#: names, so its arrays are 9448f6d66b38...'s, read by 2.15, and its out-of-family score was refitted on `wildval` 1-4's
#: 2.16 files; 2.13's to 2.15's passes read corpus graphs differently, so the discriminant and the score were fitted
#: again at each, on the same settings; before 2.13 d4c463574e49..., read by 2.12, whose arrays were those of
#: 3257dc128df4..., read by 2.11, of
#: 0c3a9c2f84d4..., read by 2.10, and of ab1370ce4d85..., read by 2.9); chosen on 2.3's validation sides and `wildval` by
#: benchmarks/search/choose_index.py on 2026-11-29; docs/search.md "real 2.3: its index, measured"); its out-of-family
#: score fitted on `wildval` 1-4's models from session 67, and since session 82 (f63da0bcd9d9..., f1e21438ab6a...'s
#: arrays) on every validation set read, wildval 1-27 (1-30 since session 83; 1-33 since session 84, reading
#: `miss_kinds` too, decided by its carry rule on `wildval33`: d1d87198905c... before it, the same arrays), reading a family prior too (`outside_fit.REFIT`, `REFIT_SETS`;
#: the same arrays as 0d6b1bb62c16..., whose score was fitted on the corpus' hold-outs and thresholded on `wildval`). Before it,
#: `index-real-2.3-graf-lda+wl.nari`: the discriminant without `sources`, fused with wl read in op roles at share
#: 0.2 (sha256 c2b532ccae00... reading queries by 2.4, 5033e998a59c... by 2.3; e64b3a9a8cc2... with both WL parts
#: reading ops). The indexes
#: on real 2.2 (fused at 0.1, sha256 8afb6d576403...; unfused graf-lda, bdf825561df8...) and the earlier
#: `wl` ones left the package when `real` moved to 2.3. `narbench index build --dataset real-2.2 --encoder graf-lda
#: --param holdout=cross-source --param wl_rounds=3 --param fuse_wl=0.1` rebuilds the fused one byte for byte; the
#: same without fuse_wl rebuilds the unfused one's embeddings exactly (its fitted weights to 1e-11; the header
#: now adds the out-of-family score, so its sha256 differs).
SHIPPED = ShippedIndex("graf-lda", "7dd3f4695a6c2acd39c47c9832f1149ff8a01efd56fbd2a8ca1d476807c138d4")


class IndexFileError(CorruptFileError):
    """An index file that is missing, damaged, not pinned as expected, or unusable."""


def shipped_path() -> Path:
    return Path(str(resources.files("narbench"))) / "data" / SHIPPED.filename


def cache_path(encoder: str, dataset: str = "real") -> Path:
    """Where `narbench index build` writes an index by default (`$NARBENCH_CACHE/index/`)."""
    from narbench.core.cache import cache_dir

    return cache_dir() / "index" / f"index-{dataset}-{encoder}{SUFFIX}"


def hash64(graph: ArchGraph) -> int:
    """The first 64 bits of `ArchGraph.content_hash` (exact-duplicate check, tie-break order)."""
    return _prefix64(graph.content_hash())


def _prefix64(digest: str) -> int:
    return int(digest[:16], 16)


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

    @property
    def reads_roles(self) -> bool:
        """Whether the index reads activations and norms by role (`narbench.data.roles`) in any of its parts."""
        fusion, params = self.header.get("fusion") or {}, self.header["encoder"].get("params") or {}
        return "roles" in (fusion.get("wl_alphabet"), params.get("wl_alphabet"))

    def op_counts(self, row: int) -> dict[str, int]:
        """{op name: count} of the graph in `row`."""
        a = self.arrays
        lo, hi = a["opc_indptr"][row], a["opc_indptr"][row + 1]
        return {self.vocab[o]: int(c) for o, c in zip(a["opc_op"][lo:hi].tolist(), a["opc_count"][lo:hi].tolist())}

    def duplicates(self, digest: str) -> list[int]:
        """Rows whose graph has content hash `digest` (`ArchGraph.content_hash` of a graph in this vocabulary)."""
        return np.flatnonzero(self.arrays["hash64"] == np.uint64(_prefix64(digest))).tolist()

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
            enc = self._cache["encoder"] = _fused(self, _rebuild_encoder(self))
        return enc

    def embed(self, graphs: list[ArchGraph]) -> np.ndarray:
        """Embed graphs (in this index's vocabulary) as the corpus was: projected, L2-normalised."""
        import torch

        from narbench.train.trainer import Trainer

        trainer = self._cache.get("trainer")
        if trainer is None:
            trainer = self._cache["trainer"] = Trainer("cpu", 0, progress=False)
        from narbench.core.registry import plugin_call

        with torch.no_grad(), plugin_call("encoder", self.encoder_name, "embed() of the query"):
            emb = self.encoder().embed(trainer, graphs)
        return normalised(self._query_rows(emb, graphs), self.arrays.get("projection"))

    def _query_rows(self, emb, graphs: list[ArchGraph]) -> np.ndarray:
        """The encoder's query embeddings as float32 rows, refused (`EmbeddingError`, one line) unless they pass
        `narbench.eval.retrieval.check_finite` (a tensor, one finite row per graph: a NaN would score every hit
        as NaN) and have the width this index's corpus was embedded at, which only the index knows (another
        width: the encoder changed since the index was built, and cannot be compared with the corpus)."""
        from narbench.eval.retrieval import EmbeddingError, check_finite

        name, n = self.encoder_name, len(graphs)
        try:  # the graphs named here, not handed down: search's path stays in this room (issue 61's walk)
            check_finite(emb, name, "query")
        except EmbeddingError as exc:
            shown = ", ".join(repr(g.name) for g in graphs[:3]) + (", ..." if n > 3 else "")
            raise EmbeddingError(f"{exc} (query graphs: {shown})") from None
        projection = self.arrays.get("projection")
        width = projection.shape[0] if projection is not None else self.arrays["embeddings"].shape[1]
        rows = as_numpy(emb)
        if rows.shape != (n, width):
            raise EmbeddingError(f"encoder {name!r} returned query embeddings of shape {list(rows.shape)} for {n} "
                                 f"query graphs; this index expects [{n}, {width}], as its corpus was embedded "
                                 f"(if the encoder changed since, rebuild it: `narbench index build --encoder {name}`)")
        return rows

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
        from narbench.search_engine.fusion import Fusion

        h = self.header
        params = ", ".join(f"{k}={v}" for k, v in h["encoder"]["params"].items())
        pin = ("" if self.pinned else f", unpinned (sha256 {self.sha256[:12]}…, not the shipped index)" if self.sha256
               else ", unpinned (built in this process, not the shipped index)")
        fused = f" {Fusion.from_record(h['fusion']).describe()}" if h.get("fusion") else ""
        return (f"{self.encoder_name}{f' ({params})' if params else ''}{fused} on {h['dataset']['name']} "
                f"{h['dataset']['version']}, {len(self):,} graphs, {self.arrays['embeddings'].shape[1]}-d{pin}")



# ---------------------------------------------------------------------- the encoder of queries


def as_numpy(emb) -> np.ndarray:
    """An encoder's embeddings (a tensor, or an array) as float32 numpy."""
    return emb.detach().float().cpu().numpy() if hasattr(emb, "detach") else np.asarray(emb, dtype=np.float32)


def normalised(emb: np.ndarray, projection: np.ndarray | None) -> np.ndarray:
    """Rows L2-normalised (through the random `projection` first, if the index has one), as the corpus was."""
    emb = np.asarray(emb, dtype=np.float32)
    if projection is not None:
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        emb = emb @ projection.astype(np.float32)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def apply_params(encoder, params: dict[str, Any]) -> None:
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


def _fused(index: SearchIndex, encoder):
    """The encoder, wrapped as the index's fusion with WL when its header records one (`fusion`)."""
    if not index.header.get("fusion"):
        return encoder
    from narbench.search_engine.fusion import FusedEncoder, Fusion
    from narbench.train.profiles import get_profile

    return FusedEncoder(encoder, Fusion.from_record(index.header["fusion"]), index.vocab,
                        get_profile(index.header["profile"]))


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
        apply_params(encoder, enc["params"])
        encoder.use_vocabulary(index.vocab)  # as when it was fitted (`index_build.fit_encoder`)
        if enc["weights"]:
            state = {k: torch.from_numpy(np.array(index.arrays[f"weight:{k}"])) for k in enc["weights"]}
            encoder.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - any failure means this index cannot embed queries here
        raise IndexFileError(f"index {index.path or '(in memory)'}: cannot rebuild its encoder {enc['name']!r} "
                             f"({type(exc).__name__}: {exc}); rebuild the index with "
                             f"`narbench index build --encoder {enc['name']}`") from exc
    return encoder.eval()

