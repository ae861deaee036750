"""`graf`: a training-free floor of GRAF-style graph features (Kadlecová et al., ICML 2024).

GRAF ("Surprisingly Strong Performance Prediction with Neural Graph Features") found that
simple, interpretable counts of a network's graph -- op counts, op-to-op connections, degrees,
path lengths -- match or beat learned NAS encodings. For retrieval by cosine they have to be put
into one vector; which of them, and with what weight, was chosen on validation splits carved
from the training graphs (`design_table`, the `quick` training graphs of `nas` standard, `real`
standard and `real` unseen; the table is `baselines/graf_design.csv`), never on query metrics:

- `op_pairs`: the number of edges from op a to op b, for every (a, b) pair that occurs in a
  training graph (a pair no training graph holds has no column: a vocabulary fitted like
  scikit-learn's `CountVectorizer`), log1p;
- `degrees`: the share of nodes with in-degree 0, 1, 2, 3 and 4 or more, and the same for the
  out-degree;
- `op_degrees`: per op type, the mean in-degree and the mean out-degree of its nodes (0 where
  the op is absent), GRAF's degree features by op type.

Each block is scaled to unit length per graph and weighted by the square root of its weight
(`WEIGHTS`: op pairs 1, degrees 0.25, op degrees 0.25), so the cosine of two graphs is the
weighted mean of the blocks' cosines (where no block is empty). This is the design with the
highest mean validation NDCG@20 over the three settings (0.8403; op pairs alone 0.8374). The
other GRAF features -- op counts, the `graphstats` structure statistics (depth, width, path
lengths, skip edges, sources and sinks), a node-depth profile, the mean relative depth of each
op type -- and the standardised, equally weighted set of all of them (0.7178) lowered it; the
structure statistics stay a floor of their own (`graphstats`).

Every feature is a function of the multiset of (op, in-degree, out-degree) of the nodes and of
(op, op) of the edges: independent of node numbering. It sees no label (`trainable = False`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from narbench.data.graph import ArchGraph
from narbench.train.encoder import Encoder, Labels
from narbench.train.trainer import Trainer

#: in- and out-degree histogram bins: 0, 1, 2, 3, >= 4
DEGREE_BINS = 5
#: bins of a node's relative depth, depth / (depth + height) (design table only)
DEPTH_BINS = 8
#: the blocks of `graf` and their weights (chosen on validation: `design_table`)
WEIGHTS: dict[str, float] = {"op_pairs": 1.0, "degrees": 0.25, "op_degrees": 0.25}

_KERNELS = None


def _kernels():
    """The numba kernel module (node depths and heights), imported on first use."""
    global _KERNELS
    if _KERNELS is None:
        from narbench.core.jit import setup_numba_cache

        setup_numba_cache()
        from narbench.baselines import _graf_kernels

        _KERNELS = _graf_kernels
    return _KERNELS


def pair_ids(graphs: list[ArchGraph], num_ops: int) -> tuple[np.ndarray, np.ndarray]:
    """(graph id, op pair id = op(src) * num_ops + op(dst)) of every edge of `graphs`."""
    if not graphs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    gid = np.repeat(np.arange(len(graphs), dtype=np.int64), [g.num_edges for g in graphs])
    pair = np.concatenate([g.ops[g.edges[0]] * num_ops + g.ops[g.edges[1]] for g in graphs]).astype(np.int64)
    return gid, pair


def pair_counts(graphs: list[ArchGraph], num_ops: int, vocab: np.ndarray) -> np.ndarray:
    """Edge counts per op pair of `vocab` (sorted pair ids), float64 [len(graphs), len(vocab)]."""
    vocab = np.asarray(vocab)  # a fitted buffer (a CPU tensor) reads as its array
    gid, pair = pair_ids(graphs, num_ops)
    if not len(vocab) or not len(pair):
        return np.zeros((len(graphs), len(vocab)))
    col = np.minimum(np.searchsorted(vocab, pair), len(vocab) - 1)
    known = vocab[col] == pair
    flat = gid[known] * len(vocab) + col[known]
    return np.bincount(flat, minlength=len(graphs) * len(vocab)).reshape(len(graphs), len(vocab)).astype(np.float64)


def _nodes(graphs: list[ArchGraph]):
    """Per node of all `graphs`: graph id, global in- and out-degree; and the offsets for the kernels."""
    sizes = np.array([g.num_nodes for g in graphs], dtype=np.int64)
    node_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    edge_off = np.concatenate([[0], np.cumsum([g.num_edges for g in graphs])]).astype(np.int64)
    src = np.concatenate([g.edges[0] for g in graphs]).astype(np.int64)
    dst = np.concatenate([g.edges[1] for g in graphs]).astype(np.int64)
    shift = np.repeat(node_off[:-1], np.diff(edge_off))
    total = int(node_off[-1])
    indeg = np.bincount(dst + shift, minlength=total)
    outdeg = np.bincount(src + shift, minlength=total)
    gid = np.repeat(np.arange(len(graphs), dtype=np.int64), sizes)
    return sizes, gid, indeg, outdeg, (node_off, edge_off, src, dst)


def degree_shares(graphs: list[ArchGraph]) -> np.ndarray:
    """Shares of nodes with in-degree 0..3, >= 4, then the same for the out-degree, float64 [len(graphs), 10]."""
    G = len(graphs)
    if not G:
        return np.zeros((0, 2 * DEGREE_BINS))
    sizes, gid, indeg, outdeg, _ = _nodes(graphs)
    out = []
    for deg in (indeg, outdeg):
        d = np.minimum(deg, DEGREE_BINS - 1)
        out.append(np.bincount(gid * DEGREE_BINS + d, minlength=G * DEGREE_BINS).reshape(G, DEGREE_BINS))
    return np.concatenate(out, axis=1) / np.maximum(sizes, 1)[:, None]


def op_degrees(graphs: list[ArchGraph], num_ops: int) -> np.ndarray:
    """Per op type, the mean in-degree, then the mean out-degree, of its nodes (0 where absent), float64 [len(graphs), 2 * num_ops]."""
    G = len(graphs)
    if not G:
        return np.zeros((0, 2 * num_ops))
    _, gid, indeg, outdeg, _ = _nodes(graphs)
    flat = gid * num_ops + np.concatenate([g.ops for g in graphs]).astype(np.int64)
    counts = np.maximum(np.bincount(flat, minlength=G * num_ops), 1)
    return np.concatenate([(np.bincount(flat, weights=d.astype(np.float64), minlength=G * num_ops) / counts)
                           .reshape(G, num_ops) for d in (indeg, outdeg)], axis=1)


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def features(graphs: list[ArchGraph], num_ops: int, pairs: np.ndarray,
             weights: dict[str, float] = WEIGHTS) -> np.ndarray:
    """GRAF's weighted, unit-length blocks over `pairs` (the op pairs of some training graphs),
    float64 [len(graphs), len(pairs) + 10 + 2 * num_ops]. `graf` embeds these; `graf-lda` projects them."""
    blocks = {"op_pairs": np.log1p(pair_counts(graphs, num_ops, pairs)),
              "degrees": degree_shares(graphs), "op_degrees": op_degrees(graphs, num_ops)}
    return np.concatenate([np.sqrt(w) * unit(blocks[k]) for k, w in weights.items()], axis=1)


class GrafEncoder(Encoder):
    """Training-free floor: GRAF-style features (log op-pair counts, degree histograms, degrees per op type), cosine."""

    name = "graf"
    trainable = False
    weights: ClassVar[dict[str, float]] = WEIGHTS
    FITTED = ("pairs",)  # the op pairs of the training graphs (saved weights and search indexes carry them)

    def config(self) -> dict:
        return {**super().config(), "weights": dict(self.weights)}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        self.pairs = torch.from_numpy(np.unique(pair_ids(graphs, self.num_ops)[1]).astype(np.int64))
        self.stats = {"op_pairs": int(len(self.pairs))}

    def features(self, graphs: list[ArchGraph]) -> np.ndarray:
        """The weighted, unit-length blocks (module-level `features`) over the training graphs' op pairs."""
        if self.pairs is None:
            raise RuntimeError("graf: call fit() first (the op pairs are those of the training graphs)")
        return features(graphs, self.num_ops, self.fitted("pairs"), self.weights)

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        return torch.from_numpy(self.features(graphs).astype(np.float32))


# ------------------------------------------------------------------------- the design table


def candidate_blocks(graphs: list[ArchGraph], num_ops: int, vocab: np.ndarray) -> dict[str, np.ndarray]:
    """Every block the design table weighs, raw (float64 [len(graphs), width] each)."""
    from narbench.baselines.graphstats import graph_stats

    stats = graph_stats(graphs, num_ops)
    sizes, gid, _, _, kernel_args = _nodes(graphs)
    G = len(graphs)
    ops = np.concatenate([g.ops for g in graphs]).astype(np.int64)
    counts = stats[:, :num_ops]
    per_op = np.maximum(counts, 1)
    depth, height = _kernels().depth_height(*kernel_args)
    span = depth + height
    position = np.where(span > 0, depth / np.maximum(span, 1), 0.0)
    bins = np.minimum((position * DEPTH_BINS).astype(np.int64), DEPTH_BINS - 1)
    flat = gid * num_ops + ops

    def by_op(weights):
        return np.bincount(flat, weights=weights, minlength=G * num_ops).reshape(G, num_ops) / per_op

    return {
        "op_pairs": np.log1p(pair_counts(graphs, num_ops, vocab)),
        "degrees": degree_shares(graphs),
        "op_counts": np.log1p(counts),
        "structure": np.log1p(stats[:, 2 * num_ops :]),
        "depth_profile": np.bincount(gid * DEPTH_BINS + bins, minlength=G * DEPTH_BINS).reshape(G, DEPTH_BINS)
        / np.maximum(sizes, 1)[:, None],
        "op_position": by_op(position),
        "op_degrees": op_degrees(graphs, num_ops),
    }


#: the designs `design_table` scores: (name, scheme, block weights). `unit`: each block unit length
#: per graph, weighted by sqrt(weight); `standardised`: columns z-scored on the pool (+-5), each
#: block scaled by sqrt(weight / width), the GRAF feature set as a regression would take it.
DESIGNS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("standardised, every block", "standardised", dict.fromkeys(
        ("op_counts", "op_pairs", "degrees", "op_degrees", "structure", "depth_profile", "op_position"), 1.0)),
    ("op counts", "unit", {"op_counts": 1.0}),
    ("op pairs", "unit", {"op_pairs": 1.0}),
    ("op pairs + 0.5 op counts", "unit", {"op_pairs": 1.0, "op_counts": 0.5}),
    ("op pairs + 0.25 degrees", "unit", {"op_pairs": 1.0, "degrees": 0.25}),
    ("op pairs + 0.5 degrees", "unit", {"op_pairs": 1.0, "degrees": 0.5}),
    ("op pairs + 0.25 degrees + 0.25 op degrees (graf)", "unit", WEIGHTS),
    ("op pairs + 0.25 structure", "unit", {"op_pairs": 1.0, "structure": 0.25}),
    ("op pairs + 0.25 depth profile", "unit", {"op_pairs": 1.0, "depth_profile": 0.25}),
    ("op pairs + 0.25 op position", "unit", {"op_pairs": 1.0, "op_position": 0.25}),
    ("op pairs + 0.25 every other block", "unit", {"op_pairs": 1.0, **dict.fromkeys(
        ("op_counts", "degrees", "op_degrees", "structure", "depth_profile", "op_position"), 0.25)}),
)


def design_table(graphs: list[ArchGraph], labels: np.ndarray, num_ops: int) -> dict[str, float]:
    """Validation NDCG@20 of every design in `DESIGNS` on `best-floor`'s validation split of `graphs`."""
    from narbench.baselines.selection import validation_split
    from narbench.eval.metrics import score_rankings
    from narbench.eval.retrieval import tiebreak_keys, top_k_cosine

    labels = np.asarray(labels)
    pool, val = validation_split(labels)
    ordered = [graphs[i] for i in pool] + [graphs[i] for i in val]
    vocab = np.unique(pair_ids(ordered[: len(pool)], num_ops)[1])
    raw = candidate_blocks(ordered, num_ops, vocab)
    keys = tiebreak_keys(ordered[: len(pool)])
    out = {}
    for name, scheme, weights in DESIGNS:
        parts = []
        for k, w in weights.items():
            x = raw[k]
            if scheme == "unit":
                parts.append(np.sqrt(w) * unit(x))
            else:
                sd = x[: len(pool)].std(axis=0)
                z = np.clip((x - x[: len(pool)].mean(axis=0)) / np.where(sd > 0, sd, 1.0), -5.0, 5.0)
                parts.append(np.sqrt(w / max(x.shape[1], 1)) * z)
        emb = torch.from_numpy(np.concatenate(parts, axis=1).astype(np.float32))
        ranked, _ = top_k_cosine(emb[len(pool):], emb[: len(pool)], 20, tiebreak=keys)
        out[name] = score_rankings(labels[val], labels[pool], ranked.numpy(), ks=(20,))[0]["ndcg@20"]
    return out


#: the settings of `design_csv`: `best-floor`'s validation splits on the `quick` training graphs (seed 0)
DESIGN_SETTINGS = (("nas", "standard"), ("real", "standard"), ("real", "unseen"))


def design_csv() -> str:
    """The design table (`baselines/graf_design.csv`, `python -m narbench.cli.graf`) as CSV text: every design's
    validation NDCG@20 on the `quick` training graphs (seed 0) of nas standard, real standard and real unseen."""
    import csv
    import io

    from narbench.data.dataset import load_dataset, stratified_subset
    from narbench.train.profiles import get_profile

    profile, table, datasets = get_profile("quick"), {}, {}
    for ds, split in DESIGN_SETTINGS:
        dataset = datasets.setdefault(ds, load_dataset(ds))
        sp, fam = dataset.get_split(split), np.array([g.family for g in dataset.graphs])
        train = stratified_subset(sp.train, fam[sp.train], profile.max_train, seed=0)  # as `narbench run` trains
        table[f"{ds}/{split}"] = design_table([dataset.graphs[i] for i in train], dataset.family_ids()[train],
                                              len(dataset.vocab))
    columns = list(table)
    rows = [[name, scheme, ";".join(f"{k}={w:g}" for k, w in weights.items()),
             *(f"{table[c][name]:.5f}" for c in columns),
             f"{np.mean([table[c][name] for c in columns]):.5f}"] for name, scheme, weights in DESIGNS]
    header = ["design", "scheme", "weights", *(f"val_ndcg@20 {c}" for c in columns), "mean"]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return text.getvalue()
