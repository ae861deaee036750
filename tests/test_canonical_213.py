"""Canonical 2.13: a product of one tensor with a weight the graph does not see is a Linear (`weight-product`,
`narbench.data.canonical_projections`). Real torch modules, extracted as a search extracts them; Keras itself is not
needed: `Einsum` writes its projections as Keras 3's `EinsumDense` does on torch (`torch.einsum` with the kernel)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import UPGRADES, VERSIONS, at_least, canonical_vocabulary, reaches, upgrade  # noqa: E402
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, H, N = 32, 4, 8


class Block(nn.Module):
    """A pre-norm transformer block whose projections are `kind`: `linear` (nn.Linear), `einsum` (a weight read by
    torch.einsum, Keras's EinsumDense) or `matmul` (`x @ self.w`)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.fc1, self.fc2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        if kind == "linear":
            self.q, self.k, self.v, self.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        else:
            self.w = nn.ParameterList(nn.Parameter(torch.randn(D, H, D // H) * 0.1) for _ in range(3))
            self.wo = nn.Parameter(torch.randn(H, D // H, D) * 0.1)

    def project(self, x):
        if self.kind == "linear":
            return [p(x).unflatten(-1, (H, D // H)) for p in (self.q, self.k, self.v)]
        if self.kind == "einsum":
            return [torch.einsum("bnd,dhk->bnhk", x, w) for w in self.w]
        return [(x @ w.flatten(1)).unflatten(-1, (H, D // H)) for w in self.w]

    def out(self, a):
        if self.kind == "linear":
            return self.o(a.flatten(-2))
        if self.kind == "einsum":
            return torch.einsum("bnhk,hkd->bnd", a, self.wo)
        return a.flatten(-2) @ self.wo.flatten(0, 1)

    def forward(self, x):
        q, k, v = (t.transpose(1, 2) for t in self.project(self.norm1(x)))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2)
        x = x + self.out(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Selections(nn.Module):
    """A product of two selections of one tensor (`a(x) @ b(x).T`): it reads one node, and stays a `matmul`."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.out = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(N, D)

    def forward(self, x):
        return self.out(self.a(x) @ self.b(x).transpose(1, 2))


def graph(model, version: str = "2.13"):
    torch.manual_seed(0)
    return extract_graph(model, torch.randn(1, N, D), attributes=True, functions=True).canonical(version)


def same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


def test_projections_by_a_weight_read_as_linears():
    assert same(graph(Block("einsum")), graph(Block("linear"))), graph(Block("einsum")).ops
    assert not same(graph(Block("einsum"), "2.12"), graph(Block("linear"), "2.12"))  # the rule changes something
    assert "matmul" not in graph(Block("einsum")).ops and graph(Block("einsum"), "2.12").ops.count("matmul") == 4
    # `x @ w` of a 3-D tensor by a 2-D weight runs as one `mm` of the flattened tensor: a Linear before the rule too
    assert same(graph(Block("matmul"), "2.12"), graph(Block("linear"), "2.12"))


def test_a_product_of_two_selections_stays_a_product():
    g = graph(Selections())
    assert g.ops.count("matmul") == 1 and same(g, graph(Selections(), "2.12"))


def test_213_is_212_with_its_pass_applied_and_the_pass_is_idempotent():
    for model in (Block("einsum"), Block("linear"), Selections()):
        old, new = graph(model, "2.12"), graph(model)
        up = upgrade(old.ops, old.edges, "2.13")
        assert same(up, new)
        assert same(upgrade(up.ops, up.edges, "2.13"), new)


def test_213_is_a_pass_after_212_and_shares_its_vocabulary():
    assert VERSIONS.index("2.13") == VERSIONS.index("2.12") + 1 and at_least("2.13", "2.12")
    assert canonical_vocabulary("2.13") == canonical_vocabulary("2.12")
    assert reaches("2.12", "2.13") and reaches("2.3", "2.13") and not reaches("2.8", "2.13")
    run, may = UPGRADES["2.13"]
    assert may(["linear", "matmul"], np.array([[0], [1]])) is True
    assert may(["linear", "relu"], np.array([[0], [1]])) is False
    assert rules_sha256("2.13") != rules_sha256("2.12")
    assert any(r.rule == "weight-product" and r.version == "2.13" for r in rules())
