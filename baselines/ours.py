"""`ours`: the paper's method (sections 3.2-3.5, Algorithm 1).

1. A splitter (the `motif` splitter by default) cuts each graph into motifs G_s; the parts
   overlap by edges and the macro graph G_m joins parts that share one.
2. Stage 1, motif level (eq. 3-4): a GCN F_s embeds each motif, a GCN F_c embeds its context
   graph G_c (the motif plus its k-hop neighbours in G); InfoNCE with cosine similarity, the
   motif's own context as the positive and the other contexts in the batch as negatives.
   Each distinct motif (same ops and internal edges) is one training example (or, with the
   parameter `motif_examples=occurrences`, every occurrence with its own context; with
   `stage1=False` stage 1 is skipped: ablations, docs/encoders.md). Learning rate 1e-3 (the
   profiles' `motif_train`): Table 5's 1e-2 collapses F_s (`stage1_lr=0.01` restores it).
   The result records stage-1 health (`narbench.train.health`: loss per epoch, effective rank and
   dead dimensions of F_s's output on a fixed motif sample, before and after).
3. Stage 2, graph level (eq. 5-6): F_s is frozen; every distinct motif is embedded once
   (an embedding cache) and the macro graph, whose nodes carry the motif embeddings H_sg*,
   is embedded by a GCN F_m. Loss: eq. 5 + cross-entropy through a classifier head, on the
   labels the run's protocol gives (`narbench.train.protocol`; the family under both shipped
   protocols, as section 3.5 says); `--objective` picks either term or both (Table 3).
4. Inference (eq. 8): F(A) = F_m(Agg[F_s(Mss(A))]).

Motifs are computed once: every graph is split at most once per run (training graphs are part
of the corpus) and its parts and part keys are kept for the run and in the on-disk parts cache
(`narbench.train.partcache`; graphs not in it are split in `Trainer.jobs` processes). Subgraphs and
context graphs are extracted for all parts of a graph at once (`narbench.train.parts`), and only for
the first occurrence of each distinct motif.

Here: the two encoders and their stages; the networks they train are in `ours_models`, a motif's
one-at-a-time inputs (reference extraction, `ours-ft`'s augmented view, its key) in `motif_inputs`.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import torch

from narbench.train import health, losses
from narbench.baselines.motif_inputs import augment
from narbench.baselines.ours_models import FineTunedMacro, MacroModel, MotifPairModel
from narbench.train.encoder import Encoder, Labels
from narbench.data.graph import ArchGraph, import_torch_geometric
from narbench.train.partcache import PartsCache, split_graphs
from narbench.train.parts import GraphParts, adjacency, induced_subgraphs, neighbourhoods
from narbench.train.splitter import Partition
from narbench.train.trainer import Trainer


class MotifEncoder(Encoder):
    """Motif sampling, macro graphs and two-stage contrastive training (the paper's method)."""

    name = "ours"
    uses_splitter = True
    default_splitter = "motif"
    paper_labels = ("family", "family")  # section 3.5: eq. 5 and the classifier on the model family
    context_hops = 1
    #: `stage1`: False leaves F_s at its random initialisation, frozen (ablation: no stage 1);
    #: `motif_examples`: `distinct` (one stage-1 pair per distinct motif, its first occurrence's
    #: context) or `occurrences` (one pair per occurrence, Algorithm 1's loop; ablation);
    #: `stage1_lr`: stage 1's learning rate, None for the profile's `motif_train.lr` (0.01 is
    #: Table 5's); `last_activation`: ReLU + dropout after F_s's and F_c's last layer (Table 5's
    #: build, the default) or a linear last layer; `stage1_dropout`: F_s's and F_c's dropout, None
    #: for the profile's model dropout;
    #: `health_sample`: distinct training motifs in the fixed sample of the stage-1 health record.
    PARAMS = {"stage1": True, "motif_examples": "distinct", "stage1_lr": None, "last_activation": True,
              "stage1_dropout": None, "health_sample": 1024}
    MOTIF_EXAMPLES = ("distinct", "occurrences")

    def __init__(self, num_ops, num_classes, profile, splitter=None) -> None:
        super().__init__(num_ops, num_classes, profile, splitter)
        self._build_pair()
        cfg = self.model_config
        self.macro = MacroModel(cfg.hidden, cfg.layers, cfg.dropout, num_classes)
        self._parts: dict[str, GraphParts] = {}  # graph content hash -> its parts, for the whole run
        self._hashes: dict[int, tuple[ArchGraph, str]] = {}  # id(graph) -> (graph, content hash)
        self._motif_data: dict[bytes, object] = {}  # motif key -> its subgraph (first occurrence)
        self._motif_cache: dict[bytes, torch.Tensor] = {}
        self.parts_cache: PartsCache | None = PartsCache()  # on disk, across runs; None: off
        self.stats: dict[str, float] = {}

    def _build_pair(self) -> None:
        cfg = self.model_config
        dropout = cfg.dropout if self.stage1_dropout is None else float(self.stage1_dropout)
        self.pair = MotifPairModel(self.num_ops, cfg.hidden, cfg.layers, dropout, self.last_activation)

    def params_changed(self) -> None:
        if self.motif_examples not in self.MOTIF_EXAMPLES:
            raise ValueError(f"motif_examples must be one of {', '.join(self.MOTIF_EXAMPLES)}, got {self.motif_examples!r}")
        dropout = self.model_config.dropout if self.stage1_dropout is None else float(self.stage1_dropout)
        if self.pair.f_s.last_activation != self.last_activation or self.pair.f_s.dropout.p != dropout:
            self._build_pair()

    def stage1_config(self):
        """Stage 1's recipe: the profile's `motif_train` with `stage1_lr` when set."""
        cfg = self.profile.motif_train
        return cfg if self.stage1_lr is None else replace(cfg, lr=float(self.stage1_lr))

    def config(self) -> dict:
        out = super().config()
        out.update(motif_train=asdict(self.stage1_config()), context_hops=self.context_hops)
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
        cache (`narbench.train.partcache`); graphs not there are split in `trainer.jobs` processes.
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

    def _macro_datas(self, graphs: list[ArchGraph], motifs: list[GraphParts], labels: Labels | None = None,
                     nodes=None):
        """One macro graph per graph: node features `nodes(parts)` (default: the cached F_s embeddings
        of its parts), its macro edges, and the training labels when given."""
        import_torch_geometric()
        from torch_geometric.data import Data

        datas = []
        cache = self._motif_cache
        if nodes is None:
            def nodes(parts: GraphParts) -> torch.Tensor:
                return torch.stack([cache[key] for key in parts.keys])

        for i, parts in enumerate(motifs):
            data = Data(x=nodes(parts), edge_index=torch.as_tensor(parts.macro_edges), num_nodes=parts.num_parts)
            if labels is not None:
                data.y_cl = torch.tensor([int(labels.cl[i])])
                data.y_ce = torch.tensor([int(labels.ce[i])])
            datas.append(data)
        return datas

    # -- Encoder API ------------------------------------------------------------------------
    def stage1_pairs(self, graphs: list[ArchGraph], motifs: list[GraphParts]) -> list[tuple]:
        """Stage 1's (motif, context) pairs: per distinct motif (its first occurrence's context)
        or per occurrence (`motif_examples`)."""
        if self.motif_examples == "distinct":
            first: dict[bytes, tuple[int, int]] = {}
            for gi, parts in enumerate(motifs):
                for pi, key in enumerate(parts.keys):
                    if key not in first:
                        first[key] = (gi, pi)
            contexts = self._contexts(graphs, motifs, first)
            return [(self._motif_data[key], contexts[key]) for key in first]
        pairs = []
        for g, parts in zip(graphs, motifs):
            csr = adjacency(g)
            everything = list(range(parts.num_parts))
            sub = induced_subgraphs(g, *neighbourhoods(g, *parts.select(everything), self.context_hops, csr=csr), csr=csr)
            pairs.extend((self._motif_data[key], sub.data(j)) for j, key in enumerate(parts.keys))
        return pairs

    def health_sample_keys(self, motifs: list[GraphParts], seed: int) -> list[bytes]:
        """A fixed sample of distinct training motifs (at most `health_sample`, chosen by the
        run's seed from the keys in sorted order): what the stage-1 health record embeds."""
        keys = sorted({key for parts in motifs for key in parts.keys})
        if len(keys) > self.health_sample:
            pick = np.random.default_rng(seed).choice(len(keys), self.health_sample, replace=False)
            keys = [keys[i] for i in sorted(pick)]
        return keys

    def motif_health(self, trainer: Trainer, keys: list[bytes]) -> dict:
        """`narbench.train.health` of F_s's raw output (eval mode) on the motifs `keys`."""
        emb = trainer.embed(self.pair.f_s, [self._motif_data[k] for k in keys], self.profile.motif_train.batch_size,
                            desc=f"health of {len(keys)} motifs")
        return health.health(emb)

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        motifs = self._motifs(trainer, graphs, "split train graphs")
        self.stats.update(train_motifs=sum(p.num_parts for p in motifs),
                          distinct_train_motifs=len({k for p in motifs for k in p.keys}))
        sample = self.health_sample_keys(motifs, getattr(trainer, "seed", 0))
        record: dict = {"trained": bool(self.stage1), "motif_examples": self.motif_examples,
                        "before": self.motif_health(trainer, sample)}
        # Stage 1: (motif, context) pairs, eq. 4 with in-batch negatives.
        if self.stage1:
            pairs = self.stage1_pairs(graphs, motifs)
            record["pairs"] = len(pairs)
            cfg = self.stage1_config()
            temperature = cfg.temperature

            def motif_step(model: MotifPairModel, batch) -> torch.Tensor:
                motif_batch, context_batch = batch
                return losses.info_nce(model.f_s(motif_batch), model.f_c(context_batch), temperature)

            if len(pairs) >= 2:
                hist = trainer.fit(self.pair, pairs, cfg, motif_step, stage="stage 1: motifs")
                record["loss"] = [round(v, 6) for v in hist.losses]
        self.pair.eval()
        for p in self.pair.f_s.parameters():
            p.requires_grad_(False)
        record["after"] = self.motif_health(trainer, sample)
        self.stats["stage1_health"] = record
        self.stage2(trainer, graphs, motifs, labels)

    def stage2(self, trainer: Trainer, graphs: list[ArchGraph], motifs: list[GraphParts], labels: Labels) -> None:
        """Stage 2 (eq. 5-7): F_m on macro graphs of frozen motif embeddings."""
        self._embed_motifs(trainer, motifs)
        datas = self._macro_datas(graphs, motifs, labels)
        trainer.fit_graph_level(self.macro, datas, self.profile.train, stage="stage 2: macro graphs")

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        motifs = self._motifs(trainer, graphs, "split graphs")
        self._embed_motifs(trainer, motifs)
        datas = self._macro_datas(graphs, motifs)
        self.stats["mean_parts"] = float(np.mean([p.num_parts for p in motifs])) if motifs else 0.0
        return trainer.embed(self.macro, datas, self.profile.eval_batch_size, desc="embed macro graphs")


class FineTunedMotifEncoder(MotifEncoder):
    """`ours-ft`: the paper's method with F_s fine-tuned in stage 2 (not frozen, as eq. 7 has it).

    Stage 1 is the paper's (F_s and F_c, InfoNCE on motif and context). Stage 2 trains F_s and F_m
    together on eq. 5 + 6: every macro-graph node is its motif's F_s embedding computed in the
    forward pass, so the graph-level labels reach the motif encoder. The measurements that point
    at it (issue 39, docs/encoders.md): stage 1 teaches F_s to tell motifs apart by identity, and a
    frozen F_s cannot unlearn that. Everything else (splitter, stage 1, parameters, inference
    eq. 8) is `ours`'; stage 2 costs F_s's forward and backward on each batch's distinct motifs.
    """

    name = "ours-ft"
    #: `stage1_positive` (issue 39): stage 1's positive for a motif. `context` (the paper's: its own
    #: context graph G_c), `augmented` (a view of the motif itself with nodes and edges dropped,
    #: GraphCL-style: what survives small edits is design), or `family` (a motif of another training
    #: graph of the same family: the positive carries the label's design signal; a family of one
    #: graph falls back to `augmented`). The positive goes through F_c, as G_c does.
    PARAMS = {**MotifEncoder.PARAMS, "stage1_positive": "context"}
    STAGE1_POSITIVES = ("context", "augmented", "family")
    #: GraphCL's rates for the `augmented` view: each node dropped with 0.1, each edge with 0.2.
    DROP_NODE, DROP_EDGE = 0.1, 0.2

    def params_changed(self) -> None:
        if self.stage1_positive not in self.STAGE1_POSITIVES:
            raise ValueError(f"stage1_positive must be one of {', '.join(self.STAGE1_POSITIVES)}, "
                             f"got {self.stage1_positive!r}")
        super().params_changed()

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        self._stage1_labels, self._stage1_seed = labels, int(getattr(trainer, "seed", 0))
        super().fit(trainer, graphs, labels)
        self.stats["stage1_health"]["positive"] = self.stage1_positive

    def stage1_pairs(self, graphs: list[ArchGraph], motifs: list[GraphParts]) -> list[tuple]:
        """(motif, positive) pairs: the paper's (motif, context) for `context`, else the same
        examples (per distinct motif or per occurrence) with the positive `stage1_positive` names."""
        if self.stage1_positive == "context":
            return super().stage1_pairs(graphs, motifs)
        if self.motif_examples == "distinct":
            seen: set[bytes] = set()
            examples = []
            for gi, parts in enumerate(motifs):
                for key in parts.keys:
                    if key not in seen:
                        seen.add(key)
                        examples.append((gi, key))
        else:
            examples = [(gi, key) for gi, parts in enumerate(motifs) for key in parts.keys]
        rng = np.random.default_rng(self._stage1_seed)
        by_label: dict[int, list[int]] = {}
        if self.stage1_positive == "family":
            for gi, y in enumerate(np.asarray(self._stage1_labels.ce).tolist()):
                if motifs[gi].num_parts:
                    by_label.setdefault(int(y), []).append(gi)
        pairs = []
        for gi, key in examples:
            motif = self._motif_data[key]
            others = [g for g in by_label.get(int(self._stage1_labels.ce[gi]), ()) if g != gi] if by_label else []
            if others:
                gj = others[int(rng.integers(len(others)))]
                keys = motifs[gj].keys
                pairs.append((motif, self._motif_data[keys[int(rng.integers(len(keys)))]]))
            else:
                pairs.append((motif, augment(motif, rng, self.DROP_NODE, self.DROP_EDGE)))
        return pairs

    def stage2(self, trainer: Trainer, graphs: list[ArchGraph], motifs: list[GraphParts], labels: Labels) -> None:
        index: dict[bytes, int] = {}  # motif key -> motif id (a macro-graph node's feature)
        for parts in motifs:
            for key in parts.keys:
                index.setdefault(key, len(index))
        datas = self._macro_datas(graphs, motifs, labels,
                                  nodes=lambda parts: torch.tensor([index[k] for k in parts.keys], dtype=torch.long))
        for p in self.pair.f_s.parameters():
            p.requires_grad_(True)
        model = FineTunedMacro(self.pair.f_s, self.macro, [self._motif_data[key] for key in index])
        self.stats["stage2_motifs"] = len(index)
        trainer.fit_graph_level(model, datas, self.profile.train, stage="stage 2: macro graphs, F_s fine-tuned")
        self.weights_changed()
        self.pair.eval()
        for p in self.pair.f_s.parameters():
            p.requires_grad_(False)

    def weights_changed(self) -> None:
        """F_s changes in stage 2: motif embeddings cached before are stale."""
        self._motif_cache.clear()
