"""The networks of `ours` and `ours-ft` (`narbench.baselines.ours`): what each stage trains.

Stage 1 trains F_s and F_c (`MotifPairModel`), stage 2 F_m and the classifier head f
(`MacroModel`); `ours-ft` trains F_s and F_m together in stage 2 (`FineTunedMacro`). All are GCN
stacks (`narbench.baselines.gnn.GNNStack`), as section 3 of the paper builds them.
"""

from __future__ import annotations

import torch
from torch import nn

from narbench.baselines.gnn import GNNStack, gcn_conv


class MacroModel(nn.Module):
    """F_m and the classifier head f: what stage 2 trains and inference runs."""

    def __init__(self, hidden: int, layers: int, dropout: float, num_classes: int) -> None:
        super().__init__()
        self.f_m = GNNStack(gcn_conv, hidden, layers, dropout)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, batch) -> torch.Tensor:
        return self.f_m(batch)


class MotifPairModel(nn.Module):
    """F_s and F_c: what stage 1 trains (F_c is discarded after training).

    `last_activation` (F_s and F_c alike): ReLU and dropout after the last layer, as after the
    others (the Table 5 build) or not (the last layer linear, the usual contrastive head).
    """

    def __init__(self, num_ops: int, hidden: int, layers: int, dropout: float, last_activation: bool = True) -> None:
        super().__init__()
        self.f_s = GNNStack(gcn_conv, hidden, layers, dropout, num_ops, last_activation=last_activation)
        self.f_c = GNNStack(gcn_conv, hidden, layers, dropout, num_ops, last_activation=last_activation)


class FineTunedMacro(nn.Module):
    """F_s and F_m trained together: a macro graph's nodes are motif ids, embedded by F_s in the
    forward pass (each distinct motif of a batch once), unit-normalised as in `ours`, then F_m."""

    def __init__(self, f_s: nn.Module, macro: MacroModel, motifs: list) -> None:
        super().__init__()
        self.f_s = f_s
        self.macro = macro
        self.motifs = motifs  # motif id -> its subgraph (PyG Data); not a module
        self._packed = None  # the motifs packed on the device of the forward pass (narbench.train.packed)

    @property
    def classifier(self) -> nn.Module:
        return self.macro.classifier

    def forward(self, batch) -> torch.Tensor:
        from types import SimpleNamespace

        from narbench.train.packed import pack

        ids = batch.x
        uniq, inverse = torch.unique(ids, return_inverse=True)
        if self._packed is None or self._packed.device != ids.device:
            self._packed = pack(self.motifs, ids.device)
        # the batch of the distinct motifs, built on the device (the ids read back once: their sizes)
        motif_batch = self._packed.take(uniq.cpu().numpy(), uniq)
        h = torch.nn.functional.normalize(self.f_s(motif_batch), dim=1)
        macro = SimpleNamespace(x=h[inverse], edge_index=batch.edge_index, batch=batch.batch, num_graphs=batch.num_graphs)
        return self.macro.f_m(macro)

