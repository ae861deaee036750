"""One design spelled another way (`narbench.data.spellings`) and `graf-lda`'s `spellings` nuisance."""

import numpy as np
import pytest

from narbench.data.graph import ArchGraph
from narbench.data.spellings import act_swap, bn_in, bn_out, spelling_variants

VOCAB = ["conv", "batchnorm", "relu", "add", "silu", "linear", "conv_depthwise"]


def _g(ops, edges) -> ArchGraph:
    return ArchGraph(ops=[VOCAB.index(o) for o in ops], edges=edges, name="g", family="f", coarse="c", source="s")


def names(g: ArchGraph) -> list[str]:
    return [VOCAB[o] for o in g.ops]


# conv -> bn -> relu -> conv -> relu -> conv_depthwise -> add(relu, dw) -> linear
RESIDUAL = _g(["conv", "batchnorm", "relu", "conv", "relu", "conv_depthwise", "add", "linear"],
              [[0, 1, 2, 3, 2, 5, 4, 6], [1, 2, 3, 4, 5, 6, 6, 7]])


def test_bn_out_splices_every_batch_norm():
    g = bn_out(RESIDUAL, VOCAB)
    assert names(g) == ["conv", "relu", "conv", "relu", "conv_depthwise", "add", "linear"]
    assert g.edges.tolist() == [[0, 1, 1, 2, 3, 4, 5], [1, 2, 4, 3, 5, 5, 6]]
    assert bn_out(g, VOCAB) is None  # none left


def test_bn_in_puts_a_norm_after_every_convolution_without_one():
    g = bn_in(RESIDUAL, VOCAB)
    assert names(g) == ["conv", "batchnorm", "relu", "conv", "batchnorm", "relu", "conv_depthwise", "batchnorm",
                        "add", "linear"]
    g.validate()
    assert bool((g.edges[0] < g.edges[1]).all())  # still numbered in execution order
    src, dst = g.edges
    assert sorted(dst[src == 3].tolist()) == [4] and sorted(src[dst == 8].tolist()) == [5, 7]  # the add reads the relu and the new norm
    assert bn_in(g, VOCAB) is None  # every convolution has one now


def test_act_swap_makes_every_activation_one_other():
    assert names(act_swap(RESIDUAL, VOCAB)).count("silu") == 2
    silu = act_swap(RESIDUAL, VOCAB)
    assert names(act_swap(silu, VOCAB)).count("relu") == 2
    plain = _g(["linear", "add", "linear"], [[0, 1], [1, 2]])
    assert act_swap(plain, VOCAB) is None and spelling_variants(plain, VOCAB) == []


def test_variants_keep_the_labels_and_differ_from_the_graph():
    out = spelling_variants(RESIDUAL, VOCAB)
    assert len(out) == 3 and all(v.family == "f" and v.source == "s" for v in out)
    assert all(not np.array_equal(v.ops, RESIDUAL.ops) or not np.array_equal(v.edges, RESIDUAL.edges) for v in out)


def _graf_lda(**params):
    """A `graf-lda` encoder with its default parameters but `params`, not fitted."""
    from narbench.baselines.graf_lda import GrafLdaEncoder

    enc = GrafLdaEncoder.__new__(GrafLdaEncoder)
    for key, value in {**GrafLdaEncoder.PARAMS, **params}.items():
        setattr(enc, key, value)
    return enc


def test_graf_lda_refuses_a_negative_spellings_weight():
    enc = _graf_lda(spellings=-1.0)
    with pytest.raises(ValueError, match="spellings"):
        enc.params_changed()


def test_graf_lda_spellings_needs_the_vocabulary_and_off_adds_nothing():
    enc = _graf_lda(spellings=0.0)
    enc.vocab = None
    pairs, x = np.zeros(0, dtype=np.int64), np.zeros((1, 0))
    assert enc._spelling_scatter([RESIDUAL], pairs, x) is None  # off: no term
    enc.spellings = 8.0
    with pytest.raises(ValueError, match="vocabulary"):
        enc._spelling_scatter([RESIDUAL], pairs, x)
