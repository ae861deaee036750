"""Canonical version 2.7 (issue 59): its row of `narbench/data/canonical-rules.csv`, `returned-attention-maps`, has
real torch models that return their attention probabilities and must give the canonical graph of the same model that
does not, and models that use the probabilities in their computation and must not; extracted as a 2.3 build does.
2.7 is 2.6 with one more pass over canonical graphs (`narbench.data.canonical_spelling.spell_27`), so `upgrade` of a
2.3 graph is its 2.7 graph, and an index reads a 2.3 corpus under 2.7 (no graph of real 2.3 returns a map).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.data.canonical import UPGRADES, canonical_vocabulary, canonicalize, upgrade  # noqa: E402
from narbench.data.canonical_rules import rules  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, H, T, V = 16, 2, 5, 11  # width, heads, tokens, vocabulary


class Stack(nn.Module):
    """Two pre-norm blocks with hand-written attention (causal unless `causal=False`); `kind` picks what the forward
    returns or how the probabilities are used."""

    def __init__(self, kind: str = "base", causal: bool = True) -> None:
        super().__init__()
        self.kind, self.causal = kind, causal
        self.emb = nn.Embedding(V, D)
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(4))
        self.qkv = nn.ModuleList(nn.Linear(D, 3 * D) for _ in range(2))
        self.out = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.up = nn.ModuleList(nn.Linear(D, 4 * D) for _ in range(2))
        self.down = nn.ModuleList(nn.Linear(4 * D, D) for _ in range(2))
        self.head = nn.Linear(D, V)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def attend(self, i, x, prev=None):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in self.qkv[i](self.norms[2 * i](x)).split(D, 2))
        scores = q @ k.transpose(-2, -1) * (D // H) ** -0.5
        if self.causal:
            scores = scores.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        if prev is not None:  # residual attention (RealFormer-like): the last block's probabilities enter the scores
            scores = scores + prev
        probs = torch.softmax(scores, dim=-1)
        return self.out[i]((probs @ v).transpose(1, 2).reshape(b, t, D)), probs

    def forward(self, tokens):
        x, probs, maps = self.emb(tokens), None, []
        for i in range(2):
            a, probs = self.attend(i, x, probs if self.kind == "reused" else None)
            maps.append(probs)
            x = x + a
            x = x + self.down[i](torch.relu(self.up[i](self.norms[2 * i + 1](x))))
        logits = self.head(x)
        if self.kind == "returns-last":  # the last layer's map itself (an output adds no node)
            return logits, maps[-1]
        if self.kind == "returns-head":  # eole: the last layer's first head beside the output
            return logits, maps[-1][:, 0]
        if self.kind == "returns-all":  # every layer's map averaged over heads
            return logits, tuple(m.mean(1) for m in maps)
        if self.kind == "returns-mean":  # the last layer's averaged over heads
            return logits, maps[-1].mean(1)
        return logits


def _extract(kind: str, causal: bool = True):
    raw = extract_graph(Stack(kind, causal), torch.randint(0, V, (1, T)), attributes=True, functions=True)
    return {v: canonicalize(raw.ops, raw.edges, version=v) for v in ("2.3", "2.6", "2.7")}


def _same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


@pytest.fixture(scope="module")
def graphs():
    return {kind: _extract(kind) for kind in ("base", "returns-last", "returns-head", "returns-all", "returns-mean",
                                              "reused")}


def test_the_rule_is_documented_for_27():
    assert [r.rule for r in rules() if r.version == "2.7"] == ["returned-attention-maps"]
    assert canonical_vocabulary("2.7") == canonical_vocabulary("2.3")
    assert {"2.4", "2.5", "2.6", "2.7"} <= set(UPGRADES)  # and 2.8's: tests/test_canonical_28.py


@pytest.mark.parametrize("kind", ["returns-head", "returns-mean"])
def test_a_returned_map_is_not_design(graphs, kind):
    """A model that also returns a selection or an average of its attention probabilities gives the graph of the one
    that does not; under 2.6 it held unfolded cores (the extraction's fold needs the softmax read by the core alone).
    A map returned as it is adds no node, so it read as its model under 2.6 too."""
    assert _same(graphs["returns-last"]["2.6"], graphs["base"]["2.6"])
    assert _same(graphs[kind]["2.7"], graphs["base"]["2.7"]), kind
    assert not _same(graphs[kind]["2.6"], graphs["base"]["2.6"]), kind
    assert "softmax" in graphs[kind]["2.6"].ops and "softmax" not in graphs[kind]["2.7"].ops
    assert graphs["base"]["2.7"].ops.count("causal_attention") == 2


def test_probabilities_used_by_the_model_stay(graphs):
    """Probabilities that enter a later layer's scores (residual attention) are computation, not a returned map."""
    g = graphs["reused"]["2.7"]
    assert _same(g, graphs["reused"]["2.6"]) and not _same(g, graphs["base"]["2.7"])
    assert "softmax" in g.ops


def test_the_core_takes_the_kind_its_graph_shares(graphs):
    """The pass does not see the mask: a returned core is causal when every folded core of the graph is, else
    `attention` (an encoder's, a decoder with cross-attention). A decoder that returns every layer's map has no folded
    core left to say so, and reads as its encoder twin (the limitation docs/canonical-graphs.md names)."""
    enc = _extract("returns-head", causal=False)
    encoder = _extract("base", causal=False)["2.7"]
    assert _same(enc["2.7"], encoder)
    assert _same(graphs["returns-all"]["2.7"], encoder) and not _same(graphs["returns-all"]["2.6"], encoder)
    assert enc["2.7"].ops.count("attention") == 2 and "causal_attention" not in enc["2.7"].ops
    # a graph whose cores disagree: the returned one is plain attention
    ops = ["embedding", "causal_attention", "attention", "matmul", "softmax", "matmul", "linear", "slice"]
    edges = np.array([[0, 0, 1, 2, 3, 4, 2, 5, 4], [1, 2, 2, 3, 4, 5, 5, 6, 7]])
    up = upgrade(ops, edges, "2.7")
    assert up.ops == ["embedding", "causal_attention", "attention", "attention", "linear"]
    # every folded core causal: so is the returned one
    up = upgrade(["embedding", "causal_attention", "matmul", "softmax", "matmul", "slice"],
                 np.array([[0, 1, 2, 3, 1, 3], [1, 2, 3, 4, 4, 5]]), "2.7")
    assert up.ops == ["embedding", "causal_attention", "causal_attention"]


def test_a_long_or_joined_branch_is_not_a_returned_map():
    """What reads the probabilities and something else, or more than `MAP_NODES` nodes, is kept as it is."""
    from narbench.data.canonical_spelling import MAP_NODES

    ops = ["embedding", "matmul", "softmax", "matmul", "linear", "mul"]
    edges = np.array([[0, 1, 2, 0, 3, 2, 4], [1, 2, 3, 3, 4, 5, 5]])  # softmax * a later tensor: computation
    assert upgrade(ops, edges, "2.7").ops == ops
    chain = ["embedding", "matmul", "softmax", "matmul", "linear"] + ["slice"] * (MAP_NODES + 1)
    src = [0, 1, 2, 0, 3] + [2] + list(range(5, 5 + MAP_NODES))
    dst = [1, 2, 3, 3, 4] + list(range(5, 6 + MAP_NODES))
    assert upgrade(chain, np.array([src, dst]), "2.7").ops == chain


def test_27_is_26_with_its_pass_applied(graphs):
    for kind, by in graphs.items():
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.7"), by["2.7"]), kind
        assert _same(upgrade(by["2.6"].ops, by["2.6"].edges, "2.7"), by["2.7"]), kind
        assert _same(upgrade(by["2.7"].ops, by["2.7"].edges, "2.7"), by["2.7"]), kind  # idempotent


def test_an_index_reads_a_23_corpus_under_27():
    from narbench.data.mapping import newest_rules

    assert newest_rules("2.3", "2.7") == "2.7" and newest_rules("2.3", "2.6") == "2.6"


@pytest.mark.slow
def test_no_graph_of_real_23_returns_a_map():
    """The pass leaves every graph of real 2.3 read under 2.6 as it is (the corpus is a 2.7 corpus: measured
    2026-11-30, `benchmarks/search/rules_next.py`), so 2.7 changes what queries read and not the index's corpus. The
    cheap check fires on VITS's flows (a softmax read by a matmul and others), which the pass leaves."""
    from narbench.data.canonical_spelling import may_spell_27
    from narbench.data.dataset import load_dataset
    from narbench.data.mapping import corpus_rules, read_newest

    ds = load_dataset("real-2.3")
    graphs, version = read_newest(ds.core_graphs, ds.vocab, ds.canonical_version, "2.6")
    assert version == "2.6"
    names = np.asarray(list(ds.vocab), dtype=object)
    maybe = [g for g in graphs if may_spell_27(names[g.ops].tolist(), g.edges)]
    assert maybe and {g.family for g in maybe} == {"vits"}
    for g in maybe:
        up = upgrade(names[g.ops].tolist(), g.edges, "2.7")
        assert up.ops == names[g.ops].tolist() and np.array_equal(up.edges, g.edges), g.name
    assert corpus_rules("2.3", graphs, ds.vocab) == "2.12"  # 2.8's table pass changed 51 graphs; 2.9 withdrew it; 2.10 to 2.12 change none; 2.13 changes 312
