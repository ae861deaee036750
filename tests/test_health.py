import numpy as np
import pytest
import torch

from narbench.train.health import dead_dims, effective_rank, health


@pytest.mark.isa
def test_collapsed_embedding_has_rank_one_and_dead_dims():
    """Rank one up to the SVD's rounding (under 4e-7 with the default and AVX2 kernels); a second direction is far off."""
    # every row the same direction (scaled), the last 5 of 8 dimensions zero for every row
    direction = torch.tensor([1.0, 2.0, 3.0, 0, 0, 0, 0, 0])
    emb = torch.rand(50, 1, generator=torch.Generator().manual_seed(0)) * direction
    assert effective_rank(emb) == pytest.approx(1.0, abs=1e-5)
    assert dead_dims(emb) == 5
    h = health(emb)
    assert h == {"effective_rank": 1.0, "dead_dims": 5, "dims": 8, "samples": 50}


def test_healthy_embedding_uses_every_dimension():
    emb = torch.as_tensor(np.random.default_rng(0).normal(size=(500, 16)))
    assert effective_rank(emb) > 14.0  # near-isotropic Gaussian: singular values nearly equal
    assert dead_dims(emb) == 0
    assert effective_rank(torch.eye(4)) == pytest.approx(4.0)  # equal singular values: the full rank


def test_constant_nonzero_dimension_counts_as_dead_and_degenerate_inputs():
    emb = torch.randn(20, 3)
    emb[:, 1] = 0.7
    assert dead_dims(emb) == 1
    assert effective_rank(torch.zeros(5, 4)) == 0.0 and dead_dims(torch.zeros(5, 4)) == 4
    with pytest.raises(ValueError, match="samples x dims"):
        effective_rank(torch.zeros(3))
