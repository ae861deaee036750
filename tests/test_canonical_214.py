"""Canonical 2.14: the output head run on selected positions is the head (`head-selection`,
`narbench.data.canonical_heads`). Real torch modules, extracted as a search extracts them: a small GPT whose forward
runs its head on the last position (nanoGPT's and llama2.c's inference call) or on every position."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import UPGRADES, VERSIONS, at_least, canonical_vocabulary, reaches, upgrade  # noqa: E402
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, T, V = 32, 8, 50


class GPT(nn.Module):
    """Token and position tables, one pre-norm causal block, a final norm and a head; `head` says where it runs:
    `all` positions, the `last` (`x[:, [-1], :]`), the last `pooled` and also returned (the graph records no outputs,
    so this reads as `last`), or the last read by a `classifier` after a ReLU (a head on a pooled feature)."""

    def __init__(self, head: str) -> None:
        super().__init__()
        self.head = head
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        x = self.lnf(x + self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        if self.head == "all":
            return self.lm_head(x)
        if self.head == "last":
            return self.lm_head(x[:, [-1], :])
        if self.head == "pooled":
            pooled = x[:, [-1], :]
            return self.lm_head(pooled), pooled
        return self.lm_head(F.relu(x[:, [-1], :]))


def graph(model, version: str = "2.14"):
    torch.manual_seed(0)
    ids = torch.randint(0, V, (1, T))
    return extract_graph(model, ids, attributes=True, functions=True).canonical(version)


def same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


def test_the_head_on_the_last_position_is_the_head():
    assert same(graph(GPT("last")), graph(GPT("all"))) and same(graph(GPT("pooled")), graph(GPT("all")))
    assert not same(graph(GPT("last"), "2.13"), graph(GPT("all"), "2.13"))  # the rule changes something
    assert "gather" in graph(GPT("last"), "2.13").ops and "gather" not in graph(GPT("last")).ops


def test_a_selection_read_otherwise_stays():
    g = graph(GPT("classifier"))
    assert "gather" in g.ops and same(g, graph(GPT("classifier"), "2.13"))


def test_214_is_213_with_its_pass_applied_and_the_pass_is_idempotent():
    for head in ("all", "last", "pooled", "classifier"):
        old, new = graph(GPT(head), "2.13"), graph(GPT(head))
        up = upgrade(old.ops, old.edges, "2.14")
        assert same(up, new)
        assert same(upgrade(up.ops, up.edges, "2.14"), new)


def test_214_is_a_pass_after_213_and_shares_its_vocabulary():
    assert VERSIONS.index("2.14") == VERSIONS.index("2.13") + 1 and at_least("2.14", "2.13")
    assert canonical_vocabulary("2.14") == canonical_vocabulary("2.13")
    assert reaches("2.13", "2.14") and reaches("2.3", "2.14") and not reaches("2.8", "2.14")
    run, may = UPGRADES["2.14"]
    assert may(["layernorm", "gather", "linear"], np.array([[0, 1], [1, 2]])) is True
    assert may(["layernorm", "gather", "relu"], np.array([[0, 1], [1, 2]])) is False
    assert rules_sha256("2.14") != rules_sha256("2.13")
    assert any(r.rule == "head-selection" and r.version == "2.14" for r in rules())
