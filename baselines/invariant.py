"""`invariant`: a whole-graph GNN trained to find a design whoever wrote it (issue 38).

Trained like the other GNN baselines (eq. 5 supervised contrastive on the family + cross-entropy,
`Trainer.fit_graph_level`'s objective), with every training batch beside a *rewrite* of each of
its graphs (`narbench.train.augment`: activations and normalisations swapped, dropped or
inserted, the skeleton of linear/conv/attention/pooling ops and its wiring kept), labelled like
its graph: in the contrastive term a graph's rewrite is one more positive beside the graphs of
its family, the other families' graphs are the negatives. Rewrites are drawn afresh for each
batch, seeded by the run's seed and the batch's graphs (a resumed run draws the same ones), all of a
batch's graphs in one pass of array work (`with_rewrites`, `augment.rewrite_batch`: the draws and
graphs of a loop over them, which it replaced). Only
training graphs are rewritten; embedding is the backbone's, as for `gin`/`gcn`/`gat`.

Parameters: `backbone` (`gin`, `gcn`, `gat`: the convolution), `swap`, `drop`, `insert` (the
rewrite rates, `augment.Rates`; GraphCL's order of magnitude, not tuned on any query set) and
`views` (0 trains the backbone exactly as its plain encoder: the ablation "no rewrites"). A
vocabulary with no activation or normalisation to rewrite (`nas`' DARTS cells) trains without
rewrites, with a warning, and the result's `encoder_stats.rewrites` says so.
Validation, not crossimpl, chooses among them (issue 38).
"""

from __future__ import annotations

import functools
import hashlib
import warnings

import numpy as np
import torch

from narbench.baselines.gnn import GNNEncoder, GNNStack, gat_conv, gcn_conv, gin_conv
from narbench.data.graph import ArchGraph
from narbench.train.augment import OpClasses, Rates, rewrite_batch
from narbench.train.encoder import Labels
from narbench.train.trainer import Trainer

BACKBONES = {"gin": gin_conv, "gcn": gcn_conv, "gat": gat_conv}


class InvariantEncoder(GNNEncoder):
    """A GNN whose training sees each graph beside a design-keeping rewrite of it."""

    name = "invariant"
    conv = staticmethod(gin_conv)
    PARAMS = {"backbone": "gin", "views": 1, "swap": 0.2, "drop": 0.1, "insert": 0.05}

    def __init__(self, num_ops, num_classes, profile, splitter=None) -> None:
        super().__init__(num_ops, num_classes, profile, splitter)
        self.stats: dict = {}

    def params_changed(self) -> None:
        if self.backbone not in BACKBONES:
            raise ValueError(f"backbone must be one of {', '.join(BACKBONES)}, got {self.backbone!r}")
        if self.views not in (0, 1):
            raise ValueError(f"views must be 0 (no rewrites) or 1, got {self.views!r}")
        Rates(self.swap, self.drop, self.insert)  # checks the rates
        if BACKBONES[self.backbone] is not self.conv:
            self.conv = BACKBONES[self.backbone]
            cfg = self.model_config
            self.stack = GNNStack(self.conv, cfg.hidden, cfg.layers, cfg.dropout, self.num_ops)

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        datas = self.to_datas(trainer, graphs, labels)
        classes = OpClasses.of(self.vocab if self.vocab is not None else ())
        rewritable = int(classes.activations.size + classes.norms.size)
        self.stats = {"rewrites": {"views": int(self.views), "rewritable_ops": rewritable}}
        if self.views and not rewritable:  # nas' DARTS cells, or no vocabulary given
            warnings.warn(f"encoder {self.name}: the vocabulary names no activation or normalisation to rewrite; "
                          "training without rewrites (encoder_stats.rewrites says so)", stacklevel=2)
        if not self.views or not rewritable:
            trainer.fit_graph_level(self, datas, self.profile.train, stage=f"train {self.name}")
            return
        for i, d in enumerate(datas):
            d.idx = torch.tensor([i])  # which training graph: seeds its rewrite
        rates, seed = Rates(self.swap, self.drop, self.insert), int(getattr(trainer, "seed", 0))
        trainer.fit_graph_level(self, datas, self.profile.train, stage=f"train {self.name}",
                                expand=functools.partial(with_rewrites, classes=classes, rates=rates, seed=seed))


#: a batch's attributes `with_rewrites` builds itself; every other one is per graph and repeated for the views
_NODE_LEVEL = ("x", "edge_index", "batch", "ptr", "num_nodes")


def with_rewrites(batch, *, classes: OpClasses, rates: Rates, seed: int):
    """`batch` (a PyG `Batch` of graphs with `idx`) and a rewrite of each of its graphs, labelled like it: what
    `Batch.from_data_list([*graphs, *rewrites])` gives, the rewrites drawn by `augment.rewrite_batch` from a generator
    seeded by the run's seed and the batch's graphs (a resumed run draws the same ones). One copy of the batch's
    graphs to the host and one of the rewrites back, instead of a `Data` per graph (issue 60)."""
    from torch_geometric.data import Batch

    rng = np.random.default_rng(int.from_bytes(
        hashlib.sha256(repr((seed, batch.idx.tolist())).encode()).digest()[:8], "little"))
    device, n, b = batch.x.device, batch.num_nodes, batch.num_graphs
    ptr = batch.ptr.cpu().numpy()
    ops, edges, view_ptr = rewrite_batch(batch.x.cpu().numpy(), batch.edge_index.cpu().numpy(), ptr, classes, rates,
                                         rng)
    sizes = torch.from_numpy(np.diff(view_ptr))
    out = Batch(x=torch.cat([batch.x, torch.from_numpy(ops).to(device)]),
                edge_index=torch.cat([batch.edge_index, torch.from_numpy(edges + n).to(device)], dim=1),
                batch=torch.cat([batch.batch, torch.repeat_interleave(torch.arange(b, 2 * b), sizes).to(device)]),
                ptr=torch.cat([batch.ptr, torch.from_numpy(view_ptr[1:] + n).to(device)]))
    for key in batch.keys():
        if key in _NODE_LEVEL:
            continue
        value = batch[key]
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != b:
            raise ValueError(f"invariant: cannot repeat the batch's attribute {key!r} for the rewrites "
                             f"(not one row per graph)")
        out[key] = torch.cat([value, value])
    out._num_graphs = 2 * b
    return out
