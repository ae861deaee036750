"""Is the gap to code from another source in the graphs' ends? (issue 59, validation only)

    python -m benchmarks.search.source_ends [--out DIR]

On `choose_index`'s `source` side (a known family's graphs written by another source), the chosen index's
validation MAP@20 is 0.657 against 0.936 on `standard`'s. Pairs of one design in two zoos (transformers' `deit`,
`dinov2`, `aimv2`, `siglip_vision_model` against timm's) differ mostly at the ends: position embeddings as an
`embedding` lookup of fixed ids where timm adds a parameter, and a pooler or pooling head after the last norm. This
measures the obvious rule: every graph of the corpus trimmed (`trim`: `embedding` nodes with no producer, and/or
every node after the last normalisation in topological order, each bypassed: its producers feed its consumers),
then the `source` side's two folds and the `standard` side (quality only, no edits) for `wl` and the chosen index
(`graf-lda+wl@0.2`), as `choose_index` measures them. No test graph, `crossimpl` query or wild-set model is read.
"""

from __future__ import annotations

import copy
import sys
import types

import numpy as np

from benchmarks.timing import line, report, study_parser

#: what is trimmed in each mode
MODES = {"none": (False, False), "head": (True, False), "embeddings": (False, True), "both": (True, True)}
METRICS = ("map_capped@20", "family@1", "p@10")


def trim(g, vocab: list[str], head: bool, embeddings: bool):
    """`g` without its ends (module docstring); `g` itself when nothing (or everything) would go."""
    ops, edges, n = g.ops, g.edges, len(g.ops)
    drop: set[int] = set()
    if embeddings:
        has_producer = np.zeros(n, dtype=bool)
        has_producer[edges[1]] = True
        drop |= {i for i in range(n) if vocab[ops[i]] == "embedding" and not has_producer[i]}
    if head:
        order = g.topological_order().tolist()
        norms = [k for k, v in enumerate(order) if "norm" in vocab[ops[v]]]
        if norms:
            drop |= set(order[norms[-1] + 1:])
    if not drop or len(drop) >= n:
        return g
    producers: dict[int, set[int]] = {i: set() for i in range(n)}
    consumers: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in edges.T.tolist():
        producers[b].add(a)
        consumers[a].add(b)
    for d in sorted(drop):  # bypass d: its producers feed its consumers
        for a in producers[d]:
            consumers[a] |= consumers[d] - {a}
            consumers[a].discard(d)
        for b in consumers[d]:
            producers[b] |= producers[d] - {b}
            producers[b].discard(d)
    keep = [i for i in range(n) if i not in drop]
    where = {v: k for k, v in enumerate(keep)}
    pairs = sorted({(where[a], where[b]) for a in keep for b in consumers[a] if b in where})
    out = copy.copy(g)
    out.ops = ops[keep]
    out.edges = np.array(pairs, dtype=edges.dtype).T.reshape(2, -1)
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks.search.choose_index import LDA, Candidate
    from benchmarks.search.index_sides import SOURCE, measure_side, measure_source
    from benchmarks.search.robustness import validation_side
    from narbench.data.dataset import GraphDataset, load_dataset

    parser = study_parser(__doc__)
    args = parser.parse_args(argv)
    from narbench.search_engine.index_build import newest_corpus

    base = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    vocab = list(base.vocab)
    cands = [Candidate("wl", "wl", {"dim": 256}), Candidate("graf-lda+wl@0.2", "graf-lda", {**LDA, "fuse_wl": 0.2})]
    summary = {"dataset": f"{base.name} {base.version}", "sha256": base.sha256, "modes": {}}
    for mode, (head, embeddings) in MODES.items():
        graphs = [trim(g, vocab, head, embeddings) for g in base.graphs]
        ds = GraphDataset(base.name, base.version, vocab, graphs, base.sha256, base.split, splits=base.splits,
                          meta=base.meta)
        nodes = int(sum(g.num_nodes for g in graphs))
        no_edits = types.SimpleNamespace(graphs=0, seed=0, boot=0, source_graphs="quick")  # as measured
        rows = {**measure_source(ds, cands, no_edits, {}),
                **measure_side(ds, validation_side(ds, "standard"), cands, no_edits, edit=False)[0]}
        summary["modes"][mode] = {"nodes": nodes}
        for cand in cands:
            source = {m: rows[cand.label, SOURCE][m] for m in METRICS}
            standard = {m: rows[cand.label, "standard"][m] for m in METRICS}
            summary["modes"][mode][cand.label] = {"source": source, "standard": standard}
            line("ends", mode=mode, candidate=cand.label, nodes=nodes,
                 **{f"source_{m}": f"{v:.4f}" for m, v in source.items()},
                 **{f"standard_{m}": f"{v:.4f}" for m, v in standard.items()})
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
