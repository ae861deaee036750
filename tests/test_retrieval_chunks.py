"""Top-k retrieval over corpus chunks (memory bounded by the chunk) ranks exactly as over the whole corpus."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.eval.retrieval import top_k_cosine


@pytest.mark.parametrize("chunk", [1, 7, 64, 100_000])
def test_chunked_top_k_is_the_whole_corpus_top_k_ties_included(chunk):
    rng = np.random.default_rng(0)
    corpus = torch.as_tensor(rng.integers(0, 3, size=(300, 4)), dtype=torch.float32)  # many exact ties
    corpus[17] = 0  # a zero row: cosine 0 with everything
    queries = torch.as_tensor(rng.integers(0, 3, size=(41, 4)), dtype=torch.float32)
    keys = rng.permutation(300).astype(np.int64)
    for tiebreak in (None, keys):
        want_idx, want_val = top_k_cosine(queries, corpus, 25, batch_size=1000, corpus_chunk=10**9, tiebreak=tiebreak)
        got_idx, got_val = top_k_cosine(queries, corpus, 25, batch_size=9, corpus_chunk=chunk, tiebreak=tiebreak)
        assert torch.equal(got_idx, want_idx) and torch.equal(got_val, want_val)
    # and the order is (score descending, index ascending) over the whole corpus
    want_idx, _ = top_k_cosine(queries, corpus, 25, corpus_chunk=chunk)
    sim = torch.nn.functional.normalize(queries.double(), dim=1) @ torch.nn.functional.normalize(corpus.double(), dim=1).T
    for q in range(len(queries)):
        order = sorted(range(300), key=lambda c: (-round(float(sim[q, c]), 9), c))[:25]
        assert want_idx[q].tolist() == order


def test_a_chunk_smaller_than_k_still_returns_k():
    corpus = torch.randn(20, 3)
    idx, val = top_k_cosine(torch.randn(2, 3), corpus, 10, corpus_chunk=3)
    assert idx.shape == (2, 10) and torch.all(val[:, :-1] >= val[:, 1:])
