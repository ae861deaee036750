"""Whole-graph GNN baselines of the paper (section 4.3): `gcn` and `gat`.

Op ids go through an embedding layer (equivalent to one-hot features times a linear map),
then `layers` message-passing layers with ReLU and dropout, then mean pooling. Trained with
eq. 5 plus cross-entropy through a classifier head on the labels of the run's protocol
(`narbench.protocol`: the family by default; the coarse label under `paper`, section 4.3),
with the Table 5 recipe in the `paper` profile.
"""

from __future__ import annotations

import torch
from torch import nn

from narbench.encoder import Encoder, Labels, graph_to_data, import_torch_geometric
from narbench.graph import ArchGraph
from narbench.trainer import Trainer


class GNNStack(nn.Module):
    """Input layer, `layers` message-passing layers with ReLU and dropout, mean pooling per graph.

    `last_activation=False` leaves the last layer linear (no ReLU, no dropout after it).

    With `num_ops`, node features are op ids through an embedding (= one-hot times a linear
    map); without, they are float vectors of width `hidden` (standardised by batch norm).
    `conv(hidden)` builds one message-passing layer.
    """

    def __init__(self, conv, hidden: int, layers: int, dropout: float, num_ops: int | None = None,
                 last_activation: bool = True) -> None:
        super().__init__()
        self.last_activation = last_activation
        import_torch_geometric()  # before `conv` imports it: without torch_geometric's import-time warning
        if num_ops is not None:
            self.embedding = nn.Embedding(num_ops, hidden)
        else:
            self.embedding = nn.Sequential(nn.BatchNorm1d(hidden), nn.Linear(hidden, hidden))
        self.convs = nn.ModuleList(conv(hidden) for _ in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, batch) -> torch.Tensor:
        from torch_geometric.nn import global_mean_pool

        h = self.embedding(batch.x)
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            h = conv(h, batch.edge_index)
            if i < last or self.last_activation:
                h = self.dropout(torch.relu(h))
        return global_mean_pool(h, batch.batch, size=batch.num_graphs)


def gcn_conv(hidden: int) -> nn.Module:
    from torch_geometric.nn import GCNConv

    return GCNConv(hidden, hidden)


def gat_conv(hidden: int, heads: int = 4) -> nn.Module:
    from torch_geometric.nn import GATConv

    return GATConv(hidden, hidden // heads, heads=heads)


class GNNEncoder(Encoder):
    """Shared body of the whole-graph baselines; subclasses pick the convolution."""

    conv = staticmethod(gcn_conv)

    def __init__(self, num_ops, num_classes, profile, splitter=None) -> None:
        super().__init__(num_ops, num_classes, profile, splitter)
        cfg = self.model_config
        self.stack = GNNStack(self.conv, cfg.hidden, cfg.layers, cfg.dropout, num_ops)
        self.classifier = nn.Linear(cfg.hidden, num_classes)

    def forward(self, batch) -> torch.Tensor:
        return self.stack(batch)

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        datas = [graph_to_data(g, self.num_ops, int(c), int(e)) for g, c, e in zip(graphs, labels.cl, labels.ce)]
        trainer.fit_graph_level(self, datas, self.profile.train, stage=f"train {self.name}")

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        datas = [graph_to_data(g, self.num_ops) for g in graphs]
        return trainer.embed(self, datas, self.profile.eval_batch_size, desc=f"embed {self.name}")


class GCNEncoder(GNNEncoder):
    """Kipf & Welling graph convolutions on the whole computational graph."""

    name = "gcn"
    conv = staticmethod(gcn_conv)


class GATEncoder(GNNEncoder):
    """Graph attention (4 heads, concatenated to `hidden`) on the whole computational graph."""

    name = "gat"
    conv = staticmethod(gat_conv)
