"""train: graphs in, embeddings out. The splitter and encoder interfaces that plugins implement
(`splitter`, `encoder`), the one trainer (`trainer`, with `losses`, `distributed`, `allocator`,
`progress`), what a run is trained with (`profiles`, `protocol`), trained weights (`checkpoint`),
a learnt embedding's health (`health`), and graph parts: computed all at once (`parts`, its
compiled loops `_parts_kernels`) and cached on disk (`partcache`, its row format `_partcodec`);
per-graph preparation in worker processes, results in order (`pool`). Speed (issue 60): a split
packed once on the device, batches indexed from it in the DataLoader's order (`packed`,
`batchorder`), GCN/GIN propagation as CSR products (`propagate`, `_propagate_kernels`), ReLU and
dropout in one pass (`dropout`, `_dropout_kernels`), both switched off by `fastpath.eager()`,
per-graph node encodings cached on disk (`encodingcache`), per-phase step times (`steptimes`).

May import: narbench.core, narbench.data.
"""
