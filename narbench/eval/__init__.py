"""eval: embeddings in, judged results out. Retrieval by cosine (`retrieval`), ranx's metrics
(`metrics`), the result file with its provenance (`result`) and the checks a result file must
pass before it is aggregated or compared (`validation`; the per-query scores a ranking can give on
the file's split, `bounds`).

May import: narbench.core, narbench.data, narbench.train.
"""
