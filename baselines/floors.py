"""Training-free floors: what a method must beat before its training means anything.

The role BM25 plays in BEIR. Neither sees a label or trains a weight, so a trained encoder that
does not beat them has learnt nothing the graph's op vocabulary did not already say.

- `ophist`: the op-count histogram of the graph (cosine over per-op counts).
- `ophist-tfidf`: the same counts weighted by tf-idf, the inverse document frequency taken
  from the training graphs (scikit-learn's `TfidfTransformer`, smooth idf, L2 norm).
- `wl`: Weisfeiler-Lehman subtree features (Shervashidze et al., 2011): a node's label at
  iteration i hashes its label at i-1 with the multisets of its parents' and of its
  children's labels (direction kept: a DAG's producers and consumers are different things);
  the counts of every label of iterations 0..h are hashed into a fixed-width vector with a
  sign per feature (the hashing trick, as scikit-learn's `FeatureHasher(alternate_sign=True)`).
  The labels are the motif splitter's eq.-2 encoding with children (`encode_levels`): 64-bit,
  independent of node numbering and of the other graphs, so a query embeds the same alone or in
  a batch. PyG's `WLConv` does not fit: it colours undirected neighbourhoods through a
  hashmap that grows with the graphs it has seen, so a graph's colours depend on the batch.

- `wl-count`, `wl-binary`, `wl-tfidf`: the same WL labels with the number of rounds (`rounds`,
  default 3) and the width (`dim`, default 2048) as encoder parameters, and three weightings of a
  label: its number of occurrences (`wl-count`; `rounds=3` gives exactly `wl`'s vectors), its
  presence (`wl-binary`: each distinct label of a graph once, whatever its multiplicity; presence
  is decided on the 64-bit labels before hashing, so two labels that share a bucket add up, as in
  `HashingVectorizer(binary=True)` followed by the hash) and its count times its idf (`wl-tfidf`:
  smooth idf, ln((1 + n) / (1 + df)) + 1, df the number of training graphs that hold the label;
  a label no training graph holds gets df = 0, as scikit-learn's smooth idf would give it).
  The idf is computed on the exact labels, then the weighted counts are hashed.

All of them embed the whole `real` set in seconds on one core (`python -m benchmarks.speed.bench --only floors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from narbench.train.encoder import Encoder, Labels
from narbench.data.graph import ArchGraph
from narbench.splitters.motif import _mix, encode_levels
from narbench.train.trainer import Trainer

#: Graphs are embedded in chunks of about this many nodes (bounds the memory of one pass).
CHUNK_NODES = 2_000_000


def op_counts(graphs: list[ArchGraph], num_ops: int) -> np.ndarray:
    """Per-graph op-type counts, float32 [len(graphs), num_ops]."""
    if not graphs:
        return np.zeros((0, num_ops), np.float32)
    sizes = np.array([g.num_nodes for g in graphs], dtype=np.int64)
    gid = np.repeat(np.arange(len(graphs), dtype=np.int64), sizes)
    ops = np.concatenate([g.ops for g in graphs])
    return np.bincount(gid * num_ops + ops, minlength=len(graphs) * num_ops).reshape(len(graphs), num_ops).astype(np.float32)


def union(graphs: list[ArchGraph]) -> ArchGraph:
    """The disjoint union of `graphs` as one graph (node ids offset graph by graph)."""
    offsets = np.concatenate([[0], np.cumsum([g.num_nodes for g in graphs])[:-1]]).astype(np.int64)
    ops = np.concatenate([g.ops for g in graphs])
    edges = np.concatenate([g.edges + off for g, off in zip(graphs, offsets)], axis=1)
    return ArchGraph(ops=ops, edges=edges, name="union", family="", coarse="")


def chunks(graphs: list[ArchGraph], max_nodes: int = CHUNK_NODES):
    """Consecutive runs of `graphs` with at most `max_nodes` nodes each (at least one graph)."""
    start, nodes = 0, 0
    for i, g in enumerate(graphs):
        if nodes and nodes + g.num_nodes > max_nodes:
            yield start, graphs[start:i]
            start, nodes = i, 0
        nodes += g.num_nodes
    if start < len(graphs):
        yield start, graphs[start:]


_SALT_LEVEL = np.uint64(0x2545F4914F6CDD1D)


def wl_features(graphs: list[ArchGraph], iterations: int = 3, dim: int = 2048, dtype=np.float32) -> np.ndarray:
    """Signed, hashed WL subtree label counts of iterations 0..`iterations`, [N, dim] of `dtype` (int64: exact)."""
    out = np.zeros((len(graphs), dim), dtype=dtype)
    for start, part in chunks(graphs):
        g = union(part)
        sizes = np.array([p.num_nodes for p in part], dtype=np.int64)
        gid = np.repeat(np.arange(len(part), dtype=np.int64), sizes)
        for level, labels in enumerate(encode_levels(g, iterations, children=True)):
            h = _mix(labels ^ (_SALT_LEVEL * np.uint64(level + 1)))
            bucket = (h >> np.uint64(1)) % np.uint64(dim)
            sign = 1.0 - 2.0 * (h & np.uint64(1)).astype(np.float64)
            flat = gid * dim + bucket.astype(np.int64)
            out[start : start + len(part)] += np.bincount(flat, weights=sign, minlength=len(part) * dim).reshape(
                len(part), dim).astype(dtype)
    return out


class OpHistogramEncoder(Encoder):
    """Training-free floor: the graph's op-type counts (cosine over the count vector)."""

    name = "ophist"
    trainable = False

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        return None

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        return torch.from_numpy(op_counts(graphs, self.num_ops))


class OpHistogramTfidfEncoder(OpHistogramEncoder):
    """Training-free floor: op-type counts weighted by tf-idf (idf from the training graphs)."""

    name = "ophist-tfidf"
    FITTED = ("idf",)  # scikit-learn's idf_ of the training graphs (saved weights and search indexes carry it)

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        from sklearn.feature_extraction.text import TfidfTransformer

        self.idf = torch.from_numpy(TfidfTransformer().fit(op_counts(graphs, self.num_ops)).idf_)

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        from sklearn.feature_extraction.text import TfidfTransformer

        if self.idf is None:
            raise RuntimeError("ophist-tfidf: call fit() first (the idf comes from the training graphs)")
        tfidf = TfidfTransformer()
        tfidf.idf_ = self.fitted("idf")  # the fitted transformer, rebuilt from its one fitted array
        weighted = tfidf.transform(op_counts(graphs, self.num_ops)).toarray().astype(np.float32)
        return torch.from_numpy(weighted)


class WLEncoder(Encoder):
    """Training-free floor: Weisfeiler-Lehman subtree features (3 iterations, hashed to 2048 dims)."""

    name = "wl"
    trainable = False
    iterations: ClassVar[int] = 3
    dim: ClassVar[int] = 2048

    def config(self) -> dict:
        return {**super().config(), "iterations": self.iterations, "dim": self.dim}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        return None

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        return torch.from_numpy(wl_features(graphs, self.iterations, self.dim))


#: the weightings of a WL label (`wl_weighted_features`)
WL_MODES = ("count", "binary", "tfidf")


def _wl_levels(graphs: list[ArchGraph], rounds: int):
    """Per chunk of `graphs`: (start, number of graphs, graph id per node, [salted 64-bit label per node] per
    level 0..`rounds`). The labels are `wl_features`'s before bucketing (level-salted, so levels never share one)."""
    for start, part in chunks(graphs):
        g = union(part)
        sizes = np.array([p.num_nodes for p in part], dtype=np.int64)
        gid = np.repeat(np.arange(len(part), dtype=np.int64), sizes)
        levels = [_mix(labels ^ (_SALT_LEVEL * np.uint64(level + 1)))
                  for level, labels in enumerate(encode_levels(g, rounds, children=True))]
        yield start, len(part), gid, levels


def _distinct(gid: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (graph, label) pairs of one level: (gid, label), each pair once."""
    if not len(h):
        return gid, h
    order = np.lexsort((h, gid))
    g, l = gid[order], h[order]
    keep = np.ones(len(l), dtype=bool)
    keep[1:] = (l[1:] != l[:-1]) | (g[1:] != g[:-1])
    return g[keep], l[keep]


@dataclass(frozen=True)
class WLIdf:
    """Smooth idf of WL labels from `num_graphs` training graphs: `labels` (sorted uint64) with their `idf`."""

    labels: np.ndarray
    idf: np.ndarray
    num_graphs: int

    @classmethod
    def fit(cls, graphs: list[ArchGraph], rounds: int) -> "WLIdf":
        found = []
        for _, _, gid, levels in _wl_levels(graphs, rounds):
            for h in levels:
                found.append(_distinct(gid, h)[1])
        labels, df = np.unique(np.concatenate(found) if found else np.zeros(0, np.uint64), return_counts=True)
        n = len(graphs)
        return cls(labels, np.log((1.0 + n) / (1.0 + df)) + 1.0, n)

    @property
    def unseen(self) -> float:
        """The idf of a label no training graph holds (df = 0)."""
        return float(np.log(1.0 + self.num_graphs) + 1.0)

    def weights(self, h: np.ndarray) -> np.ndarray:
        """The idf of each label in `h`."""
        if not len(self.labels):
            return np.full(len(h), self.unseen)
        idx = np.minimum(np.searchsorted(self.labels, h), len(self.labels) - 1)
        return np.where(self.labels[idx] == h, self.idf[idx], self.unseen)


def wl_weighted_features(graphs: list[ArchGraph], rounds: int = 3, dim: int = 2048, mode: str = "count",
                         idf: WLIdf | None = None, dtype=np.float32) -> np.ndarray:
    """Signed, hashed WL features of levels 0..`rounds`, [N, dim]: each label weighted by `mode`.

    `count`: its occurrences (equal to `wl_features`); `binary`: 1 if the graph holds it (distinct
    64-bit labels, before hashing); `tfidf`: occurrences times `idf.weights` (`idf` required).
    """
    if mode not in WL_MODES:
        raise ValueError(f"unknown WL weighting {mode!r}; known: {', '.join(WL_MODES)}")
    if mode == "tfidf" and idf is None:
        raise ValueError("the tfidf weighting needs the idf of the training graphs (WLIdf.fit)")
    out = np.zeros((len(graphs), dim), dtype=dtype)
    for start, count, gid, levels in _wl_levels(graphs, rounds):
        for h in levels:
            g = gid
            if mode == "binary":
                g, h = _distinct(gid, h)
            bucket = (h >> np.uint64(1)) % np.uint64(dim)
            weight = 1.0 - 2.0 * (h & np.uint64(1)).astype(np.float64)
            if mode == "tfidf":
                weight = weight * idf.weights(h)
            flat = g * dim + bucket.astype(np.int64)
            out[start : start + count] += np.bincount(flat, weights=weight, minlength=count * dim).reshape(
                count, dim).astype(dtype)
    return out


class WLCountEncoder(Encoder):
    """Training-free floor: hashed WL label counts with `rounds` and `dim` as parameters (`rounds=3` is `wl`)."""

    name = "wl-count"
    trainable = False
    mode: ClassVar[str] = "count"
    PARAMS: ClassVar[dict[str, object]] = {"rounds": 3, "dim": 2048}

    def params_changed(self) -> None:
        if self.rounds < 0:
            raise ValueError(f"encoder {self.name!r}: rounds must be >= 0, got {self.rounds}")
        if self.dim < 1:
            raise ValueError(f"encoder {self.name!r}: dim must be >= 1, got {self.dim}")

    def config(self) -> dict:
        return {**super().config(), "weighting": self.mode}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        return None

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        return torch.from_numpy(wl_weighted_features(graphs, self.rounds, self.dim, self.mode))


class WLBinaryEncoder(WLCountEncoder):
    """Training-free floor: hashed WL label presence (each distinct label of a graph counts once)."""

    name = "wl-binary"
    mode = "binary"


class WLTfidfEncoder(WLCountEncoder):
    """Training-free floor: hashed WL label counts times the label's smooth idf over the training graphs."""

    name = "wl-tfidf"
    mode = "tfidf"
    #: the idf (`WLIdf`) as buffers: the labels (uint64 bits held as int64), their idf, and
    #: (number of training graphs, rounds it was fitted for); saved weights and search indexes carry them
    FITTED = ("idf_labels", "idf_values", "idf_meta")

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        idf = WLIdf.fit(graphs, self.rounds)
        self.idf_labels = torch.from_numpy(idf.labels.astype(np.uint64).view(np.int64))
        self.idf_values = torch.from_numpy(idf.idf.astype(np.float64))
        self.idf_meta = torch.tensor([idf.num_graphs, self.rounds], dtype=torch.int64)

    @property
    def idf(self) -> WLIdf | None:
        """The fitted idf (None before `fit`)."""
        if self.idf_meta is None:
            return None
        return WLIdf(self.fitted("idf_labels").view(np.uint64), self.fitted("idf_values"), int(self.idf_meta[0]))

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        if self.idf_meta is None or int(self.idf_meta[1]) != self.rounds:
            raise RuntimeError("wl-tfidf: call fit() first, after set_params (the idf of the training graphs' labels "
                               "of rounds 0..rounds)")
        return torch.from_numpy(wl_weighted_features(graphs, self.rounds, self.dim, "tfidf", self.idf))
