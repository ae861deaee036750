"""Canonical version 2.9 (issue 59): 2.8 without `interpolated-tables` (`narbench.data.canonical.WITHDRAWS`), that is
2.7 and `heads-as-modules`. The models are test_canonical_28's: a resized position table stays in the graph as under
2.7, heads written one module each are still one core; a 2.3 or 2.7 graph reaches 2.9 by passes, a 2.8 graph does not
(it has lost its table), and an index reads a 2.3 corpus under 2.9.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from narbench.data.canonical import (UPGRADES, VERSIONS, WITHDRAWS, canonical_vocabulary, canonicalize,  # noqa: E402
                                     reaches, upgrade, upgrade_passes)
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

from tests.test_canonical_28 import GRID, P, Decoder, ViT, _same  # noqa: E402

VS = ("2.3", "2.7", "2.8", "2.9")


def _canonical(model, *inputs):
    raw = extract_graph(model, *inputs, attributes=True, functions=True)
    return {v: canonicalize(raw.ops, raw.edges, version=v) for v in VS}


@pytest.fixture(scope="module")
def vits():
    native, other = torch.randn(1, 3, GRID * P, GRID * P), torch.randn(1, 3, 2 * P, 3 * P)
    return {"base": _canonical(ViT("base"), native), "interpolated": _canonical(ViT("interpolated"), other)}


@pytest.fixture(scope="module")
def decoders():
    tokens = torch.randint(0, 11, (1, 5))
    return {kind: _canonical(Decoder(kind), tokens) for kind in ("base", "heads", "heads-differential")}


def test_29_is_documented_as_a_withdrawal():
    assert [r.rule for r in rules() if r.version == "2.9"] == ["interpolated-tables-withdrawn"]
    assert canonical_vocabulary("2.9") == canonical_vocabulary("2.3")
    assert "2.9" in VERSIONS and "2.9" in UPGRADES and WITHDRAWS == {"2.9": "2.8"}
    assert rules_sha256("2.9") != rules_sha256("2.8")
    names = [f.__name__ for f, _ in upgrade_passes("2.9")]
    assert "spell_28" not in names and names[-1] == "spell_29" and "spell_27" in names


def test_a_resized_table_stays_as_under_27(vits):
    """The interpolated ViT keeps its table's subgraph (2.7's graph), unlike under 2.8."""
    assert _same(vits["interpolated"]["2.9"], vits["interpolated"]["2.7"])
    assert "upsample" in vits["interpolated"]["2.9"].ops
    assert not _same(vits["interpolated"]["2.9"], vits["base"]["2.9"])
    assert _same(vits["interpolated"]["2.8"], vits["base"]["2.8"])  # 2.8 stays registered, as it was


def test_heads_as_modules_stays(decoders):
    assert _same(decoders["heads"]["2.9"], decoders["base"]["2.9"]) and _same(decoders["heads"]["2.9"], decoders["heads"]["2.8"])
    assert not _same(decoders["heads-differential"]["2.9"], decoders["base"]["2.9"])


def test_23_and_27_graphs_reach_29_and_28_graphs_do_not(vits, decoders):
    for kind, by in {**vits, **decoders}.items():
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.9"), by["2.9"]), kind
        assert _same(upgrade(by["2.7"].ops, by["2.7"].edges, "2.9"), by["2.9"]), kind
        assert _same(upgrade(by["2.9"].ops, by["2.9"].edges, "2.9"), by["2.9"]), kind  # idempotent
    assert reaches("2.3", "2.9") and reaches("2.7", "2.9") and not reaches("2.8", "2.9") and reaches("2.3", "2.8")
    table = vits["interpolated"]
    assert not _same(upgrade(table["2.8"].ops, table["2.8"].edges, "2.9"), table["2.9"])  # the table is gone for good


def test_an_index_reads_a_23_corpus_under_29_and_a_28_one_stays():
    from narbench.data.mapping import newest_rules

    assert newest_rules("2.3", "2.9") == "2.9" and newest_rules("2.7", "2.9") == "2.9" and newest_rules("2.3") == "2.16"
    assert newest_rules("2.8") == "2.8" and newest_rules("2.3", "2.8") == "2.8"
