"""eval: embeddings in, judged results out. Retrieval by cosine (`retrieval`), ranx's metrics
(`metrics`), the result file with its provenance (`result`) and the checks a result file must
pass before it is aggregated or compared (`validation`).

May import: narbench.core, narbench.data, narbench.train.
"""
