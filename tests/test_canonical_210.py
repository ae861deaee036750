"""Canonical 2.10: rotary position embedding written as a complex product is rotate-half's rotation
(`narbench.data.canonical_complex`), and versions are ordered by `VERSIONS`, not as strings."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import (UPGRADES, VERSIONS, at_least, canonical_vocabulary, canonicalize,  # noqa: E402
                                     reaches, upgrade)
from narbench.data.canonical_complex import complex_rotations  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402


def _angles(n: int, dim: int) -> torch.Tensor:
    return torch.outer(torch.arange(n).float(), 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))


class RopeAttention(nn.Module):
    """A causal attention whose q and k are rotated: `complex` as Meta's LLaMA writes it, else rotate-half."""

    def __init__(self, complex_form: bool, d: int = 32, heads: int = 4, n: int = 8):
        super().__init__()
        self.complex_form, self.heads = complex_form, heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        ang = _angles(n, d // heads)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(ang), ang), persistent=False)
        self.register_buffer("cos", torch.cat([ang, ang], -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat([ang, ang], -1).sin(), persistent=False)

    def _rotate(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        if self.complex_form:
            xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            return torch.view_as_real(xc * self.freqs_cis[:t].view(1, t, 1, -1)).flatten(3).type_as(x)
        a, b = x.chunk(2, -1)
        return x * self.cos[:t].view(1, t, 1, -1) + torch.cat([-b, a], -1) * self.sin[:t].view(1, t, 1, -1)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.heads, -1) for p in (self.q, self.k, self.v))
        q, k, v = (y.transpose(1, 2) for y in (self._rotate(q), self._rotate(k), v))
        return self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))


class Decoder(nn.Module):
    def __init__(self, complex_form: bool):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.norm, self.attn = nn.RMSNorm(32), RopeAttention(complex_form)
        self.head = nn.Linear(32, 50, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        return self.head(x + self.attn(self.norm(x)))


class FourierFilter(nn.Module):
    """GFNet's global filter: the FFT of the input times a learned complex weight (two data tensors)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 5, 4, 2))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = torch.fft.rfft2(x, dim=(1, 2), norm="ortho") * torch.view_as_complex(self.w)
        return self.proj(torch.fft.irfft2(y, s=(8, 8), dim=(1, 2), norm="ortho"))


class DataRotation(nn.Module):
    """A complex product of the input with a rotation computed from the input itself: not a constant rotation."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        x = self.proj(x)
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * torch.polar(torch.ones_like(x[..., ::2]), x[..., ::2])).flatten(-2)


def _graph(model, *args):
    torch.manual_seed(0)
    return extract_graph(model, args)


def test_a_complex_rotation_is_rotate_half_under_210():
    ids = torch.randint(0, 50, (1, 8))
    complex_raw, half_raw = _graph(Decoder(True), ids), _graph(Decoder(False), ids)
    a, b = complex_raw.canonical("2.10"), half_raw.canonical("2.10")
    assert a.ops == b.ops and np.array_equal(a.edges, b.edges)
    assert a.op_counts()["concat"] == 2  # the rotations of q and k
    before = complex_raw.canonical("2.9")  # 2.9 elides the rotation: a decoder with no positions
    assert "concat" not in before.op_counts() and before.num_nodes == a.num_nodes - 4
    half_29 = half_raw.canonical("2.9")
    assert half_29.ops == b.ops and np.array_equal(half_29.edges, b.edges)  # rotate-half reads as before


def test_a_complex_product_of_two_data_tensors_is_not_a_rotation():
    x = torch.randn(2, 8, 8, 4)
    g = _graph(FourierFilter(), x)
    c9, c10 = g.canonical("2.9"), g.canonical("2.10")
    assert c9.ops == c10.ops and np.array_equal(c9.edges, c10.edges)
    assert complex_rotations(g.ops, g.edges)[2] == 0
    d = _graph(DataRotation(), torch.randn(2, 6, 8))
    assert complex_rotations(d.ops, d.edges)[2] == 0


def test_the_rewrite_keeps_nodes_and_adds_one_edge_per_rotation():
    ops = ["LinearBackward", "ViewAsComplexBackward0", "MulBackward0", "ViewAsRealBackward0", "ReluBackward0"]
    edges = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    out, e, n = complex_rotations(ops, edges)
    assert n == 1 and out[2:4] == ["CatBackward0", "AddBackward0"] and e.shape == (2, 5)
    assert {tuple(p) for p in e.T.tolist()} >= {(1, 3), (2, 3)}
    read_twice = np.array([[0, 1, 2, 3, 2], [1, 2, 3, 4, 4]])  # the product read besides: left as it is
    assert complex_rotations(ops, read_twice)[2] == 0
    plain = ["ReluBackward0", "MulBackward0"]
    assert complex_rotations(plain, np.array([[0], [1]]))[:2][0] == plain


def test_versions_are_ordered_by_the_list_not_as_strings():
    assert VERSIONS.index("2.10") == VERSIONS.index("2.9") + 1 and at_least("2.10", "2.9") and at_least("2.10", "2.2") and not at_least("2.9", "2.10")
    assert canonical_vocabulary("2.10") == canonical_vocabulary("2.3")
    assert reaches("2.9", "2.10") and reaches("2.3", "2.10") and not reaches("2.8", "2.10")
    ops, edges = ["linear", "concat", "add"], np.array([[0, 0, 1], [1, 2, 2]])
    up = upgrade(ops, edges, "2.10")
    assert up.ops == ops and np.array_equal(up.edges, edges)
    assert UPGRADES["2.10"][1](ops, edges) is False


def test_rules_of_210_hash_every_row_and_an_index_of_210_reads_attributes():
    from narbench.data.canonical_rules import rules, rules_sha256
    from narbench.search_engine.target import _reads_attributes

    assert rules_sha256("2.10") != rules_sha256("2.9")
    assert any(r.rule == "complex-rotation" and r.version == "2.10" for r in rules())

    class Index:
        canonical_version = "2.10"

    assert _reads_attributes(Index(), "2.2") and _reads_attributes(Index(), "2.3")


def test_canonicalize_of_a_raw_graph_under_210_reads_the_rotation():
    ops = ["EmbeddingBackward0", "ViewAsComplexBackward0", "MulBackward0", "ViewAsRealBackward0", "MmBackward0"]
    edges = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    assert canonicalize(ops, edges, "2.9").ops == ["embedding", "linear"]
    c = canonicalize(ops, edges, "2.10")
    assert c.ops == ["embedding", "concat", "add", "linear"]
