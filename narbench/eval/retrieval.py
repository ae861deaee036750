"""Retrieval by cosine similarity (eq. 1): exact top-k over the corpus, in batches on a device."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def tiebreak_keys(graphs) -> np.ndarray:
    """A label-free tie-break order for corpus graphs: the first 60 bits of each content hash.

    Equal scores are ordered by this key, which depends only on the graph itself (not on its
    label, its position in the corpus or the corpus' storage order).
    """
    return np.array([int(g.content_hash()[:15], 16) for g in graphs], dtype=np.int64)


def top_k_cosine(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    k: int = 100,
    *,
    batch_size: int = 1024,
    device: torch.device | str = "cpu",
    tiebreak: np.ndarray | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices and cosine similarities of the `k` most similar corpus rows for each query.

    Exact search. Equal scores are ordered by `tiebreak` (one int64 key per corpus row, smaller
    first; see `tiebreak_keys`), or by the corpus index when it is None, so rankings are
    deterministic. Returns (indices long [Q, k'], scores float [Q, k']) on the CPU,
    k' = min(k, len(corpus)); indices refer to the given corpus order.
    """
    if queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1]:
        raise ValueError(f"embedding shapes do not match: queries {tuple(queries.shape)}, corpus {tuple(corpus.shape)}")
    if tiebreak is not None:
        tiebreak = np.asarray(tiebreak)
        if tiebreak.shape != (corpus.shape[0],):
            raise ValueError(f"tiebreak needs one key per corpus row ({corpus.shape[0]}), got shape {tiebreak.shape}")
        # Rank in key order (index tie-break there = key tie-break), then map back.
        perm = torch.as_tensor(np.argsort(tiebreak, kind="stable"))
        idx, val = top_k_cosine(queries, corpus[perm], k, batch_size=batch_size, device=device)
        return perm[idx], val
    k = min(k, corpus.shape[0])
    c = F.normalize(corpus.to(device, torch.float32), dim=1)
    out_idx, out_val = [], []
    for start in range(0, queries.shape[0], batch_size):
        q = F.normalize(queries[start : start + batch_size].to(device, torch.float32), dim=1)
        sim = q @ c.T
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
        by_index = torch.sort(idx, dim=1, stable=True)
        by_score = torch.sort(-torch.gather(val, 1, by_index.indices), dim=1, stable=True)
        idx = torch.gather(by_index.values, 1, by_score.indices)
        out_idx.append(idx)
        out_val.append(-by_score.values)
    if not out_idx:
        return torch.zeros(0, k, dtype=torch.long), torch.zeros(0, k)
    return torch.cat(out_idx), torch.cat(out_val)
