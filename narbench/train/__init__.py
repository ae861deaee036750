"""train: graphs in, embeddings out. The splitter and encoder interfaces that plugins implement
(`splitter`, `encoder`), the one trainer (`trainer`, with `losses`, `distributed`, `allocator`,
`progress`), what a run is trained with (`profiles`, `protocol`), trained weights (`checkpoint`),
a learnt embedding's health (`health`), and graph parts: computed all at once (`parts`, its
compiled loops `_parts_kernels`) and cached on disk (`partcache`, its row format `_partcodec`);
per-graph preparation in worker processes, results in order (`pool`).

May import: narbench.core, narbench.data.
"""
