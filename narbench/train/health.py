"""Health of a learnt embedding: does it still spread its samples over many directions?

Contrastive training can *collapse*: every input maps to (nearly) one direction, or ReLU units
die and a share of the output dimensions is zero for every input. Both show on a fixed sample
of inputs before any retrieval metric is computed:

- `effective_rank` (Roy & Vetterli, 2007; RankMe, Garrido et al., 2023): exp of the Shannon
  entropy of the normalised singular values of the [samples x dims] matrix, uncentred. 1 for
  a rank-one matrix (all rows parallel), up to min(samples, dims) when every singular value
  is equal.
- `dead_dims`: dimensions that take one value for every sample (a dead ReLU unit is 0
  everywhere); they carry no information about the input.

`health` gives both plus the sample's size, as the plain dict the result file stores.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["dead_dims", "effective_rank", "health"]


def _matrix(emb) -> torch.Tensor:
    x = emb.detach().cpu() if isinstance(emb, torch.Tensor) else torch.as_tensor(np.asarray(emb))
    if x.ndim != 2:
        raise ValueError(f"expected a [samples x dims] matrix, got shape {tuple(x.shape)}")
    return x.double()


def effective_rank(emb) -> float:
    """exp(H(p)), p_i = s_i / sum(s), over the singular values s of `emb` (uncentred).

    0.0 for an empty or all-zero matrix (no direction at all).
    """
    x = _matrix(emb)
    if x.numel() == 0:
        return 0.0
    s = torch.linalg.svdvals(x)
    total = float(s.sum())
    if total <= 0.0:
        return 0.0
    p = s / total
    p = p[p > 0]
    return float(torch.exp(-(p * torch.log(p)).sum()))


def dead_dims(emb, tol: float = 1e-6) -> int:
    """Number of dimensions whose values over the samples span at most `tol` (constant columns)."""
    x = _matrix(emb)
    if x.shape[0] == 0:
        return int(x.shape[1])
    spread = x.max(dim=0).values - x.min(dim=0).values
    return int((spread <= tol).sum())


def health(emb) -> dict[str, float | int]:
    """{'effective_rank', 'dead_dims', 'dims', 'samples'} of a [samples x dims] embedding."""
    x = _matrix(emb)
    return {"effective_rank": round(effective_rank(x), 4), "dead_dims": dead_dims(x),
            "dims": int(x.shape[1]), "samples": int(x.shape[0])}
