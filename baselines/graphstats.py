"""`graphstats`: a training-free floor of hand-picked graph statistics, in the spirit of GRAF.

GRAF (Kadlecová et al., ICML 2024, "Surprisingly Strong Performance Prediction with Neural
Graph Features") showed that a few interpretable counts of a network's graph -- op counts,
degrees, path lengths -- predict what zero-cost proxies and learned encoders do. Here they are a
retrieval floor: a graph is the vector of

- per op type: its count and its share of the nodes (2 x `num_ops` columns);
- structure (`STRUCTURE_COLUMNS`): nodes, edges, mean/max/std of in- and out-degree, sources,
  sinks, depth (longest source-to-node path), depth per node, the widest depth level, the mean
  shortest source-to-sink distance, the share of skip edges (spanning more than one depth
  level), the shares of merge (in-degree > 1) and branch (out-degree > 1) nodes.

Every column is non-negative and most are counts spanning 1 to 10^4 between `nas` cells and
`real` transformers, so each goes through log1p; the columns are then standardised with the
mean and standard deviation of the training graphs (no labels: the role the idf plays in
`ophist-tfidf`), and the three blocks (op counts, op shares, structure) are scaled by
1/sqrt(their width) so that none outweighs the others in the cosine by its number of columns.
One compiled pass (`_graphstats_kernels`) embeds the whole `real` set in seconds.
"""

from __future__ import annotations

import numpy as np
import torch

from narbench.train.encoder import Encoder, Labels
from narbench.data.graph import ArchGraph
from narbench.train.trainer import Trainer

_KERNELS = None


def _kernels():
    """The numba kernel module, imported on first use (numba start-up is paid only then)."""
    global _KERNELS
    if _KERNELS is None:
        from narbench.core.jit import setup_numba_cache

        setup_numba_cache()
        from narbench.baselines import _graphstats_kernels

        _KERNELS = _graphstats_kernels
    return _KERNELS


def structure_columns() -> tuple[str, ...]:
    return _kernels().STRUCTURE_COLUMNS


def graph_stats(graphs: list[ArchGraph], num_ops: int) -> np.ndarray:
    """Raw statistics, float64 [len(graphs), 2 * num_ops + 16]: op counts, op shares, structure."""
    from narbench.baselines.floors import op_counts

    width = 2 * num_ops + len(structure_columns())
    if not graphs:
        return np.zeros((0, width), np.float64)
    counts = op_counts(graphs, num_ops).astype(np.float64)
    sizes = np.array([g.num_nodes for g in graphs], dtype=np.int64)
    shares = counts / np.maximum(sizes, 1)[:, None]
    node_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    edge_off = np.concatenate([[0], np.cumsum([g.num_edges for g in graphs])]).astype(np.int64)
    src = np.concatenate([g.edges[0] for g in graphs]).astype(np.int64)
    dst = np.concatenate([g.edges[1] for g in graphs]).astype(np.int64)
    structure = _kernels().structure_stats(node_off, edge_off, src, dst)
    return np.concatenate([counts, shares, structure], axis=1)


class GraphStatsEncoder(Encoder):
    """Training-free floor: op counts and shares plus structure statistics, log1p, standardised."""

    name = "graphstats"
    trainable = False
    FITTED = ("mean", "std")  # the standardisation of the training graphs

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        feats = np.log1p(graph_stats(graphs, self.num_ops))
        if not len(feats):
            raise ValueError("graphstats: fit() needs at least one training graph (the standardisation comes from them)")
        self.mean = torch.from_numpy(feats.mean(axis=0))
        std = feats.std(axis=0)
        self.std = torch.from_numpy(np.where(std > 0, std, 1.0))  # a column constant on the training graphs only shifts

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        if self.mean is None:
            raise RuntimeError("graphstats: call fit() first (the standardisation comes from the training graphs)")
        z = (np.log1p(graph_stats(graphs, self.num_ops)) - self.fitted("mean")) / self.fitted("std")
        blocks = (self.num_ops, self.num_ops, len(structure_columns()))
        scale = np.concatenate([np.full(w, 1.0 / np.sqrt(w)) for w in blocks])
        return torch.from_numpy((z * scale).astype(np.float32))
