"""search_engine: `narbench.search(target)`, beside the benchmark. One way through a search
(`engine.run_search`, which `search`, `narbench search` and the explorer call), each step in its room:
resolve what the target is (`target.resolve`; its text: `target_text`; what a server allows and the
check of code: `target_check`) -> build its model in a child under limits (`_target_child`; the build:
`_target_model`) -> run it once and trace it (`_target_run`, on the example input of `_target_inputs`;
the tracer is `narbench.zoo.extract`) -> its graph over the index's vocabulary (`target.query_of`,
`narbench.data.mapping`) -> embed it (`index`: the checksummed index of a corpus's embeddings, its file
`index_file`, its building `index_build`, its weak-hit cosine `weak`) -> rank the index's graphs
(`backends`, `engine`; the rank of one index graph over the whole index: `ranks`).

May import: narbench.core, narbench.data, narbench.train, narbench.eval, narbench.harness (an
index is built by the harness's run recipe), narbench.zoo (a zoo target is built as `real`'s
build builds it). Encoders come through the registry, never by import.
"""
