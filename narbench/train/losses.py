"""The paper's training objectives, on embeddings of one batch.

`supervised_contrastive` is eq. 5 (graph level: positives are the other graphs of the same
family in the batch), `info_nce` is eq. 4 (motif level: the positive is the motif's own context
graph, the negatives are the other motifs' contexts in the batch). Similarity `d` is cosine;
`temperature` divides it (the paper writes e^d, i.e. temperature 1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def supervised_contrastive(emb: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Eq. 5, averaged over anchors that have at least one positive in the batch.

    L_i = -log( sum_{p in P(i)} e^{d(i,p)/t} / sum_{a != i} e^{d(i,a)/t} ); returns 0 (with a
    gradient path) when no anchor has a positive.
    """
    z = F.normalize(emb.float(), dim=1)
    sim = z @ z.T / temperature
    n = sim.shape[0]
    self_mask = torch.eye(n, dtype=torch.bool, device=sim.device)
    pos = (labels.view(-1, 1) == labels.view(1, -1)) & ~self_mask
    logits = sim.masked_fill(self_mask, float("-inf"))
    log_denom = torch.logsumexp(logits, dim=1)
    log_num = torch.logsumexp(logits.masked_fill(~pos, float("-inf")), dim=1)
    has_pos = pos.any(dim=1)
    if not has_pos.any():
        return emb.sum() * 0.0
    return (log_denom - log_num)[has_pos].mean()


def info_nce(anchor: torch.Tensor, positive: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Eq. 4: row i of `positive` is anchor i's positive; the other rows are its negatives."""
    a = F.normalize(anchor.float(), dim=1)
    p = F.normalize(positive.float(), dim=1)
    logits = a @ p.T / temperature
    target = torch.arange(a.shape[0], device=a.device)
    return F.cross_entropy(logits, target)
