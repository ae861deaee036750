"""Why two architectures are alike, as data a page can draw: both graphs, repeated blocks folded,
the structure they share marked.

- **Matched** nodes: a node whose 2-step neighbourhood pattern (the WL label of eq. 2,
  `narbench.splitters.motif.encode_levels`, parents and children) occurs anywhere in the other graph:
  the same op in the same local wiring. **Differing** nodes: an op type the other graph has none of.
- **Folding**: the paper's motif splitter cuts each graph into segments of its topological order;
  a run of consecutive segments with the same ops and the same internal wiring (a repeated block:
  ResNet's bottlenecks, a transformer's layers) is drawn as one node, `block x N`, as Model
  Explorer folds repeated layers. Folding changes the drawing, never the marks: a block is
  matched when all its nodes are, differing when any is.
- The op-count overlap line is the CLI's (`narbench.search_engine.engine.explain`).
- `roles=True` (a search in an index that reads activations and norms by role, `narbench.data.roles`):
  marks and the overlap line read every op of a role as the role, as that index does (a ReLU network
  beside its GELU twin is wired alike); the nodes keep their own op names.

Both graphs are compared by op *name* (a query extracted in the index's vocabulary, a corpus graph
in its dataset's), so their op-id tables need not agree.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from narbench.data.graph import ArchGraph

#: WL steps of the matched marks: 2 = the motif splitter's own neighbourhood pattern
STEPS = 2


def _named(graph: ArchGraph, vocab: list[str], common: dict[str, int]) -> ArchGraph:
    """`graph` with op ids of the shared name table `common` (extended in place with new names)."""
    names = [vocab[o] if 0 <= o < len(vocab) else f"op{o}" for o in graph.ops.tolist()]
    ids = np.array([common.setdefault(n, len(common)) for n in names], dtype=np.int64)
    return ArchGraph(ids, graph.edges, graph.name, graph.family, graph.coarse, graph.source)


def _runs(graph: ArchGraph) -> list[list[np.ndarray]]:
    """The motif splitter's segments grouped into runs of identical consecutive blocks."""
    from narbench.splitters.motif import MotifSplitter

    parts = [p for p in MotifSplitter().split(graph).parts if len(p)]
    src, dst = graph.edges

    def signature(p: np.ndarray) -> tuple:
        local = {int(v): i for i, v in enumerate(p.tolist())}
        inside = [(local[s], local[d]) for s, d in zip(src.tolist(), dst.tolist()) if s in local and d in local]
        return tuple(graph.ops[p].tolist()), tuple(sorted(inside))

    runs: list[list[np.ndarray]] = []
    last = None
    for p in parts:
        sig = signature(p)
        if runs and sig == last:
            runs[-1].append(p)
        else:
            runs.append([p])
        last = sig
    return runs


def draw(graph: ArchGraph, names: list[str], matched: np.ndarray, differs: np.ndarray, *, fold: bool = True) -> dict[str, Any]:
    """Nodes and edges of `graph` for the page: one node per op (`names[i]`: node i's op name), a run of
    repeated blocks as one."""
    n = graph.num_nodes
    owner = np.arange(n)  # display node of each op node (its own id, or its block's)
    nodes: list[dict[str, Any]] = []
    blocks = 0
    covered = np.zeros(n, dtype=bool)
    if fold and n:
        for run in _runs(graph):
            if len(run) < 2:
                continue
            members = np.unique(np.concatenate(run))  # segments may share a node: each node once
            members = members[~covered[members]]
            if not len(members):
                continue
            covered[members] = True
            bid = n + blocks
            blocks += 1
            owner[members] = bid
            per_copy = Counter(names[i] for i in run[0].tolist())
            top = ", ".join(f"{op}" for op, _ in per_copy.most_common(3))
            nodes.append({"id": f"b{bid}", "label": f"block x{len(run)} ({len(run[0])} ops: {top})", "block": len(run),
                          "ops": int(len(members)), "matched": bool(matched[members].all()),
                          "differs": bool(differs[members].any())})
    for i in range(n):
        if owner[i] == i:
            nodes.append({"id": f"n{i}", "label": names[i], "block": 0, "ops": 1,
                          "matched": bool(matched[i]), "differs": bool(differs[i])})
    src, dst = graph.edges
    pairs = {(int(owner[s]), int(owner[d])) for s, d in zip(src.tolist(), dst.tolist()) if owner[s] != owner[d]}
    key = (lambda v: f"b{v}" if v >= n else f"n{v}")
    edges = [{"source": key(s), "target": key(d)} for s, d in sorted(pairs)]
    return {"name": graph.name, "family": graph.family, "num_nodes": n, "num_edges": graph.num_edges,
            "blocks": blocks, "nodes": nodes, "edges": edges,
            "matched": float(matched.mean()) if n else 0.0, "differs": int(differs.sum())}


def compare(a: ArchGraph, a_vocab: list[str], b: ArchGraph, b_vocab: list[str], *, fold: bool = True,
            roles: bool = False) -> dict[str, Any]:
    """Both graphs drawn with their shared structure marked, and the op-count overlap line (`roles`: module
    docstring)."""
    from narbench.data.roles import ROLE_OF
    from narbench.search_engine.engine import explain
    from narbench.splitters.motif import encode_levels

    role_of = ROLE_OF if roles else {}
    a_keys, b_keys = ([role_of.get(n, n) for n in vocab] for vocab in (a_vocab, b_vocab))
    common: dict[str, int] = {}
    ga, gb = _named(a, a_keys, common), _named(b, b_keys, common)  # marks read ops by role when `roles`
    la, lb = encode_levels(ga, STEPS, children=True)[-1], encode_levels(gb, STEPS, children=True)[-1]
    ops_a, ops_b = set(ga.ops.tolist()), set(gb.ops.tolist())
    out, counts = {}, []
    for side, g, mine, other, other_ops, own, vocab in (("query", ga, la, lb, ops_b, a, a_vocab),
                                                         ("hit", gb, lb, la, ops_a, b, b_vocab)):
        labels = [vocab[o] if 0 <= o < len(vocab) else f"op{o}" for o in own.ops.tolist()]  # the ops' own names
        matched = np.isin(mine, other)
        differs = ~np.isin(g.ops, np.fromiter(other_ops, dtype=np.int64, count=len(other_ops)))
        out[side] = draw(g, labels, matched, differs, fold=fold)
        counts.append(dict(Counter(labels)))
    out["why"] = explain(*counts, roles=roles)  # `explain` counts by role itself
    return out
