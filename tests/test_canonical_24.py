"""Canonical version 2.4 (issue 59): its one row of `narbench/data/canonical-rules.csv`, `batchnorm-by-value`, has
pairs of real torch modules that must give the identical canonical graph and pairs that must not, extracted as a
2.3 build does; 2.4 is 2.3 with one pass over canonical graphs run last, so `upgrade` of a 2.3 graph is its 2.4
graph and a graph the pass does not touch is the same under both.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import UPGRADES, canonical_vocabulary, canonicalize, upgrade  # noqa: E402
from narbench.data.canonical_rules import rules  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

C, EPS = 8, 1e-3


class Block(nn.Module):
    """conv -> a batch norm written as `kind` -> relu, twice, and a residual add."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.convs = nn.ModuleList(nn.Conv2d(C, C, 3, padding=1) for _ in range(2))
        self.bns = nn.ModuleList(nn.BatchNorm2d(C) for _ in range(2))
        for i in range(2):  # the statistics as parameters, as Keras on torch holds them
            self.register_parameter(f"mean{i}", nn.Parameter(torch.randn(C) * 0.1))
            self.register_parameter(f"var{i}", nn.Parameter(torch.rand(C) + 0.5))
            self.register_parameter(f"gamma{i}", nn.Parameter(torch.ones(C)))
            self.register_parameter(f"beta{i}", nn.Parameter(torch.zeros(C)))

    def norm(self, i: int, x):
        m, v, g, b = (getattr(self, f"{n}{i}").view(1, C, 1, 1) for n in ("mean", "var", "gamma", "beta"))
        if self.kind == "module":  # nn.BatchNorm2d in eval
            return self.bns[i](x)
        if self.kind == "keras":  # keras.src.backend.torch.nn.batch_normalization
            inv = torch.rsqrt(v + EPS) * g
            return x * inv + (b - m * inv)
        if self.kind == "centred":
            return (x - m) * torch.rsqrt(v + EPS) * g + b
        if self.kind == "divided":
            return (x - m) / torch.sqrt(v + EPS) * g + b
        if self.kind == "reciprocal":
            return (x - m) * torch.reciprocal(torch.sqrt(v + EPS)) * g + b
        if self.kind == "scaled-up":  # times a positive power: no standardisation
            return x * torch.sqrt(v + EPS) * g + b
        if self.kind == "shared":  # the factor also read elsewhere: left
            inv = torch.rsqrt(v + EPS)
            return x * inv + inv.mean()
        if self.kind == "none":
            return x
        raise ValueError(self.kind)

    def forward(self, x):
        h = x
        for i in range(2):
            h = F.relu(self.norm(i, self.convs[i](h)))
        return h + x


@pytest.fixture(scope="module")
def graphs():
    out = {}
    for kind in ("module", "keras", "centred", "divided", "reciprocal", "scaled-up", "shared", "none"):
        model = Block(kind).eval()
        raw = extract_graph(model, torch.randn(1, C, 6, 6), attributes=True, functions=True)
        out[kind] = {v: canonicalize(raw.ops, raw.edges, version=v) for v in ("2.3", "2.4")}
    return out


def _same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


def test_the_rule_is_documented_for_24():
    assert [r.rule for r in rules() if r.version == "2.4"] == ["batchnorm-by-value"]
    assert canonical_vocabulary("2.4") == canonical_vocabulary("2.3")


@pytest.mark.parametrize("kind", ["keras", "centred", "divided", "reciprocal"])
def test_a_batch_norm_written_out_on_parameter_statistics_is_a_batchnorm(graphs, kind):
    assert _same(graphs[kind]["2.4"], graphs["module"]["2.4"])
    assert not _same(graphs[kind]["2.3"], graphs["module"]["2.3"])  # 2.3 left an rsqrt (or sqrt) with no input


@pytest.mark.parametrize("kind", ["scaled-up", "shared", "none"])
def test_what_is_no_standardisation_stays_apart(graphs, kind):
    assert not _same(graphs[kind]["2.4"], graphs["module"]["2.4"])


def test_24_is_23_with_its_pass_applied_and_the_pass_is_idempotent(graphs):
    for kind, by in graphs.items():
        up = upgrade(by["2.3"].ops, by["2.3"].edges, "2.4")
        assert _same(up, by["2.4"]), kind
        again = upgrade(by["2.4"].ops, by["2.4"].edges, "2.4")
        assert _same(again, by["2.4"]), kind
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.3"), by["2.3"]), kind  # nothing to apply
    assert _same(graphs["module"]["2.3"], graphs["module"]["2.4"])  # untouched graphs are the same under both
    assert set(UPGRADES) == {"2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15", "2.16"}  # later: tests/test_canonical_25.py to _216.py


def test_a_saved_23_graph_meets_a_24_index_through_the_pass(graphs):
    from narbench.data.mapping import onto_vocabulary

    vocab = list(canonical_vocabulary("2.4"))
    keras, module = graphs["keras"]["2.3"], graphs["module"]["2.4"]
    as_24 = onto_vocabulary(keras.ops, keras.edges, vocab, "2.4")
    want = onto_vocabulary(module.ops, module.edges, vocab, "2.4")
    assert as_24.ops.tolist() == want.ops.tolist() and np.array_equal(as_24.edges, want.edges)
    as_23 = onto_vocabulary(keras.ops, keras.edges, vocab, "2.3")
    assert as_23.ops.tolist() != want.ops.tolist()  # a 2.3 index reads it as saved


def test_an_index_reads_queries_by_the_newest_rules_its_corpus_is_a_fixed_point_of(graphs):
    """`mapping.corpus_rules`: a 2.3 corpus that 2.4's pass leaves as it is reads queries by 2.4 (and by 2.5 and 2.6
    when their passes leave it too, as they do these convolutions); one graph the pass would change keeps the corpus at
    2.3; a 2.2 corpus stays 2.2 (2.3 is no pass over canonical graphs)."""
    from narbench.data.graph import ArchGraph
    from narbench.data.mapping import corpus_rules

    vocab = list(canonical_vocabulary("2.3"))

    def graph(c):
        return ArchGraph(ops=np.array([vocab.index(o) for o in c.ops]), edges=c.edges, name="g", family="f", coarse="cnn")

    clean = [graph(graphs[k]["2.3"]) for k in ("module", "scaled-up", "none")]
    assert corpus_rules("2.3", clean, vocab) == "2.16"  # 2.10 to 2.16 change none of these
    assert corpus_rules("2.3", [*clean, graph(graphs["keras"]["2.3"])], vocab) == "2.3"
    assert corpus_rules("2.2", clean, vocab) == "2.2" and corpus_rules(None, clean, vocab) is None
