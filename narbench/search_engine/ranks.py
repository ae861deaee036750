"""Where a given index graph ranks among a search's hits over the whole index (`ranks_of`).

A benchmark that asks "where does graph X rank for this query?" (the robustness benchmark,
`benchmarks/search/robustness.py`) needs the full ranking, not the top k. `ranks_of` gives it for
many queries at once, ranked exactly as `narbench search --order cosine` ranks with its default `exact` backend
(`narbench.search_engine.engine.run_search`; the default order, family first, reorders the first 100 hits by family): the index graphs identical to the query (same content
hash) first, then every other graph by descending cosine between the query's embedding and the stored
float16 row, taken in float64 and rounded once to float32 (`backends.exact_scores`), ties by row.
`query_graph` makes a graph a search query as `narbench search FILE.narg` does (`target.query_of` of a
graph file): its op names mapped onto the index's vocabulary (`narbench.data.mapping.onto_vocabulary`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.data.mapping import onto_vocabulary
from narbench.search_engine.index import SearchIndex

#: Queries scored per matrix product (an [N, CHUNK] float64 block: 35 MB for a 17,000-graph index).
CHUNK = 256


def query_graph(graph: ArchGraph, vocab: Sequence[str], index: SearchIndex) -> ArchGraph:
    """`graph` (op ids into `vocab`) as a search of it saved to a graph file meets `index`: its op names
    onto the index's vocabulary, canonicalised first where they are raw names (`onto_vocabulary`)."""
    names = [vocab[i] for i in graph.ops.tolist()]
    m = onto_vocabulary(names, graph.edges, index.vocab, index.canonical_version, graph.coarse or None)
    return ArchGraph(ops=m.ops, edges=m.edges, name=graph.name, family="", coarse=m.coarse, source="query")


def ranks_of(index: SearchIndex, queries: np.ndarray, targets: Sequence[int],
             digests: Sequence[str | None] | None = None) -> np.ndarray:
    """The 1-based rank of index row `targets[i]` among the hits of query embedding `queries[i]` (as
    `SearchIndex.embed` makes it) over the whole index, as search ranks (module docstring). `digests[i]`: the
    query graph's `ArchGraph.content_hash` (rows with it rank first, in row order), None: not checked."""
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    targets = np.asarray(targets, dtype=np.int64)
    if len(targets) != len(queries) or (digests is not None and len(digests) != len(queries)):
        raise ValueError(f"{len(queries)} queries need as many targets (got {len(targets)}) and digests")
    if len(targets) and (targets.min() < 0 or targets.max() >= len(index)):
        raise ValueError(f"target rows must be in 0..{len(index) - 1}")
    rows64 = index._cache.get("rows64")
    if rows64 is None:
        rows64 = index._cache["rows64"] = np.asarray(index.arrays["embeddings"], dtype=np.float64)
    order = np.arange(len(index))
    out = np.empty(len(targets), dtype=np.int64)
    for lo in range(0, len(targets), CHUNK):
        scores = (rows64 @ queries[lo: lo + CHUNK].astype(np.float64).T).astype(np.float32)  # as exact_scores
        for j in range(scores.shape[1]):
            i, t, col = lo + j, targets[lo + j], scores[:, j]
            first = index.duplicates(digests[i]) if digests is not None and digests[i] is not None else []
            if t in first:
                out[i] = first.index(t) + 1
                continue
            ahead = (col > col[t]) | ((col == col[t]) & (order < t))
            out[i] = len(first) + 1 + int(ahead.sum()) - int(ahead[first].sum())
    return out
