"""datasets: the shipped datasets. Their providers (`nas` with its DARTS space `darts`, `real`,
the cross-implementation set `crossimpl`), registered under the entry-point group
`narbench.datasets`; the taxonomy that labels `real` (`taxonomy`), the datasheet computed from
a loaded dataset (`datasheet`) and the wild set's graphs (`wild`, a test set read apart, no provider).

May import: narbench.core, narbench.data, narbench.train, and the shipped plugins
(narbench.splitters, narbench.baselines): the taxonomy's invariants hash graphs with the motif
splitter's WL colours and embed them with the `wl` floor; the datasheet counts ops with it.
"""
