"""What a splitter makes of a dataset's graphs: parts, part sizes, repeats, macro graphs.

For each splitter (default: `motif` and `node-number`) on a stratified sample of the graphs
(by family, seed 0), per graph: the number of parts, part sizes, the share of the graph's
nodes that lie in a *repeated* part (a part whose exact subgraph key occurs at least twice in
the graph), the macro graph's nodes and edges, summarised over graphs (mean, percentiles,
max). More figures say how much the split can lose before any training:

- `one-part graphs`: graphs left as a single part (the macro stage then sees one node: the
  method degenerates to F_s, a motif encoder, on the whole graph);
- `largest part share`: the share of a graph's nodes in its largest part (what one F_s
  mean-pool has to summarise); `distinct parts`: different part keys per graph;
- `macro collisions`: graph pairs of *different* families whose macro-graph inputs are the
  same (same part keys in order and the same macro edges) while their graphs differ; no
  encoder on top of the split can tell them apart. Counted over the families of the sample;
- `part_key_loo`: leave-one-out family P@1 / P@5 in the sample of each graph as the multiset
  of its exact part keys (cosine), beside the whole graph's op histogram (`ophist_loo`):
  training-free, it measures how much family information the exact parts carry.

    python -m benchmarks.method.real_parts --dataset real --sample 1000 [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from narbench.data.dataset import load_dataset, stratified_subset
from narbench.train.partcache import PartsCache, split_graphs
from narbench.core.registry import load


def summarise(values, qs=(50, 90, 99)) -> dict:
    v = np.asarray(values, dtype=float)
    return {"mean": round(float(v.mean()), 3), **{f"p{q}": round(float(np.percentile(v, q)), 3) for q in qs},
            "max": round(float(v.max()), 3)}


def loo_precision(vectors, families: np.ndarray, k: int = 5) -> dict:
    """Leave-one-out P@1 and P@k by family among the sample (cosine of the row vectors), over
    graphs whose family has another graph in the sample: how much family information a
    training-free representation keeps."""
    from sklearn.preprocessing import normalize

    x = normalize(vectors.astype(np.float64))
    sim = (x @ x.T).toarray() if hasattr(x, "toarray") else x @ x.T
    np.fill_diagonal(sim, -np.inf)
    counts = {f: int((families == f).sum()) for f in set(families)}
    keep = np.array([counts[f] >= 2 for f in families])
    top = np.argsort(-sim[keep], axis=1, kind="stable")[:, :k]
    hit = families[top] == families[keep][:, None]
    return {"p@1": round(float(hit[:, 0].mean()), 4), f"p@{k}": round(float(hit.mean()), 4), "queries": int(keep.sum())}


def key_vectors(parts) -> "object":
    """Each graph as the multiset of its part keys (sparse counts; equal keys = equal subgraphs)."""
    from scipy.sparse import csr_matrix

    ids: dict[bytes, int] = {}
    rows, cols = [], []
    for i, p in enumerate(parts):
        for k in p.keys:
            rows.append(i)
            cols.append(ids.setdefault(k, len(ids)))
    return csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(parts), len(ids)))


def measure(graphs, splitter_name: str, jobs: int) -> dict:
    splitter = load("splitter", splitter_name)()
    t = time.perf_counter()
    parts = split_graphs(splitter, graphs, jobs=jobs, cache=PartsCache())
    seconds = time.perf_counter() - t
    n_parts, sizes, repeated, macro_nodes, macro_edges, one_part, largest = [], [], [], [], [], 0, []
    signature = {}
    for g, p in zip(graphs, parts):
        counts = defaultdict(int)
        for k in p.keys:
            counts[k] += 1
        size = np.diff(p.offsets)
        in_repeat = set()
        for i, k in enumerate(p.keys):
            if counts[k] >= 2:
                in_repeat.update(p.part(i).tolist())
        n_parts.append(p.num_parts)
        sizes.extend(size.tolist())
        repeated.append(len(in_repeat) / max(g.num_nodes, 1))
        largest.append(int(size.max()) / max(g.num_nodes, 1))
        macro_nodes.append(p.num_parts)
        macro_edges.append(p.macro_edges.shape[1])
        one_part += p.num_parts == 1
        h = hashlib.blake2b(digest_size=16)
        for k in p.keys:
            h.update(k)
        h.update(np.ascontiguousarray(p.macro_edges, dtype="<i8").tobytes())
        signature.setdefault(h.digest(), []).append(g)
    families = np.array([g.family for g in graphs])
    distinct = [len(set(p.keys)) for p in parts]
    collisions = 0
    for same in signature.values():
        for i in range(len(same)):
            for j in range(i + 1, len(same)):
                a, b = same[i], same[j]
                if a.family != b.family and a.content_hash() != b.content_hash():
                    collisions += 1
    return {"splitter": splitter_name, "params": splitter.params(), "seconds": round(seconds, 1),
            "parts_per_graph": summarise(n_parts), "part_size": summarise(sizes),
            "repeated_node_share": summarise(repeated), "largest_part_share": summarise(largest), "macro_nodes": summarise(macro_nodes),
            "macro_edges": summarise(macro_edges), "one_part_graphs": one_part,
            "distinct_macro_inputs": len(signature), "macro_collisions_across_families": collisions,
            "distinct_parts_per_graph": summarise(distinct), "part_key_loo": loo_precision(key_vectors(parts), families)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="real")
    ap.add_argument("--sample", type=int, default=1000, help="graphs, stratified by family (0: all)")
    ap.add_argument("--splitter", action="append", default=None, help="default: motif and node-number")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    ds = load_dataset(args.dataset)
    fam = np.array([g.family for g in ds.graphs])
    idx = np.arange(len(ds.graphs))
    if args.sample:
        idx = stratified_subset(idx, fam, args.sample, seed=0)
    graphs = [ds.graphs[i] for i in idx]
    nodes = [g.num_nodes for g in graphs]
    out = {"dataset": ds.describe("standard") if hasattr(ds, "describe") else ds.name, "graphs": len(graphs),
           "families": int(len(set(fam[idx]))), "graph_nodes": summarise(nodes), "splitters": []}
    print(f"{ds.name}: {len(graphs)} graphs, {out['families']} families; nodes {out['graph_nodes']}", flush=True)
    ops = np.zeros((len(graphs), len(ds.vocab)))
    for i, g in enumerate(graphs):
        np.add.at(ops[i], g.ops, 1)
    out["ophist_loo"] = loo_precision(ops, fam[idx])
    print(f"op histogram (whole graph) leave-one-out: {out['ophist_loo']}", flush=True)
    for name in args.splitter or ["motif", "node-number"]:
        m = measure(graphs, name, args.jobs)
        out["splitters"].append(m)
        print(json.dumps(m), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
