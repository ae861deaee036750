"""Every search reports the share of its query's nodes the index does not know, warns when the graph is
mostly unknown (`narbench.search_engine.unknown`), and when extraction kept custom functions opaque."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.search_engine.unknown import UNKNOWN_WARN, caveats, unknown_share
from tests.conftest import chain_graph

RAW = ["AddmmBackward0", "ReluBackward0", "MulBackward0", "SigmoidBackward0", "TanhBackward0"]


@pytest.fixture(scope="module")
def raw_index():
    """A `wl` index over raw autograd op names (no canonical rules: unknown ops are spliced out)."""
    from narbench.search_engine.index_build import IndexConfig, build_index
    from tests.family_toys import dataset

    graphs = [chain_graph(f"{fam}-{d}", fam, "other", block, d, skip=False)
              for fam, block in (("mlp", [0, 1]), ("gated", [0, 3, 2]), ("tanh", [0, 4]))
              for d in range(2, 8)]
    ds = dataset(graphs, {})
    ds.vocab = list(RAW)
    return build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)


def test_the_share_counts_unknown_nodes_and_warns_only_above_the_threshold():
    assert unknown_share({}, 10) == 0.0 and unknown_share({"x": 3}, 0) == 0.0
    assert unknown_share({"XBackward": 3, "Y": 1}, 10) == 0.4
    assert caveats({"XBackward": 1}, 10) == []  # 10%: listed under the table, no warning
    below = int(UNKNOWN_WARN * 100)
    assert caveats({"X": below}, 100) == [] and len(caveats({"X": below + 1}, 100)) == 1
    (line,) = caveats({"A": 60, "B": 5, "C": 2, "D": 1}, 80)
    assert line.startswith("85% of the query's 80 nodes are ops the index does not know (A, B, C, ...)")
    (line,) = caveats({}, 10, ["Halve", "Swap"])
    assert line.startswith("extraction kept 2 custom autograd functions opaque, one node each (Halve, Swap)")


def _saved(tmp_path, ops: list[str]):
    from narbench.data.graph import ArchGraph
    from narbench.data.store import write_graphs

    vocab = sorted(set(ops))
    g = ArchGraph(ops=np.array([vocab.index(o) for o in ops]), edges=np.array([range(len(ops) - 1),
                  range(1, len(ops))]), name="q", family="", coarse="other")
    path = tmp_path / f"q{len(ops)}.narg"
    write_graphs(path, [g], vocab, {})
    return str(path)


def test_a_search_reports_its_unknown_share_and_warns_when_mostly_unknown(raw_index, tmp_path):
    from narbench.search_engine.engine import search

    known = ["AddmmBackward0", "ReluBackward0"] * 4
    mostly = search(_saved(tmp_path, known[:3] + ["FancyBackward"] * 7), index=raw_index, progress=False)
    assert mostly.unknown_share == 0.7 and mostly.unknown_ops == {"FancyBackward": 7}
    assert any(w.startswith("70% of the query's 10 nodes are ops the index does not know") for w in mostly.warnings)
    assert len(mostly.hits) > 0  # the hits are still listed
    few = search(_saved(tmp_path, known + ["FancyBackward"]), index=raw_index, progress=False)
    assert few.unknown_share == round(1 / 9, 4) and not any("does not know" in w for w in few.warnings)
    clean = search(_saved(tmp_path, known), index=raw_index, progress=False)
    assert clean.unknown_share == 0.0 and clean.to_json()["unknown_share"] == 0.0


class Halve(torch.autograd.Function):
    """Runs under no_grad itself: nothing to trace through, kept as one opaque node."""

    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            return x * 0.5

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.5


class HalvedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.b(torch.relu(Halve.apply(self.a(x))))


def test_a_search_warns_when_extraction_kept_a_custom_function_opaque(raw_index, monkeypatch, capsys):
    from narbench.search_engine import target
    from narbench.search_engine.engine import render, search

    # the index's rules trace through custom functions (canonical 2.3 on), design attributes aside
    monkeypatch.setattr(target, "_reads_attributes", lambda index, since="2.2": since == "2.3")
    result = search(HalvedMLP(), index=raw_index, input_shape=(2, 8), isolate=False, progress=False)
    assert result.info["opaque_functions"] == ["Halve"] and result.unknown_ops == {"HalveBackward": 1}
    assert any(w.startswith("extraction kept 1 custom autograd function opaque, one node each (Halve)")
               for w in result.warnings)
    from rich.console import Console

    render(result, Console(width=200))
    assert "warning: extraction kept 1 custom autograd function opaque" in capsys.readouterr().out
