"""Canonical 2.12: a layer norm written distributed over its centring, `x * r - mean(x) * r` (Keras 3's
`LayerNormalization` on the torch backend), is one `layernorm` (`distributed-layernorm`,
`narbench.data.canonical_moments`). Real torch modules, extracted as a search extracts them; Keras itself is not
needed: the blocks below write its norm as `keras.ops.moments` and `LayerNormalization.call` do on torch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import (UPGRADES, VERSIONS, at_least, canonical_vocabulary, canonicalize,  # noqa: E402
                                     reaches, upgrade)
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, EPS = 16, 1e-6


def norm(kind: str, x, g, b):
    """A normalisation over the last dim of x, written as `kind`, with a learned scale g and shift b."""
    mean = x.mean(-1, keepdim=True)
    if kind == "nn":
        return F.layer_norm(x, (D,), g, b)
    if kind == "keras":  # keras.ops.moments on torch, then LayerNormalization.call
        var = torch.mean(torch.square(x), -1, keepdim=True) - torch.square(mean)
        inv = torch.rsqrt(var + EPS) * g
        return x * inv + (-mean * inv + b)
    if kind == "keras-var":  # the same distributed form, the variance by torch.var
        inv = torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + EPS) * g
        return x * inv - mean * inv + b
    if kind == "keras-div":  # r a quotient's root: x / s - mean / s
        s = torch.sqrt(torch.mean((x - mean) ** 2, -1, keepdim=True) + EPS)
        inv = 1.0 / s
        return (x * inv - mean * inv) * g + b
    if kind == "rms-distributed":  # r a power of the second moment, not the variance: not a layer norm
        inv = torch.rsqrt(torch.mean(torch.square(x), -1, keepdim=True) + EPS) * g
        return x * inv - mean * inv + b
    if kind == "other-distributed":  # the subtracted product reads another tensor than x's mean
        var = torch.mean(torch.square(x), -1, keepdim=True) - torch.square(mean)
        inv = torch.rsqrt(var + EPS) * g
        return x * inv - torch.tanh(x).amax(-1, keepdim=True) * inv + b
    if kind == "rms":
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * g
    raise KeyError(kind)


class Block(nn.Sequential):
    """A pre-norm (or post-norm) residual MLP block whose norm is written as `kind` (its affine parts `g`, `b`)."""

    def __init__(self, kind: str, post: bool = False) -> None:
        super().__init__(nn.Linear(8, D), nn.Linear(D, 2 * D), nn.Linear(2 * D, D))
        self.kind, self.post = kind, post
        self.register_parameter("g", nn.Parameter(torch.ones(D)))
        self.register_parameter("b", nn.Parameter(torch.zeros(D)))

    def forward(self, x):
        inp, fc1, fc2 = self
        h = inp(x)
        if self.post:
            return norm(self.kind, h + fc2(F.gelu(fc1(h))), self.g, self.b)
        return h + fc2(F.gelu(fc1(norm(self.kind, h, self.g, self.b))))


def graph(kind: str, version: str = "2.12", post: bool = False):
    torch.manual_seed(0)
    return extract_graph(Block(kind, post), torch.randn(2, 8), attributes=True, functions=True).canonical(version)


def same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


@pytest.mark.parametrize("kind", ["keras", "keras-var", "keras-div"])
def test_a_distributed_layernorm_is_the_layernorm_of_nn(kind):
    assert same(graph(kind), graph("nn")), graph(kind).ops
    assert not same(graph(kind, "2.11"), graph("nn", "2.11"))  # 2.11 left it loose: the rule changes something
    assert same(graph(kind, post=True), graph("nn", post=True))


def test_the_computations_the_rule_folds_are_layer_norms():
    """The modules above compute what they claim (so the pairs test the rule, not a typo)."""
    x, g, b = torch.randn(3, D), torch.rand(D) + 0.5, torch.randn(D)
    for kind in ("keras", "keras-var", "keras-div"):
        torch.testing.assert_close(norm(kind, x, g, b), F.layer_norm(x, (D,), g, b, eps=EPS), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", ["rms-distributed", "other-distributed", "rms"])
def test_what_is_not_a_distributed_layernorm_stays(kind):
    assert not same(graph(kind), graph("nn"))
    assert graph(kind).ops.count("layernorm") == 0


def test_pre_and_post_norm_stay_apart():
    assert not same(graph("keras"), graph("keras", post=True))


def test_the_fold_leaves_no_loose_statistics():
    ops = graph("keras").ops
    assert ops.count("layernorm") == 1 and not {"mean", "pow", "rsqrt", "mul"} & set(ops)
    assert len(graph("keras", "2.11").ops) - len(ops) == 8  # pow, mean, mean, pow, add, rsqrt, mul, mul -> one norm


def test_212_is_211_with_its_pass_applied_and_the_pass_is_idempotent():
    for kind in ("keras", "keras-var", "nn", "rms-distributed"):
        old, new = graph(kind, "2.11"), graph(kind)
        up = upgrade(old.ops, old.edges, "2.12")
        assert same(up, new), kind
        again = upgrade(up.ops, up.edges, "2.12")
        assert same(again, new), kind


def test_212_is_a_pass_after_211_and_shares_its_vocabulary():
    assert VERSIONS.index("2.12") == VERSIONS.index("2.11") + 1 and at_least("2.12", "2.11")
    assert not at_least("2.11", "2.12") and canonical_vocabulary("2.12") == canonical_vocabulary("2.11")
    assert reaches("2.11", "2.12") and reaches("2.3", "2.12") and not reaches("2.8", "2.12")
    run, may = UPGRADES["2.12"]
    assert may(["linear", "relu"], np.zeros((2, 0), dtype=np.int64)) is False
    g = graph("keras", "2.11")
    assert may(g.ops, g.edges) is True
    assert canonicalize(["AddmmBackward0", "ReluBackward0"], np.array([[0], [1]]), "2.12").ops == ["linear", "relu"]


def test_the_row_of_212_is_hashed():
    assert rules_sha256("2.12") != rules_sha256("2.11")
    assert any(r.rule == "distributed-layernorm" and r.version == "2.12" for r in rules())
