"""benchmarks.search.rules_next: a candidate's flags compared with the shipped index's at one operating point."""

import numpy as np

from benchmarks.search.rules_next import matched_none, weight_matmul, weight_product
from narbench.data.canonical_rewrite import RewriteGraph


def test_matched_none_reads_the_threshold_that_flags_as_many_fitting_models():
    # fitting models scored 0.1-0.9, `none` models 0.5-0.95; the lowest threshold that flags at most k fitting ones
    m = {"score": np.array([0.1, 0.3, 0.8, 0.9, 0.5, 0.7, 0.85, 0.95])}
    fits = np.array([True, True, True, True, False, False, False, False])
    assert matched_none(m, fits, 0) == 1  # above 0.9: the `none` model at 0.95 alone
    assert matched_none(m, fits, 1) == 2  # at 0.85: 0.9 flagged; 0.85 and 0.95
    assert matched_none(m, fits, 2) == 4  # at 0.5 (0.8 and 0.9 flagged, 0.3 not): every `none` model
    assert matched_none(m, fits, 4) == 4


def test_weight_matmul_renames_a_matmul_of_one_tensor_and_merges_the_projections():
    # x -> three matmuls of x alone (q, k, v through a weight) -> attention; a matmul of two tensors stays
    ops = ["linear", "matmul", "matmul", "matmul", "attention", "matmul"]
    edges = np.array([[0, 0, 0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 4, 4, 5, 5]])
    g = RewriteGraph.of_canonical(ops, edges)
    assert weight_matmul(g) == 3
    kept, out = g.result()
    assert kept.count("matmul") == 1  # the product of the attention's output and x
    assert kept.count("linear") == 2 and "slice" in kept  # the three projections of x: one Linear and its split


def test_weight_product_leaves_a_product_of_two_selections_of_one_tensor():
    # a(x) @ b(x).T: the two Linears of x are one projection and a split, so the product reads one `slice` node
    ops = ["embedding", "linear", "slice", "matmul"]
    edges = np.array([[0, 1, 2], [1, 2, 3]])
    g = RewriteGraph.of_canonical(ops, edges)
    assert weight_product(g) == 0 and g.result()[0] == ops
    g = RewriteGraph.of_canonical(ops, edges)
    assert weight_matmul(g) == 1 and g.result()[0].count("matmul") == 0  # why weight-matmul was withdrawn
    ops = ["embedding", "layernorm", "matmul"]  # a product of one unselected tensor with a weight: a Linear
    g = RewriteGraph.of_canonical(ops, np.array([[0, 1], [1, 2]]))
    assert weight_product(g) == 1 and g.result()[0] == ["embedding", "layernorm", "linear"]


def test_attention_projections_renames_only_the_products_around_an_attention_core():
    from benchmarks.search.rules_next import attention_projections

    # x -> q, k, v (matmuls of x alone) -> attention -> o (a matmul of the core alone); a matmul of x read by a GELU
    # (an MLP's product with a weight) is left, unlike weight-product
    ops = ["layernorm", "matmul", "matmul", "matmul", "attention", "matmul", "matmul", "gelu"]
    edges = np.array([[0, 0, 0, 1, 2, 3, 4, 0, 6], [1, 2, 3, 4, 4, 4, 5, 6, 7]])
    g = RewriteGraph.of_canonical(ops, edges)
    assert attention_projections(g) == 4
    kept, _ = g.result()
    assert kept.count("matmul") == 1 and kept.count("linear") == 2 and "slice" in kept  # q, k, v one projection; o
    g = RewriteGraph.of_canonical(ops, edges)
    assert weight_product(g) == 5


class _Hit:
    def __init__(self, family, similarity):
        self.family, self.families, self.similarity = family, (family,), similarity


class _Result:
    def __init__(self, *hits):
        self.hits = [_Hit(f, s) for f, s in hits]


def test_a_loss_is_a_tie_when_an_expected_family_is_within_the_tie_of_the_first_hit():
    from benchmarks.search.rules_ties import counts, is_tie, losses

    assert is_tie(_Result(("ctrl", 0.986), ("xglm", 0.983)), ("xglm",))
    assert not is_tie(_Result(("ctrl", 0.986), ("xglm", 0.97)), ("xglm",))
    shipped = {"top1": np.array([True, True, False])}
    cand = {"top1": np.array([False, True, False]),
            "results": np.array([_Result(("ctrl", 0.986), ("xglm", 0.984)), None, None], dtype=object)}
    lost = losses(shipped, cand, [("xglm",), ("vit",), ("bert",)], [False, False, False])
    assert lost == [{"row": 0, "changed": False, "tie": True, "first": "ctrl", "cosine": 0.986}]
    assert not counts(True, lost) and not counts(False, lost)
    assert counts(True, [{**lost[0], "changed": True}]) and counts(True, [{**lost[0], "tie": False}])
