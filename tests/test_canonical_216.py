"""Canonical 2.16: a learned table read whole is read as the slice it is on a shorter input (`table-alias`).

`pos[:, :t]` with `t` the table's length records an input-less `AliasBackward0` (a view of the whole parameter), on a
shorter input a `SliceBackward0`, which 2.6's `table-slice` reads as an `embedding`. These tests fail if torch stops
recording the whole-table read as an alias (then the rule reads nothing) or if the two lengths' graphs part again."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.data.canonical import (UPGRADES, VERSIONS, at_least, canonical_vocabulary, canonicalize,  # noqa: E402
                                     reaches, upgrade)
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, VOCAB, CONTEXT = 16, 40, 8


class TinyGPT(nn.Module):
    """minGPT's way with positions: a table of `CONTEXT` rows, its first `t` added to the token embeddings; one
    causal attention block and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(1, CONTEXT, D))
        self.qkv, self.proj, self.head = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, VOCAB)
        self.norm = nn.LayerNorm(D)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos[:, :t, :]
        q, k, v = self.qkv(self.norm(x)).split(D, dim=-1)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = (q @ k.transpose(-2, -1) / D ** 0.5).masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.proj(att @ v)
        return self.head(self.norm(x))


class WholeTable(nn.Module):
    """A table added whole whatever the input (no slice at all): the same design, recorded with no view."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(D, D)
        self.table = nn.Parameter(torch.randn(CONTEXT, D))

    def forward(self, x):
        return self.lin(x + self.table.view(CONTEXT, D))


def _raw(model, *args):
    torch.manual_seed(0)
    return extract_graph(model, args, attributes=True)


def _ids(n: int):
    return torch.randint(0, VOCAB, (1, n))


def _same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


@pytest.fixture(scope="module")
def lengths():
    torch.manual_seed(0)
    model = TinyGPT()
    return _raw(model, _ids(CONTEXT)), _raw(model, _ids(CONTEXT // 2))


def test_the_whole_table_is_recorded_as_an_input_less_alias(lengths):
    whole, part = lengths
    preds = {d for _, d in whole.edges.T.tolist()}
    aliases = [v for v, o in enumerate(whole.ops) if o.split("#")[0] == "AliasBackward0" and v not in preds]
    assert aliases, "torch no longer records pos[:, :t] with t the table's length as an alias: the rule reads nothing"
    assert not any(o.split("#")[0] == "AliasBackward0" for o in part.ops)
    assert any(o.split("#")[0] == "SliceBackward0" for o in part.ops)


def test_one_program_is_one_graph_whatever_the_input_length_under_216(lengths):
    whole, part = lengths
    assert not _same(whole.canonical("2.15"), part.canonical("2.15"))  # before: the whole table's add was elided
    assert whole.canonical("2.15").op_counts()["embedding"] == 1
    a, b = whole.canonical("2.16"), part.canonical("2.16")
    assert _same(a, b)
    assert a.op_counts()["embedding"] == 2 and _same(b, part.canonical("2.15"))  # the slice's graph is 2.15's


def test_an_alias_with_an_input_is_a_view_and_stays_elided():
    raw = ["MmBackward0", "AliasBackward0", "ReluBackward0"]
    e = np.array([[0, 1], [1, 2]])
    assert canonicalize(raw, e, "2.16").ops == canonicalize(raw, e, "2.15").ops == ["linear", "relu"]


def test_a_table_read_with_no_view_is_unchanged():
    raw = _raw(WholeTable(), torch.randn(CONTEXT, D))
    assert _same(raw.canonical("2.16"), raw.canonical("2.15"))


def test_216_reads_raw_names_and_changes_no_canonical_graph():
    assert VERSIONS.index("2.16") == VERSIONS.index("2.15") + 1 and at_least("2.16", "2.15")
    assert not at_least("2.15", "2.16")
    assert canonical_vocabulary("2.16") == canonical_vocabulary("2.15")
    assert reaches("2.15", "2.16") and reaches("2.3", "2.16") and not reaches("2.8", "2.16")
    ops, edges = ["embedding", "add", "linear"], np.array([[0, 1], [1, 2]])
    assert UPGRADES["2.16"][1](ops, edges) is False
    up = upgrade(ops, edges, "2.16")
    assert up.ops == ops and np.array_equal(up.edges, edges)


def test_rules_of_216_hash_its_row():
    assert rules_sha256("2.16") == rules_sha256() != rules_sha256("2.15")
    assert {r.rule for r in rules() if r.version == "2.16"} == {"table-alias"}
