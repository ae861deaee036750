import numpy as np
import pytest
import torch

from narbench.eval.retrieval import top_k_cosine


@pytest.mark.isa
def test_matches_brute_force_and_batches():
    """Batched top-k = one matrix product's top-k: indices exactly (these scores are far apart), values to 1e-6."""
    g = torch.Generator().manual_seed(0)
    q, c = torch.randn(37, 8, generator=g), torch.randn(101, 8, generator=g)
    idx, val = top_k_cosine(q, c, k=10, batch_size=7)
    sim = torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(c, dim=1).T
    ref_val, ref_idx = sim.topk(10, dim=1)
    top = sim.topk(11, dim=1).values
    assert (top[:, :-1] - top[:, 1:]).min() > 1e-5  # no near-tie that kernel rounding (~1e-7) could reorder
    assert torch.equal(idx, ref_idx)
    assert torch.allclose(val, ref_val, atol=1e-6)


def test_ties_broken_by_corpus_index_and_k_clipped():
    q = torch.tensor([[1.0, 0.0]])
    c = torch.tensor([[0.0, 1.0], [2.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    idx, val = top_k_cosine(q, c, k=100)
    assert idx.tolist() == [[1, 2, 3, 0]]
    assert val[0, :3].tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="do not match"):
        top_k_cosine(torch.zeros(2, 3), torch.zeros(4, 5))


def test_ties_straddling_k_keep_smallest_indices():
    q = torch.tensor([[1.0, 0.0]])
    c = torch.tensor([[0.0, 1.0]] * 3 + [[1.0, 0.0]] * 5 + [[1.0, 1.0]])
    idx, _ = top_k_cosine(q, c, k=3)
    assert idx.tolist() == [[3, 4, 5]]
    many = torch.eye(3)[torch.randint(0, 3, (40,), generator=torch.Generator().manual_seed(0))]
    idx, val = top_k_cosine(many[:7], many, k=12, batch_size=3)
    sim = torch.nn.functional.normalize(many[:7], dim=1) @ torch.nn.functional.normalize(many, dim=1).T
    assert torch.equal(idx, torch.sort(-sim, dim=1, stable=True).indices[:, :12])


def test_tiebreak_keys_order_equal_scores_not_the_corpus_index():
    q = torch.tensor([[1.0, 0.0]])
    c = torch.tensor([[1.0, 0.0]] * 4 + [[0.0, 1.0]])
    idx, _ = top_k_cosine(q, c, k=3, tiebreak=np.array([40, 10, 30, 20, 0]))
    assert idx.tolist() == [[1, 3, 2]]  # equal scores by key; the orthogonal row (key 0) last
    idx, _ = top_k_cosine(q, c, k=5, tiebreak=np.array([40, 10, 30, 20, 0]), batch_size=1)
    assert idx.tolist() == [[1, 3, 2, 0, 4]]
    with pytest.raises(ValueError, match="one key per corpus row"):
        top_k_cosine(q, c, tiebreak=np.arange(3))


def test_tiebreak_keys_depend_on_the_graph_only():
    from narbench.data.graph import ArchGraph
    from narbench.eval.retrieval import tiebreak_keys

    a = ArchGraph(ops=[0, 1], edges=[[0], [1]], name="a", family="x", coarse="c")
    b = ArchGraph(ops=[0, 2], edges=[[0], [1]], name="b", family="x", coarse="c")
    a_other_label = ArchGraph(ops=[0, 1], edges=[[0], [1]], name="a2", family="y", coarse="d")
    ka, kb, ka2 = tiebreak_keys([a, b, a_other_label])
    assert ka == ka2 and ka != kb


def _binary_corpus(seed: int, rows: int, dims: int, density: float = 0.3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, dims, generator=g) < density).float()


def test_rankings_of_integer_embeddings_do_not_depend_on_the_summation_order():
    """Presence bits (the WL floors) make many cosines equal in exact arithmetic. A float32 kernel
    rounds them apart in an order that depends on how it sums (an Intel AVX512 GEMM and an AMD
    AVX2 one differ: wl-binary's MRR moved by 0.0025 between such hosts), so the tie-break never
    saw them. Permuting the feature columns permutes the terms of every dot product (what another
    kernel does); the ranking must not move, and tied scores must be exactly equal."""
    q, c = _binary_corpus(1, 60, 96), _binary_corpus(2, 400, 96)
    perm = torch.randperm(96, generator=torch.Generator().manual_seed(3))
    idx, val = top_k_cosine(q, c, k=50)
    idx_p, val_p = top_k_cosine(q[:, perm], c[:, perm], k=50, batch_size=7)
    assert torch.equal(idx, idx_p)
    assert torch.equal(val, val_p)
    # exact arithmetic: cos = |a & b| / sqrt(|a| |b|); equal fractions give bit-equal scores
    inter, na, nc = q @ c.T, q.sum(1), c.sum(1)
    exact = {(i, j): (int(inter[i, j]) ** 2, int(na[i]) * int(nc[j])) for i in range(60) for j in idx[i].tolist()}
    for i in range(60):
        for a, b in zip(idx[i].tolist(), idx[i, 1:].tolist()):
            (x1, y1), (x2, y2) = exact[i, a], exact[i, b]
            if x1 * y2 == x2 * y1:  # tied exactly: equal scores, ordered by corpus index
                assert val[i, idx[i].tolist().index(a)] == val[i, idx[i].tolist().index(b)] and a < b
