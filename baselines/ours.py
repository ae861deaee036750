"""`ours`: the paper's method (sections 3.2-3.5, Algorithm 1).

1. A splitter (the `motif` splitter by default) cuts each graph into motifs G_s; the parts
   overlap by edges and the macro graph G_m joins parts that share one.
2. Stage 1, motif level (eq. 3-4): a GCN F_s embeds each motif, a GCN F_c embeds its context
   graph G_c (the motif plus its k-hop neighbours in G); InfoNCE with cosine similarity, the
   motif's own context as the positive and the other contexts in the batch as negatives.
   Each distinct motif (same ops and internal edges) is one training example.
3. Stage 2, graph level (eq. 5-6): F_s is frozen; every distinct motif is embedded once
   (an embedding cache) and the macro graph, whose nodes carry the motif embeddings H_sg*,
   is embedded by a GCN F_m. Loss: eq. 5 + cross-entropy through a classifier head, on the
   labels the run's protocol gives (`narbench.protocol`; the family under both shipped
   protocols, as section 3.5 says); `--objective` picks either term or both (Table 3).
4. Inference (eq. 8): F(A) = F_m(Agg[F_s(Mss(A))]).

Motifs are computed once: every graph is split at most once per run (training graphs are part
of the corpus) and its parts and part keys are kept for the run and in the on-disk parts cache
(`narbench.partcache`; graphs not in it are split in `Trainer.jobs` processes). Subgraphs and
context graphs are extracted for all parts of a graph at once (`narbench.parts`), and only for
the first occurrence of each distinct motif.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict

import numpy as np
import torch
from torch import nn

from narbench import losses
from narbench.baselines.gnn import GNNStack, gcn_conv
from narbench.encoder import Encoder, Labels
from narbench.graph import ArchGraph, import_torch_geometric
from narbench.partcache import PartsCache, split_graphs
from narbench.parts import GraphParts, adjacency, induced_subgraphs, neighbourhoods
from narbench.splitter import Partition
from narbench.trainer import Trainer


class MacroModel(nn.Module):
    """F_m and the classifier head f: what stage 2 trains and inference runs."""

    def __init__(self, hidden: int, layers: int, dropout: float, num_classes: int) -> None:
        super().__init__()
        self.f_m = GNNStack(gcn_conv, hidden, layers, dropout)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, batch) -> torch.Tensor:
        return self.f_m(batch)


class MotifPairModel(nn.Module):
    """F_s and F_c: what stage 1 trains (F_c is discarded after training)."""

    def __init__(self, num_ops: int, hidden: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.f_s = GNNStack(gcn_conv, hidden, layers, dropout, num_ops)
        self.f_c = GNNStack(gcn_conv, hidden, layers, dropout, num_ops)


def induced(graph: ArchGraph, nodes: np.ndarray):
    """The subgraph of `graph` induced by sorted `nodes`, as a PyG Data with op-id features.

    One part at a time (O(E) per call): the reference for `narbench.parts.induced_subgraphs`,
    which the encoder uses to extract every part of a graph at once.
    """
    import_torch_geometric()
    from torch_geometric.data import Data

    src, dst = graph.edges
    keep = np.isin(src, nodes) & np.isin(dst, nodes)
    local = np.searchsorted(nodes, graph.edges[:, keep])
    return Data(x=torch.as_tensor(graph.ops[nodes]), edge_index=torch.as_tensor(local), num_nodes=len(nodes))


def neighbourhood(graph: ArchGraph, nodes: np.ndarray, hops: int) -> np.ndarray:
    """`nodes` plus every node within `hops` edges of them (either direction), sorted.

    The reference for `narbench.parts.neighbourhoods` (all parts at once)."""
    src, dst = graph.edges
    current = np.asarray(nodes)
    for _ in range(hops):
        touch = np.isin(src, current) | np.isin(dst, current)
        current = np.union1d(current, np.concatenate([src[touch], dst[touch]]))
    return current


def data_key(data) -> bytes:
    """Exact signature of a subgraph Data: equal keys mean equal ops and local edges.

    The same bytes as `narbench.parts.subgraph_keys` gives for the same subgraph."""
    h = hashlib.blake2b(digest_size=16)
    h.update(data.x.numpy().astype("<i8").tobytes())
    h.update(data.edge_index.numpy().astype("<i8").tobytes())
    return h.digest()


class MotifEncoder(Encoder):
    """Motif sampling, macro graphs and two-stage contrastive training (the paper's method)."""

    name = "ours"
    uses_splitter = True
    default_splitter = "motif"
    paper_labels = ("family", "family")  # section 3.5: eq. 5 and the classifier on the model family
    context_hops = 1

    def __init__(self, num_ops, num_classes, profile, splitter=None) -> None:
        super().__init__(num_ops, num_classes, profile, splitter)
        cfg = self.model_config
        self.pair = MotifPairModel(num_ops, cfg.hidden, cfg.layers, cfg.dropout)
        self.macro = MacroModel(cfg.hidden, cfg.layers, cfg.dropout, num_classes)
        self._parts: dict[str, GraphParts] = {}  # graph content hash -> its parts, for the whole run
        self._hashes: dict[int, tuple[ArchGraph, str]] = {}  # id(graph) -> (graph, content hash)
        self._motif_data: dict[bytes, object] = {}  # motif key -> its subgraph (first occurrence)
        self._motif_cache: dict[bytes, torch.Tensor] = {}
        self.parts_cache: PartsCache | None = PartsCache()  # on disk, across runs; None: off
        self.stats: dict[str, float] = {}

    def config(self) -> dict:
        out = super().config()
        out.update(motif_train=asdict(self.profile.motif_train), context_hops=self.context_hops)
        return out

    # -- motifs -----------------------------------------------------------------------------
    def partition(self, graph: ArchGraph) -> Partition:
        return self._graph_parts(graph).partition()

    def _content_hash(self, graph: ArchGraph) -> str:
        """`graph.content_hash()`, computed once per graph object and run (graphs are not
        modified during a run; the entry keeps the object, so its id is not reused)."""
        entry = self._hashes.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = self._hashes[id(graph)] = (graph, graph.content_hash())
        return entry[1]

    def _graph_parts(self, graph: ArchGraph) -> GraphParts:
        key = self._content_hash(graph)
        if key not in self._parts:
            self._parts[key] = split_graphs(self.splitter, [graph], jobs=1, cache=self.parts_cache, hashes=[key])[0]
        return self._parts[key]

    def _motifs(self, trainer: Trainer, graphs: list[ArchGraph], desc: str) -> list[GraphParts]:
        """Per graph: its parts and their motif keys; every motif's subgraph in `_motif_data`.

        Graphs are split once per run (kept in memory) and read from / written to the parts
        cache (`narbench.partcache`); graphs not there are split in `trainer.jobs` processes.
        """
        hashes = [self._content_hash(g) for g in graphs]
        todo = [i for i, h in enumerate(hashes) if h not in self._parts]
        if todo:
            got = split_graphs(self.splitter, [graphs[i] for i in todo], jobs=getattr(trainer, "jobs", None),
                               cache=self.parts_cache, hashes=[hashes[i] for i in todo],
                               progress=trainer.progress, desc=desc)
            for i, parts in zip(todo, got):
                self._parts[hashes[i]] = parts
        motifs = [self._parts[h] for h in hashes]
        # the subgraph of each new motif, from its first occurrence (all new parts of a graph at once)
        known = self._motif_data
        for g, parts in zip(graphs, motifs):
            new: dict[bytes, int] = {}
            for i, key in enumerate(parts.keys):
                if key not in known and key not in new:
                    new[key] = i
            if new:
                sub = induced_subgraphs(g, *parts.select(list(new.values())))
                for j, key in enumerate(new):
                    known[key] = sub.data(j)
        return motifs

    def _contexts(self, graphs: list[ArchGraph], motifs: list[GraphParts], first: dict[bytes, tuple[int, int]]):
        """Context graph G_c (the part plus its `context_hops` neighbourhood) of each motif's
        occurrence `first[key]` = (graph index, part index)."""
        by_graph: dict[int, list[int]] = {}
        for gi, pi in first.values():
            by_graph.setdefault(gi, []).append(pi)
        out = {}
        for gi, pis in by_graph.items():
            g, parts = graphs[gi], motifs[gi]
            csr = adjacency(g)
            sub = induced_subgraphs(g, *neighbourhoods(g, *parts.select(pis), self.context_hops, csr=csr), csr=csr)
            for j, pi in enumerate(pis):
                out[parts.keys[pi]] = sub.data(j)
        return out

    def _embed_motifs(self, trainer: Trainer, motifs: list[GraphParts]) -> None:
        """Fill the cache with F_s embeddings of every motif not embedded yet (eval mode)."""
        todo: dict[bytes, object] = {}
        for parts in motifs:
            for key in parts.keys:
                if key not in self._motif_cache and key not in todo:
                    todo[key] = self._motif_data[key]
        if todo:
            emb = trainer.embed(self.pair.f_s, list(todo.values()), self.profile.motif_train.batch_size,
                                desc=f"embed {len(todo)} motifs")
            # Stage 1 trains directions only (cosine similarity): keep H_sg* on the unit sphere.
            emb = torch.nn.functional.normalize(emb, dim=1)
            self._motif_cache.update(zip(todo.keys(), emb))

    def _macro_datas(self, graphs: list[ArchGraph], motifs: list[GraphParts], labels: Labels | None = None):
        import_torch_geometric()
        from torch_geometric.data import Data

        datas = []
        cache = self._motif_cache
        for i, parts in enumerate(motifs):
            x = torch.stack([cache[key] for key in parts.keys])
            data = Data(x=x, edge_index=torch.as_tensor(parts.macro_edges), num_nodes=parts.num_parts)
            if labels is not None:
                data.y_cl = torch.tensor([int(labels.cl[i])])
                data.y_ce = torch.tensor([int(labels.ce[i])])
            datas.append(data)
        return datas

    # -- Encoder API ------------------------------------------------------------------------
    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        motifs = self._motifs(trainer, graphs, "split train graphs")
        # Stage 1: one (motif, context) pair per distinct motif, first occurrence's context.
        first: dict[bytes, tuple[int, int]] = {}
        for gi, parts in enumerate(motifs):
            for pi, key in enumerate(parts.keys):
                if key not in first:
                    first[key] = (gi, pi)
        contexts = self._contexts(graphs, motifs, first)
        pairs = {key: (self._motif_data[key], contexts[key]) for key in first}
        self.stats.update(train_motifs=sum(p.num_parts for p in motifs), distinct_train_motifs=len(pairs))
        temperature = self.profile.motif_train.temperature

        def motif_step(model: MotifPairModel, batch) -> torch.Tensor:
            motif_batch, context_batch = batch
            return losses.info_nce(model.f_s(motif_batch), model.f_c(context_batch), temperature)

        if len(pairs) >= 2:
            trainer.fit(self.pair, list(pairs.values()), self.profile.motif_train, motif_step, stage="stage 1: motifs")
        self.pair.eval()
        for p in self.pair.f_s.parameters():
            p.requires_grad_(False)
        # Stage 2: macro graphs of frozen motif embeddings.
        self._embed_motifs(trainer, motifs)
        datas = self._macro_datas(graphs, motifs, labels)
        trainer.fit_graph_level(self.macro, datas, self.profile.train, stage="stage 2: macro graphs")

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        motifs = self._motifs(trainer, graphs, "split graphs")
        self._embed_motifs(trainer, motifs)
        datas = self._macro_datas(graphs, motifs)
        self.stats["mean_parts"] = float(np.mean([p.num_parts for p in motifs])) if motifs else 0.0
        return trainer.embed(self.macro, datas, self.profile.eval_batch_size, desc="embed macro graphs")
