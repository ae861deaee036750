import math

import pytest
import torch

from narbench.train.losses import info_nce, supervised_contrastive


def test_supervised_contrastive_hand_checked():
    # Three unit vectors: 0 and 1 share a label; cosines 0-1: 0, 0-2: 0, 1-2: 1 (identical).
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0]])
    labels = torch.tensor([7, 7, 3])
    # Anchor 0: positive {1}: -log(e^0 / (e^0 + e^0)) = log 2.
    # Anchor 1: positive {0}: -log(e^0 / (e^0 + e^1)) = log(1 + e).  Anchor 2 has no positive.
    expected = (math.log(2) + math.log(1 + math.e)) / 2
    assert supervised_contrastive(emb, labels).item() == pytest.approx(expected, rel=1e-5)
    # Temperature divides the similarities.
    expected_t = (math.log(2) + math.log(1 + math.exp(2))) / 2
    assert supervised_contrastive(emb, labels, temperature=0.5).item() == pytest.approx(expected_t, rel=1e-5)


def test_supervised_contrastive_without_positives_is_zero_with_grad():
    emb = torch.randn(3, 4, requires_grad=True)
    loss = supervised_contrastive(emb, torch.tensor([0, 1, 2]))
    assert loss.item() == 0.0
    loss.backward()
    assert emb.grad is not None


def test_info_nce_hand_checked():
    anchor = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    positive = torch.tensor([[2.0, 0.0], [1.0, 0.0]])
    # Row 0: sims (1, 1) -> -log(e/(e+e)) = log 2.  Row 1: sims (0, 0) -> log 2.
    assert info_nce(anchor, positive).item() == pytest.approx(math.log(2), rel=1e-6)
    positive2 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # Row 0: sims (1, 0) -> -log(e/(e+1)); row 1 the same.
    assert info_nce(anchor, positive2).item() == pytest.approx(math.log(1 + math.exp(-1)), rel=1e-6)
