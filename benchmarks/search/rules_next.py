"""Candidate canonical passes after 2.6, chosen from `wildval`'s misses: what each would change (validation only)

    python -m benchmarks.search.rules_next                 # corpus graphs and wildval models each pass changes (1 min)
    python -m benchmarks.search.rules_next --measure       # also wildval searched in an index of the changed corpus

Each candidate is a pass over canonical graphs, like 2.4's, 2.5's and 2.6's (`narbench.data.canonical.UPGRADES`), not
yet a rule (2.5 adopted two: `rope-pairs`, and `table-lookup`, measured here as `lookup-is-embedding` on 2026-11-29;
2.6 three: `packed-weights`, `table-slice` and `one-norm-per-projection`, measured here on 2026-11-30 as
`packed-weights`, `table-slice` and `qkv-norms`, benchmarks/results/rules-next-2.6-wildval-1.1-2026-11-30):
- `norms-of-one-tensor`: norms of one op on the same input (not a selection) are one norm (their affine parts are
  elided, so the canonical values are one). Why: transformer-lens applies `ln1` three times, once per q, k and v,
  so its blocks hold three LayerNorms where the corpus's hold one.
- `kv-cache-layout`: a concatenation with one data input read only by attention cores is elided (what it appends
  is a tensor the graph does not see: a cache's past keys and values). Why: transformers' decoders concatenate
  onto an (empty) cache in every forward; torchtune's and transformer-lens's decoders have no cache.
Both change corpus graphs (printed). `--measure` applies the pass to every corpus graph and builds the shipped
index's encoder on them (`narbench index build` reads that corpus under the newest rules, 2.6, on top), and
searches `wildval` with the pass applied (its graphs then read as the index reads them). No test query of any
split, no `crossimpl` query and no wild-set model is read.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import line, report, study_parser

#: the norms `norms-of-one-tensor` merges
NORMS = frozenset({"layernorm", "rmsnorm", "batchnorm", "groupnorm"})
#: what a cache concatenation feeds (`kv-cache-layout`)
ATTENTION = frozenset({"attention", "causal_attention"})


def norms_of_one_tensor(g) -> int:
    n, seen = 0, {}
    for v in list(g.order):
        if not g.alive(v) or g.op[v] not in NORMS:
            continue
        ins = tuple(g.inputs(v))
        if not ins or any(g.op[p] == "slice" for p in ins):  # a merged projection's parts are different tensors
            continue
        k = seen.setdefault((g.op[v], ins), v)
        if k != v and g.alive(k):
            g.merge([k, v], k, g.op[v])
            n += 1
    if n:
        g.merge_projections()  # the q, k, v Linears now read one tensor: one projection (2.2)
    return n


def kv_cache_layout(g) -> int:
    n = 0
    for v in list(g.order):
        if not (g.alive(v) and g.op[v] == "concat" and len(g.inputs(v)) == 1 and g.succs[v]
                and all(g.op[c] in ATTENTION for c in g.succs[v])):
            continue
        (p,) = g.inputs(v)
        for c in list(g.succs[v]):  # the concatenation's consumers read its input in its place
            g.preds[c] = dict.fromkeys(p if q == v else q for q in g.preds[c])
            g.succs[p].add(c)
        g.succs[p].discard(v)
        del g.op[v], g.preds[v], g.succs[v]
        n += 1
    return n


CANDIDATES = {"norms-of-one-tensor": norms_of_one_tensor, "kv-cache-layout": kv_cache_layout}


def apply(graph, vocab: list[str], run) -> tuple[object, int]:
    """(the graph with the pass applied, over `vocab`; how often it fired)."""
    from narbench.data.canonical_rewrite import RewriteGraph
    from narbench.data.graph import ArchGraph

    g = RewriteGraph.of_canonical([vocab[i] for i in graph.ops.tolist()], graph.edges)
    n = run(g)
    if not n:
        return graph, 0
    kept, edges = g.result()
    return ArchGraph(ops=np.array([vocab.index(o) for o in kept]), edges=edges, name=graph.name, family=graph.family,
                     coarse=graph.coarse, source=graph.source, meta=graph.meta), n


def main(argv: list[str] | None = None) -> int:
    from narbench.search_engine.outside_fit import outside_queries
    from benchmarks.search.wild import measure
    from narbench.data.dataset import GraphDataset, load_dataset
    from narbench.search_engine.index_build import IndexConfig, build_index, newest_corpus

    parser = study_parser(__doc__)
    parser.add_argument("--measure", action="store_true", help="also search wildval in an index of the changed corpus")
    parser.add_argument("--only", nargs="+", choices=sorted(CANDIDATES), help="these candidates alone")
    args = parser.parse_args(argv)
    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it: the candidates apply after 2.6
    vocab = list(ds.vocab)
    val, expected = outside_queries(ds)
    fits = np.array([bool(f) for f in expected])
    summary = {"dataset": f"{ds.name} {ds.version}", "read_under": ds.canonical_version,
               "candidates": {}}
    for name, run in CANDIDATES.items():
        if args.only and name not in args.only:
            continue
        corpus = [apply(g, vocab, run) for g in ds.core_graphs]
        queries = [apply(g, vocab, run) for g in val]
        families = sorted({g.family for g, n in corpus if n})
        row = {"corpus_graphs": sum(1 for _, n in corpus if n), "families": families,
               "wildval_models": [g.name for g, n in queries if n]}
        if args.measure:
            changed = GraphDataset(ds.name, ds.version, vocab, [g for g, _ in corpus] + ds.graphs[len(corpus):],
                                   ds.sha256, ds.split, splits=ds.splits, meta=ds.meta, query_only=ds.query_only,
                                   outside=ds.outside)
            index = build_index(IndexConfig(dataset=args.dataset, progress=False), dataset=changed)
            m = measure(index, [g for g, _ in queries], expected, vocab)
            row |= {"wildval_top1": round(float(m["top1"][fits].mean()), 4), "wildval_p10": round(float(m["p10"][fits].mean()), 4),
                    "wildval_fit_flagged": int(m["flagged"][fits].sum()), "wildval_none_flagged": int(m["flagged"][~fits].sum())}
        summary["candidates"][name] = row
        line("candidate", candidate=name, corpus_graphs=row["corpus_graphs"], families=len(families),
             wildval_models=len(row["wildval_models"]),
             **{k: v for k, v in row.items() if k.startswith("wildval_") and k != "wildval_models"})
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
