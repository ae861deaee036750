"""data: architectures as data. The graph type (`graph`), its checksummed file format (`store`),
the canonical op vocabulary and the rewrite of raw autograd graphs into it (`ops`, `canonical`),
and the dataset base class with its fixed splits (`dataset`). The folder also holds the package's
data files (shipped datasets and index, the op table, the taxonomy tables).

May import: narbench.core.
"""
