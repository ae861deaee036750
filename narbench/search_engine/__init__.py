"""search_engine: `narbench.search(target)`, beside the benchmark. What a target can be and how
it becomes a graph (`target`, running its model `_target_run` on an example input
`_target_inputs`, in a child process under limits `_target_child`), the checksummed index of a
corpus's embeddings (`index`, its weak-hit cosine `weak`), nearest-neighbour backends over it
(`backends`) and the search itself (`engine`).

May import: narbench.core, narbench.data, narbench.train, narbench.eval, narbench.harness (an
index is built by the harness's run recipe), narbench.zoo (a zoo target is built as `real`'s
build builds it). Encoders come through the registry, never by import.
"""
