"""data: architectures as data. The graph type (`graph`), its checksummed file format (`store`),
the canonical op vocabulary and the rewrite of raw autograd graphs into it (`ops`, `canonical`,
with its merges and folds in `canonical_rewrite`, 2.3's algebra of elementwise subgraphs in
`canonical_algebra` and the table of its rules since 2.2 in `canonical_rules`),
a graph's coarse label from its ops (`coarse`), a raw graph onto a vocabulary (`mapping`: how a search
query meets the index), seeded edits of a graph (`edits`: what the search robustness benchmark
searches), and the dataset base class with its fixed splits (`dataset`). The folder also holds the package's
data files (shipped datasets and index, the op table, the taxonomy tables).

May import: narbench.core.
"""
