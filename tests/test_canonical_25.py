"""Canonical version 2.5 (issue 59): its rows of `narbench/data/canonical-rules.csv`, `rope-pairs` and
`table-lookup`, have real torch decoders whose rotary embedding or token table is written in other ways that must
give the identical canonical graph, and other designs that must not, extracted as a 2.3 build does; 2.5 is 2.4 with
one more pass over canonical graphs (`narbench.data.canonical_spelling`), so `upgrade` of a 2.3 graph is its 2.5
graph; an index reads a 2.3 corpus under 2.5 (`index_build.newest_corpus`).
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


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Decoder(nn.Module):
    """Two pre-norm decoder blocks; `kind` picks how one part is written (the default: transformers' way)."""

    def __init__(self, kind: str = "base") -> None:
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(V, D)
        self.table = nn.Parameter(torch.randn(V, D))
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(4))
        self.qkv = nn.ModuleList(nn.Linear(D, 3 * D) for _ in range(2))
        self.out = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.up = nn.ModuleList(nn.Linear(D, 4 * D) for _ in range(2))
        self.down = nn.ModuleList(nn.Linear(4 * D, D) for _ in range(2))
        t = torch.arange(T, dtype=torch.float32)[:, None] * torch.arange(D // H // 2, dtype=torch.float32)[None]
        self.register_buffer("cos", torch.cos(t).repeat(1, 2))
        self.register_buffer("sin", torch.sin(t).repeat(1, 2))
        self.register_buffer("cos2", torch.cos(t))
        self.register_buffer("sin2", torch.sin(t))

    def rope(self, x):
        if self.kind == "interleaved":  # Meta's and torchtune's: the pairs rotated per half, then stacked
            xs = x.reshape(*x.shape[:-1], -1, 2)
            x0, x1 = xs[..., 0], xs[..., 1]
            out = torch.stack([x0 * self.cos2 - x1 * self.sin2, x1 * self.cos2 + x0 * self.sin2], -1)
            return out.flatten(-2)
        if self.kind == "every-two":  # GPT-J's rotate_every_two: interleaved pairs, rotated as a whole
            x1, x2 = x[..., ::2], x[..., 1::2]
            rot = torch.stack((-x2, x1), -1).flatten(-2)
            return x * self.cos + rot * self.sin
        if self.kind == "no-rope":  # no rotary at all: another design
            return x
        if self.kind == "partial":  # a rotary on half the channels, the rest passed through: another design
            rot, keep = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
            c, s = self.cos[:, : rot.shape[-1]], self.sin[:, : rot.shape[-1]]
            return torch.cat([rot * c + rotate_half(rot) * s, keep], -1)
        return x * self.cos + rotate_half(x) * self.sin  # transformers' rotate-half

    def attend(self, i, h):
        b, t, _ = h.shape
        q, k, v = self.qkv[i](self.norms[2 * i](h)).chunk(3, -1)
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
        q, k = self.rope(q), self.rope(k)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out[i](a.transpose(1, 2).reshape(b, t, D))

    def forward(self, tokens):
        h = self.table[tokens] if self.kind == "lookup" else self.emb(tokens)  # transformer-lens: W_E[tokens]
        for i in range(2):
            h = h + self.attend(i, h)
            h = h + self.down[i](F.gelu(self.up[i](self.norms[2 * i + 1](h))))
        return h


def _extract(kind: str):
    model = Decoder(kind)
    raw = extract_graph(model, torch.randint(0, V, (1, T)), attributes=True, functions=True)
    return {v: canonicalize(raw.ops, raw.edges, version=v) for v in ("2.3", "2.4", "2.5")}


KINDS = ("base", "interleaved", "every-two", "partial", "no-rope", "lookup")


@pytest.fixture(scope="module")
def graphs():
    return {kind: _extract(kind) for kind in KINDS}


def _same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


def test_the_rule_is_documented_for_25():
    assert [r.rule for r in rules() if r.version == "2.5"] == ["rope-pairs", "table-lookup"]
    assert canonical_vocabulary("2.5") == canonical_vocabulary("2.3")
    assert {"2.4", "2.5"} <= set(UPGRADES)  # and later passes (2.6: tests/test_canonical_26.py)


@pytest.mark.parametrize("kind", ["interleaved", "lookup"])
def test_one_design_spelled_another_way_is_one_graph_under_25(graphs, kind):
    """RoPE written per half is rotate-half; a token table indexed by ids is `nn.Embedding`."""
    assert _same(graphs[kind]["2.5"], graphs["base"]["2.5"]), kind
    assert not _same(graphs[kind]["2.4"], graphs["base"]["2.4"]), kind  # 2.4 told them apart


def test_which_channels_pair_up_was_never_in_the_graph(graphs):
    """GPT-J's interleaved pairs rotated as a whole read as rotate-half already under 2.4: the pass is about how
    the rotation is written, not which channels it pairs."""
    assert _same(graphs["every-two"]["2.4"], graphs["base"]["2.4"])


@pytest.mark.parametrize("kind", ["partial", "no-rope"])
def test_other_designs_stay_apart(graphs, kind):
    assert not _same(graphs[kind]["2.5"], graphs["base"]["2.5"]), kind


def test_the_cheap_check_sees_every_graph_the_pass_changes(graphs):
    from narbench.data.canonical_spelling import may_spell_25

    for kind, by in graphs.items():
        changed = not _same(by["2.4"], by["2.5"])
        assert may_spell_25(by["2.4"].ops, by["2.4"].edges) or not changed, kind
    assert not may_spell_25(graphs["base"]["2.4"].ops, graphs["base"]["2.4"].edges)
    assert may_spell_25(graphs["lookup"]["2.4"].ops, graphs["lookup"]["2.4"].edges)


def test_a_gather_with_an_input_is_no_lookup():
    """`x[idx]` of a tensor the graph sees (a gather with a data input) stays a gather."""
    from narbench.data.canonical import upgrade

    up = upgrade(["embedding", "gather", "linear"], np.array([[0, 1], [1, 2]]), "2.5")
    assert up.ops == ["embedding", "gather", "linear"]
    up = upgrade(["gather", "add", "linear"], np.array([[0, 1], [1, 2]]), "2.5")
    assert up.ops == ["embedding", "add", "linear"]


def test_25_is_24_with_its_pass_applied_and_the_pass_is_idempotent(graphs):
    for kind, by in graphs.items():
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.5"), by["2.5"]), kind
        assert _same(upgrade(by["2.4"].ops, by["2.4"].edges, "2.5"), by["2.5"]), kind
        assert _same(upgrade(by["2.5"].ops, by["2.5"].edges, "2.5"), by["2.5"]), kind
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.4"), by["2.4"]), kind


def test_an_index_reads_a_23_corpus_under_25(graphs):
    """`newest_corpus`: the graphs of a 2.3 dataset are read under the newest rules passes reach (2.5, since 2.6),
    the dataset itself untouched; the index then reads queries by them (`corpus_rules` finds the read corpus a fixed
    point). These decoders read the same under 2.6 as under 2.5."""
    from narbench.data.dataset import GraphDataset, Split
    from narbench.data.graph import ArchGraph
    from narbench.data.mapping import corpus_rules, newest_rules
    from narbench.search_engine.index_build import newest_corpus

    vocab = list(canonical_vocabulary("2.3"))

    def graph(c, name):
        return ArchGraph(ops=np.array([vocab.index(o) for o in c.ops]), edges=c.edges, name=name, family="f",
                         coarse="transformer")

    gs = [graph(graphs[k]["2.3"], k) for k in ("base", "interleaved")]
    split = Split(np.arange(2), np.zeros(0, dtype=np.int64), 0, 0.0)
    ds = GraphDataset("real", "2.3", vocab, gs, "0" * 64, split, meta={"ops": {"version": "2.3"}})
    read = newest_corpus(ds)
    newest = VERSIONS[-1]
    assert newest_rules("2.3") == newest and newest_rules("2.2") == "2.2" and newest_rules(None) is None
    assert [vocab[o] for o in read.graphs[1].ops] == graphs["interleaved"]["2.5"].ops
    assert read.graphs[0] is gs[0]  # the pass leaves it: the same object
    assert ds.graphs[1] is gs[1] and [vocab[o] for o in ds.graphs[1].ops] == graphs["interleaved"]["2.3"].ops
    assert corpus_rules("2.3", read.graphs, vocab) == newest and corpus_rules("2.3", gs, vocab) == "2.4"
    assert read.meta["ops"] == {"version": newest, "read_from": "2.3"} and ds.meta["ops"] == {"version": "2.3"}
    assert read.canonical_version == newest and ds.canonical_version == "2.3"
    nas = GraphDataset("nas", "1.0", vocab, gs, "0" * 64, split, meta={"ops": ["a"]})
    assert newest_corpus(nas) is nas and nas.canonical_version is None
