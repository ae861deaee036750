"""Canonical version 2.6 (issue 59): its rows of `narbench/data/canonical-rules.csv`, `packed-weights`, `table-slice`
and `one-norm-per-projection`, have real torch decoders written in other ways that must give the identical canonical
graph, and other designs that must not, extracted as a 2.3 build does; 2.6 is 2.5 with one more pass over canonical
graphs (`narbench.data.canonical_spelling.spell_26`), so `upgrade` of a 2.3 graph is its 2.6 graph, and an index
reads a 2.3 corpus under 2.6 (`index_build.newest_corpus`).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import UPGRADES, VERSIONS, canonical_vocabulary, canonicalize, upgrade  # noqa: E402
from narbench.data.canonical_rules import rules  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, H, T, V = 16, 2, 5, 11  # width, heads, tokens, vocabulary


class Decoder(nn.Module):
    """Two pre-norm GPT-2-like blocks; `kind` picks how one part is written (the default: transformers' way)."""

    def __init__(self, kind: str = "base") -> None:
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.pos_table = nn.Parameter(torch.randn(2 * T, D))
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(4))
        self.q = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.k = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.v = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.gen = nn.ModuleList(nn.Linear(D, D * D) for _ in range(2))
        self.out = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.up = nn.ModuleList(nn.Linear(D, 4 * D) for _ in range(2))
        self.down = nn.ModuleList(nn.Linear(4 * D, D) for _ in range(2))
        self.register_buffer("positions", torch.arange(T))

    def project(self, i, x, h=None):
        """q, k, v of block i from the residual stream x (or from its normalised `h`, computed once)."""
        if h is not None:
            return self.q[i](h), self.k[i](h), self.v[i](h)
        if self.kind == "norm-per-projection":  # transformer-lens: ln1 applied once per q, k and v
            return (self.q[i](self.norms[2 * i](x)), self.k[i](self.norms[2 * i](x)), self.v[i](self.norms[2 * i](x)))
        h = self.norms[2 * i](x)
        if self.kind == "packed":  # fairseq's weights packed for F.multi_head_attention_forward, then split
            w = torch.cat([self.q[i].weight, self.k[i].weight, self.v[i].weight])
            b = torch.cat([self.q[i].bias, self.k[i].bias, self.v[i].bias])
            return tuple(F.linear(h, w[j * D:(j + 1) * D], b[j * D:(j + 1) * D]) for j in range(3))
        if self.kind == "packed-fused":  # the same weights packed once, one Linear, its output chunked
            w = torch.cat([self.q[i].weight, self.k[i].weight, self.v[i].weight])
            return F.linear(h, w).chunk(3, -1)
        if self.kind == "generated":  # a weight computed from the data (a hypernetwork): another design
            w = self.gen[i](h.mean((0, 1))).view(D, D)
            return F.linear(h, w), self.k[i](h), self.v[i](h)
        return self.q[i](h), self.k[i](h), self.v[i](h)

    def attend(self, i, x, h=None):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in self.project(i, x, h))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out[i](a.transpose(1, 2).reshape(b, t, D))

    def forward(self, tokens):
        t = tokens.shape[1]
        if self.kind == "table-slice":  # transformer-lens: W_pos[:n]
            x = self.emb(tokens) + self.pos_table[:t]
        elif self.kind == "no-positions":  # no learned positions: another design
            x = self.emb(tokens)
        else:
            x = self.emb(tokens) + self.pos(self.positions[:t])
        for i in range(2):
            if self.kind in ("parallel-one-norm", "parallel-two-norms"):  # GPT-J's and GPT-NeoX's parallel blocks
                h = self.norms[2 * i](x)  # GPT-J: one norm read by attention and MLP
                m = self.norms[2 * i + 1](x) if self.kind == "parallel-two-norms" else h
                x = x + self.attend(i, x, h) + self.down[i](F.gelu(self.up[i](m)))
                continue
            x = x + self.attend(i, x)
            x = x + self.down[i](F.gelu(self.up[i](self.norms[2 * i + 1](x))))
        return x


def _extract(kind: str):
    raw = extract_graph(Decoder(kind), torch.randint(0, V, (1, T)), attributes=True, functions=True)
    return {v: canonicalize(raw.ops, raw.edges, version=v) for v in ("2.3", "2.5", "2.6")}


KINDS = ("base", "packed", "packed-fused", "generated", "table-slice", "no-positions", "norm-per-projection",
         "parallel-one-norm", "parallel-two-norms")


@pytest.fixture(scope="module")
def graphs():
    return {kind: _extract(kind) for kind in KINDS}


def _same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


def test_the_rules_are_documented_for_26():
    assert [r.rule for r in rules() if r.version == "2.6"] == ["packed-weights", "table-slice",
                                                                "one-norm-per-projection"]
    assert canonical_vocabulary("2.6") == canonical_vocabulary("2.3")
    assert {"2.4", "2.5", "2.6"} <= set(UPGRADES)  # and 2.7's: tests/test_canonical_27.py


@pytest.mark.parametrize("kind", ["packed", "packed-fused", "table-slice", "norm-per-projection"])
def test_one_design_spelled_another_way_is_one_graph_under_26(graphs, kind):
    """Packed q/k/v parameters are the Linears' own; `W_pos[:n]` is a position embedding; ln1 per projection is one
    ln1. Each was another graph under 2.5."""
    assert _same(graphs[kind]["2.6"], graphs["base"]["2.6"]), kind
    assert not _same(graphs[kind]["2.5"], graphs["base"]["2.5"]), kind


@pytest.mark.parametrize("kind", ["generated", "no-positions", "parallel-one-norm"])
def test_other_designs_stay_apart(graphs, kind):
    assert not _same(graphs[kind]["2.6"], graphs["base"]["2.6"]), kind


def test_two_norms_of_one_tensor_for_two_blocks_stay_two(graphs):
    """GPT-NeoX's parallel block normalises x once for attention and once for the MLP: not one norm per projection."""
    one, two = graphs["parallel-one-norm"]["2.6"], graphs["parallel-two-norms"]["2.6"]
    assert not _same(one, two)
    assert two.ops.count("layernorm") == one.ops.count("layernorm") + 2


def test_a_weight_made_from_data_is_kept(graphs):
    """A hypernetwork's weight is computed from the data: the product of the data and it keeps both inputs (a matmul,
    not a Linear) and is not merged with the k and v projections."""
    g = graphs["generated"]["2.6"]
    src, dst = g.edges
    fed = np.bincount(dst, minlength=len(g.ops))
    assert any(op == "matmul" and fed[i] == 2 for i, op in enumerate(g.ops))
    assert _same(g, graphs["generated"]["2.5"])


def test_the_cheap_check_sees_every_graph_the_pass_changes(graphs):
    from narbench.data.canonical_spelling import may_spell_26

    for kind, by in graphs.items():
        changed = not _same(by["2.5"], by["2.6"])
        assert may_spell_26(by["2.5"].ops, by["2.5"].edges) or not changed, kind
    assert not may_spell_26(graphs["base"]["2.5"].ops, graphs["base"]["2.5"].edges)


def test_26_is_25_with_its_pass_applied_and_the_pass_is_idempotent(graphs):
    for kind, by in graphs.items():
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.6"), by["2.6"]), kind
        assert _same(upgrade(by["2.5"].ops, by["2.5"].edges, "2.6"), by["2.6"]), kind
        assert _same(upgrade(by["2.6"].ops, by["2.6"].edges, "2.6"), by["2.6"]), kind


def test_an_index_reads_a_23_corpus_under_26(graphs):
    from narbench.data.mapping import newest_rules

    assert newest_rules("2.3", "2.6") == "2.6" and newest_rules("2.3") == VERSIONS[-1]  # later: test_canonical_27.py, _28


def test_a_slice_with_no_input_is_a_table_only_when_added():
    """`x + W_pos[:n]` reads a table; slices of the image concatenated (YOLOX's `Focus`), or a table interpolated
    before use, stay slices."""
    up = upgrade(["embedding", "slice", "add", "linear"], np.array([[0, 1, 2], [2, 2, 3]]), "2.6")
    assert up.ops == ["embedding", "embedding", "add", "linear"]
    for reader in ("concat", "upsample"):
        up = upgrade(["slice", reader, "conv"], np.array([[0, 1], [1, 2]]), "2.6")
        assert up.ops == ["slice", reader, "conv"], reader


def test_an_index_can_read_its_corpus_under_earlier_passes():
    """`narbench index build --rules V` (`IndexConfig.rules`): the passes up to V only, never older than the graphs'
    own rules; an unknown version is named."""
    from narbench.data.canonical import CanonicalError
    from narbench.data.mapping import newest_rules, read_newest
    from narbench.data.graph import ArchGraph

    assert newest_rules("2.3") == VERSIONS[-1] and newest_rules("2.3", None) == VERSIONS[-1]
    assert newest_rules("2.3", "2.5") == "2.5" and newest_rules("2.3", "2.3") == "2.3"
    assert newest_rules("2.5", "2.4") == "2.5"
    with pytest.raises(CanonicalError, match="2.6"):
        newest_rules("2.3", "9.9")
    vocab = list(canonical_vocabulary("2.3"))
    ops = ["embedding", "gather", "add"]  # a table indexed by ids: an `embedding` from 2.5 on (`table-lookup`)
    g = ArchGraph(ops=np.array([vocab.index(o) for o in ops]), edges=np.array([[0, 1], [2, 2]]), name="t",
                  family="f", coarse="other")
    (under24,), v24 = read_newest([g], vocab, "2.3", "2.4")
    (under25,), v25 = read_newest([g], vocab, "2.3", "2.5")
    assert (v24, v25) == ("2.4", "2.5")
    assert [vocab[i] for i in under24.ops] == ops and [vocab[i] for i in under25.ops] == ["embedding", "embedding", "add"]
