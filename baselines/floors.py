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

All three embed the whole `real` set in seconds on one core (`python benchmarks/bench.py --only floors`).
"""

from __future__ import annotations

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

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        from sklearn.feature_extraction.text import TfidfTransformer

        self.tfidf = TfidfTransformer().fit(op_counts(graphs, self.num_ops))

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        if getattr(self, "tfidf", None) is None:
            raise RuntimeError("ophist-tfidf: call fit() first (the idf comes from the training graphs)")
        weighted = self.tfidf.transform(op_counts(graphs, self.num_ops)).toarray().astype(np.float32)
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
