"""A third-party plugin, as a separate distribution would ship it: one encoder, one dataset.

Its `.dist-info/entry_points.txt` registers them under narbench's groups; the tests put this
folder on sys.path so `importlib.metadata` finds it like any installed package.
"""

from __future__ import annotations

import numpy as np
import torch

from narbench.data.dataset import DatasetProvider
from narbench.train.encoder import Encoder
from narbench.data.graph import ArchGraph


class NodeFrequencyEncoder(Encoder):
    """A training-free encoder: the frequency of each op type (counts over the number of nodes)."""

    name = "nodefreq"

    def fit(self, trainer, graphs, labels):
        return None

    def embed(self, trainer, graphs):
        out = np.stack([np.bincount(g.ops, minlength=self.num_ops) / g.num_nodes for g in graphs])
        return torch.as_tensor(out, dtype=torch.float32)


class ToyDataset(DatasetProvider):
    """Small chains in four families (built by the tests' own code)."""

    name = "toy"
    version = "0"

    def build(self):
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.conftest import toy_graphs

        return toy_graphs(), [f"op{i}" for i in range(8)], {"generator": "toy_graphs"}

    def query_cluster(self, graph, split):
        """The leaderboard's resampling unit of a query (`narbench.leaderboard.clusters`): each toy
        graph is a model of its own."""
        return graph.name


class BrokenEncoder(Encoder):
    """Never loaded: its entry point names a module that does not exist."""
