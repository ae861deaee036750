"""Retrieval by cosine similarity (eq. 1): exact top-k over the corpus, in batches on a device."""

from __future__ import annotations

import numpy as np
import torch


class EmbeddingError(RuntimeError):
    """An encoder returned embeddings that cannot be ranked (NaN or infinite values); the
    message names the encoder, the side (corpus, query) and how many rows."""


def check_finite(embeddings, encoder: str, side: str, graphs=None) -> None:
    """Raise `EmbeddingError` when any row of `embeddings` holds a NaN or an infinity.

    Cosine retrieval over such rows gives arbitrary rankings (NaN compares false with
    everything) and metrics that look like ordinary numbers, so no result is made of them.
    `side` says which embeddings these are ("corpus", "query"); `graphs` (the embedded graphs,
    row for row) lets the message name the first bad one. Before that, embeddings that are not
    a [graphs, dims] array (with one row per graph of `graphs` and at least one dimension) are
    refused the same way: ranking them would fail, or answer with meaningless cosines."""
    check_shape(embeddings, encoder, side, graphs)
    emb = torch.as_tensor(embeddings if isinstance(embeddings, torch.Tensor) else np.asarray(embeddings))
    if not emb.is_floating_point() or emb.numel() == 0:
        return
    emb = emb.reshape(emb.shape[0], -1) if emb.ndim else emb.reshape(1, 1)
    bad = ~torch.isfinite(emb).all(dim=1)
    count = int(bad.sum())
    if count:
        first = int(torch.nonzero(bad)[0])
        where = f"row {first}" + (f", graph {graphs[first].name!r}" if graphs is not None and first < len(graphs) else "")
        raise EmbeddingError(f"encoder {encoder!r} returned non-finite embeddings (NaN or inf) for {count} of "
                             f"{emb.shape[0]} {side} graphs (first: {where}); they cannot be ranked")


def check_shape(embeddings, encoder: str, side: str, graphs=None) -> None:
    """`EmbeddingError` unless `embeddings` is a 2-D tensor or array with one row per graph of
    `graphs` (when given) and at least one column; the message says what was expected and got."""
    if not isinstance(embeddings, (torch.Tensor, np.ndarray)):
        raise EmbeddingError(f"encoder {encoder!r} returned a {type(embeddings).__name__} as its {side} "
                             "embeddings; expected a tensor of shape [graphs, dimensions]")
    shape = tuple(embeddings.shape)
    rows = len(graphs) if graphs is not None else None
    if len(shape) != 2 or (rows is not None and shape[0] != rows) or shape[1] == 0:
        expected = f"[{rows}, D]" if rows is not None else "[graphs, D]"
        raise EmbeddingError(f"encoder {encoder!r} returned {side} embeddings of shape {list(shape)} for "
                             f"{rows if rows is not None else 'its'} {side} graphs; expected {expected}: one row "
                             "per graph, D >= 1 dimensions")


def tiebreak_keys(graphs) -> np.ndarray:
    """A label-free tie-break order for corpus graphs: the first 60 bits of each content hash.

    Equal scores are ordered by this key, which depends only on the graph itself (not on its
    label, its position in the corpus or the corpus' storage order).
    """
    return np.array([int(g.content_hash()[:15], 16) for g in graphs], dtype=np.int64)


#: below this norm a row counts as zero (its cosines are 0), as in `F.normalize`
EPS = 1e-12


def _norm(x: torch.Tensor) -> torch.Tensor:
    """Row norms as sqrt(sum of squares): exact sums and one correctly rounded root for integer rows."""
    return torch.sqrt((x * x).sum(dim=1)).clamp_min(EPS)


def _cosine(q: torch.Tensor, c: torch.Tensor, c_norm: torch.Tensor) -> torch.Tensor:
    """Cosine similarities [Q, C] that are the same on every host, as float32.

    The dot products are taken in float64 on the raw rows and divided by the norms afterwards:
    for integer-valued embeddings (counts, presence bits: the WL and op-histogram floors) every
    step is exact or correctly rounded, so the scores are bit-identical whatever the BLAS kernel
    (an Intel AVX512 host's GEMM sums in another order than an AMD AVX2 one's). For other
    embeddings the host-to-host difference is ~1e-16, far below float32's spacing, so rounding
    to float32 maps both hosts to the same score except with negligible probability; scores
    equal in exact arithmetic (the many ties of binary features) stay exactly equal and are
    ordered by the tie-break, instead of by which way a kernel's rounding went (measured: the
    float32 kernel moved wl-binary's MRR@20 on nas by 0.0025 between those two hosts)."""
    q_norm = _norm(q)
    return ((q @ c.T) / q_norm[:, None] / c_norm[None, :]).to(torch.float32)


def top_k_cosine(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    k: int = 100,
    *,
    batch_size: int = 1024,
    corpus_chunk: int = 32768,
    device: torch.device | str = "cpu",
    tiebreak: np.ndarray | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices and cosine similarities of the `k` most similar corpus rows for each query.

    Exact search. Equal scores are ordered by `tiebreak` (one int64 key per corpus row, smaller
    first; see `tiebreak_keys`), or by the corpus index when it is None, so rankings are
    deterministic. Returns (indices long [Q, k'], scores float [Q, k']) on the CPU,
    k' = min(k, len(corpus)); indices refer to the given corpus order.

    Memory is bounded by the chunks, not by queries x corpus: `batch_size` queries at a time against
    `corpus_chunk` corpus rows at a time on `device` (float64 scores of one chunk pair); a corpus
    of several chunks has each chunk's exact top k merged by (score, index), the same ranking.
    """
    if queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"embedding shapes do not match: queries {tuple(queries.shape)}, corpus {tuple(corpus.shape)}")
    if tiebreak is not None:
        tiebreak = np.asarray(tiebreak)
        if tiebreak.shape != (corpus.shape[0],):
            raise ValueError(f"tiebreak has {tiebreak.size} keys for a corpus of {corpus.shape[0]} rows; it needs "
                             "one key per corpus row")
        # Rank in key order (index tie-break there = key tie-break), then map back.
        perm = torch.as_tensor(np.argsort(tiebreak, kind="stable"))
        idx, val = top_k_cosine(queries, corpus[perm], k, batch_size=batch_size, corpus_chunk=corpus_chunk,
                                device=device)
        return perm[idx], val
    k = min(k, corpus.shape[0])
    chunks = []
    for start in range(0, corpus.shape[0], corpus_chunk):
        c = corpus[start:start + corpus_chunk].to(device, torch.float64)
        chunks.append((start, c, _norm(c)))
    out_idx, out_val = [], []
    for start in range(0, queries.shape[0], batch_size):
        q = queries[start : start + batch_size].to(device, torch.float64)
        found = [_chunk_top_k(q, c, c_norm, min(k, c.shape[0]), first) for first, c, c_norm in chunks]
        idx, val = found[0] if len(found) == 1 else _merge([f[0] for f in found], [f[1] for f in found], k)
        out_idx.append(idx)
        out_val.append(val)
    if not out_idx:
        return torch.zeros(0, k, dtype=torch.long), torch.zeros(0, k)
    return torch.cat(out_idx), torch.cat(out_val)


def _chunk_top_k(q: torch.Tensor, c: torch.Tensor, c_norm: torch.Tensor, k: int, first: int):
    """The `k` best rows of one corpus chunk for queries `q`, ordered by (-score, index), on the CPU;
    indices offset by the chunk's `first` row."""
    sim = _cosine(q, c, c_norm)
    val, idx = torch.topk(sim, k, dim=1)
    val, idx = val.cpu(), idx.cpu()
    # Exact tie-break by corpus index: rows whose k-th value is tied with items left out are
    # re-ranked with a full stable sort (rare); within the top k, order by (-score, index).
    left_out_ties = (sim == val[:, -1:].to(sim.device)).sum(1).cpu() > (val == val[:, -1:]).sum(1)
    rows = torch.nonzero(left_out_ties).flatten()
    if len(rows):
        full = sim[rows.to(sim.device)]
        order = torch.sort(-full, dim=1, stable=True).indices[:, :k]
        idx[rows], val[rows] = order.cpu(), torch.gather(full, 1, order).cpu()
    return _order(idx + first, val, k)


def _order(idx: torch.Tensor, val: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `k` of each row by (-score, index)."""
    by_index = torch.sort(idx, dim=1, stable=True)
    by_score = torch.sort(-torch.gather(val, 1, by_index.indices), dim=1, stable=True)
    return torch.gather(by_index.values, 1, by_score.indices)[:, :k], -by_score.values[:, :k]


def _merge(idx: list[torch.Tensor], val: list[torch.Tensor], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The best `k` of the chunks' candidates by (-score, index): the whole corpus' top k, as each
    chunk's top k holds every row of the whole top k that falls in it."""
    return _order(torch.cat(idx, dim=1), torch.cat(val, dim=1), k)
