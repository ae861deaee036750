"""The canonical op vocabulary and graph rewrite (narbench.ops, narbench.canonical), on graphs built here."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from narbench.data import ops as opsmod
from narbench.data.canonical import canonical_vocabulary, canonicalize
from narbench.data.canonical_rewrite import FOLDED_OPS


def raw(nodes: list[str], edges: list[tuple[int, int]]):
    """A raw graph: autograd names and producer -> consumer edges."""
    e = np.array(edges, dtype=np.int64).reshape(-1, 2).T
    return nodes, e


def canon(nodes, edges):
    c = canonicalize(*raw(nodes, edges))
    return c.ops, sorted(map(tuple, c.edges.T.tolist())), c.unknown


# ------------------------------------------------------------------ the table


def test_table_is_well_formed_and_covers_the_folds():
    rows = list(csv.DictReader(open(opsmod.table_path(), newline="")))
    raws = [r["raw"] for r in rows]
    assert len(raws) == len(set(raws)) and raws == sorted(raws)
    vocab = canonical_vocabulary()
    assert vocab[-1] == opsmod.UNKNOWN_OP and list(vocab[:-1]) == sorted(vocab[:-1])
    assert FOLDED_OPS <= set(vocab)
    assert opsmod.ELIDED not in vocab
    # what the issue lists as aliases of one op
    assert {opsmod.rule(n).op for n in ("SoftmaxBackward0", "SafeSoftmaxBackward0", "XSoftmaxBackward")} == {"softmax"}
    assert {opsmod.rule(n).op for n in ("GeluBackward0", "GeLUFunctionBackward")} == {"gelu"}
    assert {opsmod.rule(n).op for n in ("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0")} == {"-"}
    assert {opsmod.rule(n).op for n in ("SplitBackward0", "UnbindBackward0", "SelectBackward0")} == {"slice"}


def test_malformed_table_names_the_row(tmp_path, monkeypatch):
    bad = tmp_path / "ops.csv"
    bad.write_text("raw,op,unary,note\nReluBackward0,relu,,\nReluBackward0,relu,,\n")
    monkeypatch.setattr(opsmod, "table_path", lambda: bad)
    opsmod.load_table.cache_clear()
    try:
        with pytest.raises(opsmod.OpTableError, match=r"ops.csv:3: raw name 'ReluBackward0' listed twice"):
            opsmod.load_table()
    finally:
        opsmod.load_table.cache_clear()


# ------------------------------------------------------------------ pass 1: map and elide


def test_layout_is_spliced_and_views_of_every_torch_agree():
    for view in ("ViewBackward0", "UnsafeViewBackward0"):  # 2.14 vs 2.15 after an n-d Linear
        ops, edges, _ = canon(["ConvolutionBackward0", view, "PermuteBackward0", "AddmmBackward0", view],
                              [(0, 1), (1, 2), (2, 3), (3, 4)])
        assert ops == ["conv", "linear"] and edges == [(0, 1)]


def test_scaling_is_elided_but_a_sum_of_two_paths_is_kept():
    # relu -> (x * 0.5) -> add(relu, scaled): the scaled branch is the same data, so add has one input
    ops, edges, _ = canon(["ReluBackward0", "MulBackward1", "AddBackward0", "ReluBackward0"],
                          [(0, 1), (0, 2), (1, 2), (2, 3)])
    assert ops == ["relu", "relu"] and edges == [(0, 1)]
    # a residual: conv -> relu, conv + relu -> add: two data inputs
    ops, edges, _ = canon(["ConvolutionBackward0", "ReluBackward0", "AddBackward0"], [(0, 1), (0, 2), (1, 2)])
    assert ops == ["conv", "relu", "add"] and edges == [(0, 1), (0, 2), (1, 2)]


def test_mm_with_one_data_input_is_a_linear_with_two_a_matmul():
    ops, _, _ = canon(["ReluBackward0", "MmBackward0"], [(0, 1)])
    assert ops == ["relu", "linear"]
    ops, _, _ = canon(["ReluBackward0", "TanhBackward0", "MmBackward0"], [(0, 2), (1, 2)])
    assert ops == ["relu", "tanh", "matmul"]


def test_unknown_names_become_other_and_are_counted():
    ops, edges, unknown = canon(["ReluBackward0", "MyKernelBackward", "MyKernelBackward"], [(0, 1), (1, 2)])
    assert ops == ["relu", "other", "other"] and edges == [(0, 1), (1, 2)]
    assert unknown == {"MyKernelBackward": 2}


# ------------------------------------------------------------------ pass 2: selections


def test_unbind_split_and_three_selects_are_one_slice():
    tail = ["SoftmaxBackward0", "SigmoidBackward0", "TanhBackward0"]
    unbind = canon(["AddmmBackward0", "UnbindBackward0", *tail], [(0, 1), (1, 2), (1, 3), (1, 4)])
    selects = canon(["AddmmBackward0", "SelectBackward0", "SelectBackward0", "SelectBackward0", *tail],
                    [(0, 1), (0, 2), (0, 3), (1, 4), (2, 5), (3, 6)])
    chained = canon(["AddmmBackward0", "SplitBackward0", "SelectBackward0", "SelectBackward0", *tail],
                    [(0, 1), (1, 2), (1, 3), (2, 4), (3, 5), (1, 6)])
    assert unbind == selects == chained
    assert unbind[0] == ["linear", "slice", "softmax", "sigmoid", "tanh"]


# ------------------------------------------------------------------ pass 3: folds


def test_tanh_gelu_decomposition_folds_to_gelu():
    # x = linear; 0.5 * x * (1 + tanh(c * (x + 0.044715 * x^3)))
    nodes = ["AddmmBackward0", "MulBackward1", "PowBackward0", "MulBackward1", "AddBackward0", "MulBackward1",
             "TanhBackward0", "AddBackward1", "MulBackward0", "AddmmBackward0"]
    edges = [(0, 1), (0, 2), (2, 3), (0, 4), (3, 4), (4, 5), (5, 6), (6, 7), (1, 8), (7, 8), (8, 9)]
    ops, e, _ = canon(nodes, edges)
    assert ops == ["linear", "gelu", "linear"] and e == [(0, 1), (1, 2)]
    assert canon(["AddmmBackward0", "GeluBackward0", "AddmmBackward0"], [(0, 1), (1, 2)])[:2] == (ops, e)


def test_self_gates_fold_and_a_gate_from_elsewhere_does_not():
    ops, _, _ = canon(["AddmmBackward0", "SigmoidBackward0", "MulBackward0"], [(0, 1), (0, 2), (1, 2)])
    assert ops == ["linear", "silu"]
    # SwiGLU: silu(a) * b with b another linear: stays a product
    ops, _, _ = canon(["AddmmBackward0", "AddmmBackward0", "SiluBackward0", "MulBackward0"],
                      [(0, 2), (2, 3), (1, 3)])
    assert ops == ["linear", "linear", "silu", "mul"]


def test_rmsnorm_and_layernorm_decompositions_fold():
    # x * rsqrt(mean(x^2) + eps) * w
    rms = ["AddmmBackward0", "PowBackward0", "MeanBackward1", "AddBackward1", "RsqrtBackward0", "MulBackward0",
           "MulBackward0", "AddmmBackward0"]
    ops, e, _ = canon(rms, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (4, 5), (5, 6), (6, 7)])
    assert ops == ["linear", "rmsnorm", "linear"] and e == [(0, 1), (1, 2)]
    assert canon(["AddmmBackward0", "FusedRmsNormBackward0", "AddmmBackward0"], [(0, 1), (1, 2)])[0] == ops
    # d = x - mean(x); d / sqrt(mean(d^2) + eps)
    ln = ["AddmmBackward0", "MeanBackward1", "SubBackward0", "PowBackward0", "MeanBackward1", "AddBackward1",
          "SqrtBackward0", "DivBackward0", "AddmmBackward0"]
    ops, e, _ = canon(ln, [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (2, 7), (6, 7), (7, 8)])
    assert ops == ["linear", "layernorm", "linear"] and e == [(0, 1), (1, 2)]


def attention_graph(softmax: str, scale: bool, mask: str | None):
    """linear -> slice(q, k, v) -> bmm(q, k) -> [scale] -> [mask] -> softmax -> bmm(., v) -> linear."""
    nodes = ["AddmmBackward0", "UnbindBackward0", "BmmBackward0"]
    edges = [(0, 1), (1, 2)]
    last = 2
    if scale:
        nodes.append("MulBackward1"); edges.append((last, len(nodes) - 1)); last = len(nodes) - 1
    if mask == "constant":
        nodes.append("AddBackward0"); edges.append((last, len(nodes) - 1)); last = len(nodes) - 1
    elif mask == "learned":  # a relative position bias gathered from a table
        nodes += ["IndexBackward0", "AddBackward0"]
        edges += [(len(nodes) - 2, len(nodes) - 1), (last, len(nodes) - 1)]
        last = len(nodes) - 1
    nodes += [softmax, "BmmBackward0", "AddmmBackward0"]
    s = len(nodes) - 3
    edges += [(last, s), (s, s + 1), (1, s + 1), (s + 1, s + 2)]
    return canon(nodes, edges)


@pytest.mark.parametrize("softmax", ["SoftmaxBackward0", "SafeSoftmaxBackward0", "XSoftmaxBackward"])
@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("mask", [None, "constant"])
def test_attention_core_folds_whatever_its_spelling(softmax, scale, mask):
    ops, e, _ = attention_graph(softmax, scale, mask)
    assert ops == ["linear", "slice", "attention", "linear"] and e == [(0, 1), (1, 2), (2, 3)]


def test_attention_with_a_learned_bias_keeps_the_bias_as_an_input():
    ops, e, _ = attention_graph("SoftmaxBackward0", True, "learned")
    assert ops == ["linear", "slice", "gather", "attention", "linear"]
    assert e == [(0, 1), (1, 3), (2, 3), (3, 4)]


def test_a_softmax_that_is_not_attention_stays_a_softmax():
    ops, _, _ = canon(["AddmmBackward0", "SoftmaxBackward0", "AddmmBackward0"], [(0, 1), (1, 2)])
    assert ops == ["linear", "softmax", "linear"]


def test_numbering_is_topological_even_for_unsorted_input():
    # the same chain numbered backwards
    ops, e, _ = canon(["ReluBackward0", "ConvolutionBackward0"], [(1, 0)])
    assert ops == ["conv", "relu"] and e == [(0, 1)]
