"""Whole-graph GNN baselines: the paper's `gcn` and `gat` (section 4.3), and `gin` and `gps`.

Op ids go through an embedding layer (equivalent to one-hot features times a linear map),
then `layers` message-passing layers with ReLU and dropout, then mean pooling. Trained with
eq. 5 plus cross-entropy through a classifier head on the labels of the run's protocol
(`narbench.train.protocol`: the family by default; the coarse label under `paper`, section 4.3),
with the Table 5 recipe in the `paper` profile. `gin` swaps the convolution for GIN's
(Xu et al., 2019); `gps` is a GraphGPS graph transformer (Rampasek et al., 2022; `GPSStack`).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from narbench.train import dropout, propagate
from narbench.train.encodingcache import EncodingCache, source_digest
from narbench.train.encoder import Encoder, Labels, graph_to_data, import_torch_geometric
from narbench.data.graph import ArchGraph
from narbench.train.trainer import Trainer


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

    #: Node features per layer (nodes x hidden) above which training recomputes each layer in the backward
    #: pass instead of keeping its activations: 2**26 is 0.25 GiB in float32, above every batch of the
    #: quick profile on `real` (at most 19M in 30 shuffled epochs) and below most of the paper profile's
    #: (235k nodes x 512 on average, up to 363k: docs/speed.md). The same values and gradients, about
    #: one more forward pass of time (benchmarks/speed/layer_memory.py).
    CHECKPOINT_ELEMENTS = 1 << 26

    def forward(self, batch) -> torch.Tensor:
        from torch_geometric.nn import global_mean_pool

        h = self.embedding(batch.x)
        last = len(self.convs) - 1
        kind = propagate.kind_of(self.convs)  # GCN / GIN layers: CSR products, the same values (train.propagate)
        adj = propagate.adjacency(kind, self.convs[0], batch.edge_index, h) if kind else None
        recompute = torch.is_grad_enabled() and self.training and h.numel() > self.CHECKPOINT_ELEMENTS
        for i, conv in enumerate(self.convs):
            args = (kind, conv, h, adj, batch.edge_index, i < last or self.last_activation)
            if recompute:  # GIN's batch norms keep the statistics of the forward pass only (`frozen_norms`)
                from torch.utils.checkpoint import checkpoint

                norms = {"context_fn": functools.partial(_recompute_contexts, conv, True)} if _tracking_norms(conv) else {}
                h = checkpoint(self._layer, *args, use_reentrant=False, **norms)
            else:
                h = self._layer(*args)
        return global_mean_pool(h, batch.batch, size=batch.num_graphs)

    def _layer(self, kind, conv, h, adj, edge_index, activate: bool) -> torch.Tensor:
        """One message-passing layer, then ReLU and dropout when `activate`."""
        h = propagate.layer(kind, conv, h, adj) if kind else conv(h, edge_index)
        return dropout.relu_dropout(h, self.dropout) if activate else h  # = self.dropout(torch.relu(h)) (train.dropout)


def gcn_conv(hidden: int) -> nn.Module:
    from torch_geometric.nn import GCNConv

    return GCNConv(hidden, hidden)


def gat_conv(hidden: int, heads: int = 4) -> nn.Module:
    from torch_geometric.nn import GATConv

    return GATConv(hidden, hidden // heads, heads=heads)


def gin_mlp(hidden: int) -> nn.Module:
    """GIN's update MLP (Xu et al., 2019): Linear, BatchNorm, ReLU, Linear."""
    return nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden))


def gin_conv(hidden: int) -> nn.Module:
    """GIN-0: sum aggregation, epsilon fixed at 0 (Xu et al.'s better-generalising variant)."""
    from torch_geometric.nn import GINConv

    return GINConv(gin_mlp(hidden), eps=0.0, train_eps=False)


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

    def to_data(self, graph: ArchGraph, cl: int | None = None, ce: int | None = None):
        """One graph as the `Data` this encoder's forward reads."""
        return graph_to_data(graph, self.num_ops, cl, ce)

    def to_datas(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels | None = None) -> list:
        """`to_data` of each graph, with its training labels when `labels` are given."""
        if labels is None:
            return [self.to_data(g) for g in graphs]
        return [self.to_data(g, int(c), int(e)) for g, c, e in zip(graphs, labels.cl, labels.ce)]

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        datas = self.to_datas(trainer, graphs, labels)
        trainer.fit_graph_level(self, datas, self.profile.train, stage=f"train {self.name}")

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        datas = self.to_datas(trainer, graphs)
        return trainer.embed(self, datas, self.profile.eval_batch_size, desc=f"embed {self.name}",
                             max_nodes=self.eval_nodes())

    def eval_nodes(self) -> int | None:
        """Most nodes in one embedding batch; None: only the profile's graph count bounds it."""
        return None


class GCNEncoder(GNNEncoder):
    """Kipf & Welling graph convolutions on the whole computational graph."""

    name = "gcn"
    conv = staticmethod(gcn_conv)


class GATEncoder(GNNEncoder):
    """Graph attention (4 heads, concatenated to `hidden`) on the whole computational graph."""

    name = "gat"
    conv = staticmethod(gat_conv)


class GINEncoder(GNNEncoder):
    """Graph isomorphism network (GIN-0, MLP inside each layer) on the whole computational graph."""

    name = "gin"
    conv = staticmethod(gin_conv)


def attention_groups(batch, ptr, window: int) -> torch.Tensor:
    """Per node, the id of its attention group: graph by graph, runs of `window` consecutive nodes.

    Ids are sorted as `batch` is (what `to_dense_batch` needs), so `GPSConv`'s global attention
    runs within each group: the whole graph when it has at most `window` nodes.
    """
    local = torch.arange(batch.numel(), device=batch.device) - ptr[batch]
    per_graph = torch.div(ptr[1:] - ptr[:-1] + window - 1, window, rounding_mode="floor").clamp(min=1)
    first = torch.cumsum(per_graph, 0) - per_graph
    return first[batch] + torch.div(local, window, rounding_mode="floor")


class GPSStack(nn.Module):
    """GraphGPS as PyG's `examples/graph_gps.py` builds it, pooled like `GNNStack`.

    Input: the op embedding (width `hidden - pe_dim`) concatenated with a linear map of the
    batch-normalised random-walk positional encoding (`walk_length` return probabilities, width
    `pe_dim`). Then `layers` `GPSConv` layers, each a GIN convolution on the graph's edges plus
    multi-head self-attention (4 heads) over the nodes of an attention group (`attention_groups`:
    the whole graph up to `window` nodes, else consecutive runs of `window` nodes), residuals,
    batch norm and an MLP. Mean pooling per graph.
    """

    #: Attention weights per layer above which training recomputes layers (checkpointing).
    CHECKPOINT_ELEMENTS = 1 << 26

    def __init__(self, num_ops: int, hidden: int, layers: int, dropout: float, *, heads: int = 4,
                 walk_length: int = 20, pe_dim: int = 8, window: int = 128) -> None:
        super().__init__()
        import_torch_geometric()
        from torch_geometric.nn import GINConv, GPSConv

        self.window = window
        #: a recomputed layer leaves its batch norms' running statistics alone (`frozen_norms`); False: it
        #: updates them again, as before issue 59's fix (`GPSEncoder`'s norm_stats=twice)
        self.norm_stats_once = True
        self.node_emb = nn.Embedding(num_ops, hidden - pe_dim)
        self.pe_norm = nn.BatchNorm1d(walk_length)
        self.pe_lin = nn.Linear(walk_length, pe_dim)
        self.convs = nn.ModuleList(
            GPSConv(hidden, GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))),
                    heads=heads, dropout=dropout, attn_type="multihead", attn_kwargs={"dropout": dropout})
            for _ in range(layers))

    def forward(self, batch) -> torch.Tensor:
        from torch_geometric.nn import global_mean_pool

        h = torch.cat([self.node_emb(batch.x), self.pe_lin(self.pe_norm(batch.pe))], dim=1)
        groups = attention_groups(batch.batch, batch.ptr, self.window)
        num_groups = int(groups[-1]) + 1 if groups.numel() else 0
        padded = int(torch.bincount(groups).max()) if groups.numel() else 0
        # Training keeps each layer's attention weights, softmax and dropout mask for the backward
        # pass: 5 GB at a `real` batch of the quick profile. Above CHECKPOINT_ELEMENTS attention
        # weights, a layer is recomputed in the backward pass instead (same values and gradients,
        # the RNG state is replayed, the batch norms' running statistics left alone by the
        # recomputation: `norm_stats_once`; about one more forward pass of time).
        recompute = torch.is_grad_enabled() and self.training and \
            num_groups * padded * padded * self.convs[0].heads > self.CHECKPOINT_ELEMENTS
        for conv in self.convs:
            if recompute:
                from torch.utils.checkpoint import checkpoint

                h = checkpoint(conv, h, batch.edge_index, groups, use_reentrant=False,
                               context_fn=functools.partial(_recompute_contexts, conv, self.norm_stats_once))
            else:
                h = conv(h, batch.edge_index, groups)
        return global_mean_pool(h, batch.batch, size=batch.num_graphs)


def _recompute_contexts(module: nn.Module, once: bool):
    """`checkpoint`'s (forward, recomputation) contexts: the recomputation with `module`'s batch norms
    frozen when `once` (`frozen_norms`), else as the forward pass (before issue 59's fix)."""
    return contextlib.nullcontext(), (frozen_norms(module) if once else contextlib.nullcontext())


#: the norms that keep running statistics (public classes: torch's `_NormBase` is private)
_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.InstanceNorm1d, nn.InstanceNorm2d,
          nn.InstanceNorm3d)


def _tracking_norms(module: nn.Module) -> list[nn.Module]:
    """`module`'s norms that keep running statistics (what a recomputed layer must not update again)."""
    return [m for m in module.modules() if isinstance(m, _NORMS) and m.track_running_stats]


@contextlib.contextmanager
def frozen_norms(module: nn.Module):
    """`module`'s norms run as in training (batch statistics, the same saved tensors), and afterwards their
    running statistics and batch counts are what they were before: what a layer recomputed in the backward
    pass must leave, or each recomputed batch would count twice in the statistics that embed the corpus."""
    buffers = [b for m in _tracking_norms(module) for b in (m.running_mean, m.running_var, m.num_batches_tracked)
               if b is not None]
    kept = [b.clone() for b in buffers]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, k in zip(buffers, kept):
                b.copy_(k)


def random_walk_pe(graph: ArchGraph, walk_length: int) -> torch.Tensor:
    """RWPE (Dwivedi et al., 2022) of the graph with its edges undirected, float [N, walk_length].

    Column k-1 is the probability that a k-step random walk returns to its start: the diagonal of
    P^k, P = D^-1 A. On the directed graph every one is 0 (a DAG has no cycles), so the walk runs
    on the undirected graph, as PyG's example runs it on its undirected molecules. The values are
    PyG's `AddRandomWalkPE` (a test compares them), computed in scipy as diag(P^k) =
    rowsum(P^ceil(k/2) * (P^floor(k/2))^T): powers up to walk_length/2 only, whose fill-in is far
    smaller; CPU time on 200 random `real` graphs (266,844 nodes): 7.5 s, against 19.3 s for all 20
    scipy powers and about 100 s for PyG's transform (docs/encoders.md).
    """
    import scipy.sparse as sp

    n = graph.num_nodes
    src, dst = graph.edges
    adj = sp.csr_matrix((np.ones(2 * src.size), (np.concatenate([src, dst]), np.concatenate([dst, src]))), shape=(n, n))
    adj.data[:] = 1.0  # an edge listed twice is one edge, as in to_undirected
    deg = np.asarray(adj.sum(axis=1)).ravel()
    walk = (sp.diags(np.where(deg > 0, 1.0 / np.maximum(deg, 1.0), 0.0)) @ adj).tocsr()
    pe = np.empty((n, walk_length), np.float32)
    pe[:, 0] = walk.diagonal()
    low = walk  # P^j; only two powers are held at a time (a large graph's P^10 can take GBs)
    for j in range(1, (walk_length + 1) // 2 + 1):
        if 2 * j <= walk_length:
            pe[:, 2 * j - 1] = np.asarray(low.multiply(low.T).sum(axis=1)).ravel()
        if 2 * j + 1 <= walk_length:
            high = (low @ walk).tocsr()
            pe[:, 2 * j] = np.asarray(high.multiply(low.T).sum(axis=1)).ravel()
            low = high
    return torch.from_numpy(pe)


def _random_walk_pe_array(graph: ArchGraph, walk_length: int) -> np.ndarray:
    """`random_walk_pe` as a numpy array (what a worker process sends back)."""
    return random_walk_pe(graph, walk_length).numpy()


def _walk_cost(graph: ArchGraph) -> int:
    """A graph's share of RWPE work, for scheduling: its size."""
    return graph.num_nodes + graph.num_edges


class GPSEncoder(GNNEncoder):
    """GraphGPS graph transformer (GIN local layer + windowed multi-head attention, RWPE inputs)."""

    name = "gps"
    #: `norm_stats`: how often a layer recomputed in the backward pass updates its batch norms' running
    #: statistics: `once` (as without recomputation), or `twice` (before issue 59's fix; result files on
    #: `real` written before the parameter ran it: `narbench.eval.olddefaults`)
    PARAMS: ClassVar[dict[str, object]] = {"norm_stats": "once"}
    heads: ClassVar[int] = 4
    walk_length: ClassVar[int] = 20  # PyG's example
    pe_dim: ClassVar[int] = 8  # PyG's example
    window: ClassVar[int] = 128  # most nodes one attention group holds (docs/encoders.md)

    def __init__(self, num_ops, num_classes, profile, splitter=None) -> None:
        Encoder.__init__(self, num_ops, num_classes, profile, splitter)
        cfg = self.model_config
        self.stack = GPSStack(num_ops, cfg.hidden, cfg.layers, cfg.dropout, heads=self.heads,
                              walk_length=self.walk_length, pe_dim=self.pe_dim, window=self.window)
        self.classifier = nn.Linear(cfg.hidden, num_classes)
        self.encoding_cache: EncodingCache | None = EncodingCache()  # on disk, across runs; None: off

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        if self.norm_stats not in ("once", "twice"):
            raise ValueError(f"encoder 'gps': parameter 'norm_stats' is 'once' or 'twice', got {self.norm_stats!r}")
        self.stack.norm_stats_once = self.norm_stats == "once"
        super().fit(trainer, graphs, labels)

    def config(self) -> dict:
        return {**super().config(), "gps": {"heads": self.heads, "walk_length": self.walk_length,
                                            "pe_dim": self.pe_dim, "window": self.window, "attn_type": "multihead"}}

    def to_data(self, graph: ArchGraph, cl: int | None = None, ce: int | None = None):
        return self._with_pe(graph, self.positional_encodings([graph])[0], cl, ce)

    def to_datas(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels | None = None) -> list:
        """`to_data` of each graph; the encodings of all at once, in `trainer.jobs` processes."""
        pes = self.positional_encodings(graphs, jobs=trainer.jobs)
        if labels is None:
            return [self._with_pe(g, pe) for g, pe in zip(graphs, pes)]
        return [self._with_pe(g, pe, int(c), int(e)) for g, pe, c, e in zip(graphs, pes, labels.cl, labels.ce)]

    def _with_pe(self, graph: ArchGraph, pe: torch.Tensor, cl: int | None = None, ce: int | None = None):
        data = super().to_data(graph, cl, ce)
        data.pe = pe
        return data

    def positional_encodings(self, graphs: list[ArchGraph], *, jobs: int = 1) -> list[torch.Tensor]:
        """`random_walk_pe(g, walk_length)` of each graph, each computed once per encoder.

        The largest cost of a CPU run (on `real` as much as training the smoke profile), and the
        training graphs are embedded again as corpus graphs: the encodings are kept per graph
        object while it lives (weakly: the memo never keeps a graph alive; only the [N,
        walk_length] tensor is kept, shared with the `Data` built from it), checked against the
        graph's `content_hash` (a graph changed since is computed again). Missing ones are
        computed in `jobs` processes (`narbench.train.pool.ordered_map`): the same function on
        the same arrays, so the same values as one by one here. Computed encodings are kept on
        disk (`encoding_cache`, `narbench.train.encodingcache`; None: off) and read back by later
        runs: the same float32 values."""
        memo = self._pe_memo()
        out: list[torch.Tensor | None] = []
        todo: dict[int, tuple[ArchGraph, str]] = {}  # id -> graph, content hash: each object once
        for g in graphs:
            h = g.content_hash()
            hit = memo.get(g)
            if hit is not None and hit[0] == h and hit[1] == self.walk_length:
                out.append(hit[2])
            else:
                out.append(None)
                todo.setdefault(id(g), (g, h))
        if todo:
            from narbench.train.pool import ordered_map

            cache, kind = self.encoding_cache, f"rwpe:L{self.walk_length}:{source_digest(random_walk_pe)}"
            stored = cache.get_arrays(kind, [h for _, h in todo.values()]) if cache is not None else {}
            work = [(g, h) for g, h in todo.values() if h not in stored]
            arrays = ordered_map(functools.partial(_random_walk_pe_array, walk_length=self.walk_length),
                                 [g for g, _ in work], jobs=jobs, cost=_walk_cost)
            if cache is not None and work:
                cache.put_arrays(kind, {h: pe for (_, h), pe in zip(work, arrays)})
            computed = {h: pe for (_, h), pe in zip(work, arrays)}
            fresh = {}
            for g, h in todo.values():
                fresh[id(g)] = pe = torch.from_numpy(stored[h] if h in stored else computed[h])
                with contextlib.suppress(TypeError):  # a graph type without weak references
                    memo[g] = (h, self.walk_length, pe)
            out = [fresh[id(g)] if pe is None else pe for g, pe in zip(graphs, out)]
        return out

    def _pe_memo(self) -> weakref.WeakKeyDictionary:
        memo = self.__dict__.get("_pe_cache")
        if memo is None:
            memo = self.__dict__["_pe_cache"] = weakref.WeakKeyDictionary()
        return memo

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_pe_cache", None)  # weak references do not pickle; the memo is rebuilt on use
        return state

    def eval_nodes(self) -> int:
        """Nodes per embedding batch: windows x window^2 x heads attention weights within
        `GPSStack.CHECKPOINT_ELEMENTS` (the bound above which training recomputes a layer).
        Attention memory grows with nodes x window: a batch of 256 neighbouring large `real`
        graphs took a process past 16 GB (and was killed)."""
        return GPSStack.CHECKPOINT_ELEMENTS // (self.window * self.heads)
