"""Candidate canonical passes after 2.4, chosen from `wildval`'s misses: what each would change (validation only)

    python -m benchmarks.search.rules_next                 # corpus graphs and wildval models each pass changes (1 min)
    python -m benchmarks.search.rules_next --measure       # also wildval searched in an index of the changed corpus

Each candidate is a pass over canonical graphs, like 2.4's (`narbench.data.canonical.UPGRADES`), not yet a rule:
- `lookup-is-embedding`: a `gather` with no input (a learned table read by indices the graph does not see) is an
  `embedding`. Why: transformer-lens reads its token and position tables by indexing (`W_E[tokens]`), where the
  corpus's decoders call an embedding (its GPT-2, GPT-Neo and Pythia first hit `whisper` and `longformer`).
- `norms-of-one-tensor`: norms of one op on the same input (not a selection) are one norm (their affine parts are
  elided, so the canonical values are one). Why: transformer-lens applies `ln1` three times, once per q, k and v,
  so its blocks hold three LayerNorms where the corpus's hold one.
Unlike 2.4's pass, both change corpus graphs (printed), so a rule of them needs the corpus canonicalised again
(a new `real` version, or an index that upgrades its corpus); `--measure` builds the shipped index's encoder on
the corpus with the pass applied and searches `wildval` with the pass applied (its graphs as 2.4 reads them).
No test query of any split, no `crossimpl` query and no wild-set model is read.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import line, report, study_parser

#: the norms `norms-of-one-tensor` merges
NORMS = frozenset({"layernorm", "rmsnorm", "batchnorm", "groupnorm"})


def lookup_is_embedding(g) -> int:
    n = 0
    for v in list(g.order):
        if g.alive(v) and g.op[v] == "gather" and not g.inputs(v):
            g.op[v] = "embedding"
            n += 1
    return n


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


CANDIDATES = {"lookup-is-embedding": lookup_is_embedding, "norms-of-one-tensor": norms_of_one_tensor}


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
    from narbench.search_engine.index_build import IndexConfig, build_index

    parser = study_parser(__doc__)
    parser.add_argument("--measure", action="store_true", help="also search wildval in an index of the changed corpus")
    args = parser.parse_args(argv)
    ds = load_dataset(args.dataset)
    vocab = list(ds.vocab)
    val, expected = outside_queries(ds)
    fits = np.array([bool(f) for f in expected])
    summary = {"dataset": f"{ds.name} {ds.version}", "candidates": {}}
    for name, run in CANDIDATES.items():
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
