"""Canonical version 2.8 (issue 59): its rows of `narbench/data/canonical-rules.csv`, `interpolated-tables` and
`heads-as-modules`, have real torch models written in other ways that must give the identical canonical graph, and
other designs that must not, extracted as a 2.3 build does. 2.8 is 2.7 with one more pass over canonical graphs
(`narbench.data.canonical_spelling.spell_28`), so `upgrade` of a 2.3 graph is its 2.8 graph, and an index reads a
2.3 corpus under 2.8 (`index_build.newest_corpus`).
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

D, H, P, GRID = 16, 2, 4, 4  # width, heads, patch size, the position table's grid (its native size)


class ViT(nn.Module):
    """Two pre-norm ViT blocks; `kind` picks how the position table is added (the default: as it is)."""

    def __init__(self, kind: str = "base") -> None:
        super().__init__()
        self.kind = kind
        self.patch = nn.Conv2d(3, D, P, P)
        self.cls = nn.Parameter(torch.randn(1, 1, D))
        self.pos = nn.Parameter(torch.randn(1, 1 + GRID * GRID, D))
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(4))
        self.qkv = nn.ModuleList(nn.Linear(D, 3 * D) for _ in range(2))
        self.out = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.up = nn.ModuleList(nn.Linear(D, 4 * D) for _ in range(2))
        self.down = nn.ModuleList(nn.Linear(4 * D, D) for _ in range(2))

    def positions(self, h: int, w: int):
        if self.kind == "base":  # the table at its own size, added as it is
            return self.pos
        cls, grid = self.pos[:, :1], self.pos[:, 1:]  # DINOv2, DPT: the grid resized to the input's
        grid = grid.reshape(1, GRID, GRID, D).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)
        return torch.cat([cls, grid.permute(0, 2, 3, 1).reshape(1, h * w, D)], dim=1)

    def forward(self, image):
        x = self.patch(image)
        b, _, h, w = x.shape
        x = torch.cat([self.cls.expand(b, -1, -1), x.flatten(2).transpose(1, 2)], dim=1)
        if self.kind == "table-gated":  # a resized table that scales the tokens: read by a product, not a sum
            x = x * self.positions(h, w)
        else:
            x = x + self.positions(h, w)
        for i in range(2):
            t = x.shape[1]
            q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in self.qkv[i](self.norms[2 * i](x)).split(D, 2))
            a = F.scaled_dot_product_attention(q, k, v)
            x = x + self.out[i](a.transpose(1, 2).reshape(b, t, D))
            x = x + self.down[i](F.gelu(self.up[i](self.norms[2 * i + 1](x))))
        return x


class Head(nn.Module):
    """One attention head with its own q, k and v Linears (the tutorial way)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(D, D // H) for _ in range(3))

    def forward(self, x):
        return F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x), is_causal=True)


class Decoder(nn.Module):
    """Two pre-norm decoder blocks; `kind` picks how multi-head attention is written (the default: one projection)."""

    def __init__(self, kind: str = "base") -> None:
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(11, D)
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(4))
        self.qkv = nn.ModuleList(nn.Linear(D, 3 * D) for _ in range(2))
        self.heads = nn.ModuleList(nn.ModuleList(Head() for _ in range(H)) for _ in range(2))
        self.mix = nn.ModuleList(nn.LayerNorm(D) for _ in range(2))
        self.out = nn.ModuleList(nn.Linear(D, D) for _ in range(2))
        self.up = nn.ModuleList(nn.Linear(D, 4 * D) for _ in range(2))
        self.down = nn.ModuleList(nn.Linear(4 * D, D) for _ in range(2))

    def attend(self, i, h):
        if self.kind == "base":
            b, t, _ = h.shape
            q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in self.qkv[i](h).split(D, 2))
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D)
        heads = torch.cat([head(h) for head in self.heads[i]], dim=-1)
        if self.kind == "heads-normed":  # the heads' concatenation normalised before the projection: another design
            return self.mix[i](heads)
        if self.kind == "heads-differential":  # DiffLlama-like: the two heads combined before the projection
            a, c = heads.chunk(2, dim=-1)
            return torch.cat([a - 0.5 * c, a - 0.5 * c], dim=-1)
        return heads  # "heads": one module per head, concatenated into the projection

    def forward(self, tokens):
        x = self.emb(tokens)
        for i in range(2):
            x = x + self.out[i](self.attend(i, self.norms[2 * i](x)))
            x = x + self.down[i](F.gelu(self.up[i](self.norms[2 * i + 1](x))))
        return x


def _canonical(model, *inputs):
    raw = extract_graph(model, *inputs, attributes=True, functions=True)
    return {v: canonicalize(raw.ops, raw.edges, version=v) for v in ("2.3", "2.7", "2.8")}


def _same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


@pytest.fixture(scope="module")
def vits():
    native, other = torch.randn(1, 3, GRID * P, GRID * P), torch.randn(1, 3, 2 * P, 3 * P)  # 4 x 4 and 2 x 3 grids
    return {"base": _canonical(ViT("base"), native), "interpolated": _canonical(ViT("interpolated"), other),
            "table-gated": _canonical(ViT("table-gated"), other)}


@pytest.fixture(scope="module")
def decoders():
    tokens = torch.randint(0, 11, (1, 5))
    return {kind: _canonical(Decoder(kind), tokens)
            for kind in ("base", "heads", "heads-normed", "heads-differential")}


def test_the_rules_are_documented_for_28():
    assert [r.rule for r in rules() if r.version == "2.8"] == ["interpolated-tables", "heads-as-modules"]
    assert canonical_vocabulary("2.8") == canonical_vocabulary("2.3")
    assert {"2.4", "2.5", "2.6", "2.7", "2.8"} <= set(UPGRADES) and "2.8" in VERSIONS


def test_a_table_resized_to_the_input_is_a_parameter(vits):
    """DINOv2's position table interpolated to the input's grid gives the graph of the table added as it is, which
    the graph never held (a parameter added is elided like a bias); under 2.7 it held the table's subgraph."""
    assert _same(vits["interpolated"]["2.8"], vits["base"]["2.8"])
    assert not _same(vits["interpolated"]["2.7"], vits["base"]["2.7"])
    assert "upsample" in vits["interpolated"]["2.7"].ops and "upsample" not in vits["interpolated"]["2.8"].ops


def test_a_resized_table_read_otherwise_stays(vits):
    """A resized table that multiplies the tokens is read by a product, not added: it stays (and so does the product,
    of two data tensors)."""
    gated = vits["table-gated"]
    assert _same(gated["2.8"], gated["2.7"]) and "upsample" in gated["2.8"].ops
    assert not _same(gated["2.8"], vits["base"]["2.8"])


def test_heads_written_as_modules_are_one_core(decoders):
    """A module per head with its own q, k, v Linears, concatenated into the projection, gives the graph of one
    projection split into heads; under 2.7 it held one core per head."""
    assert _same(decoders["heads"]["2.8"], decoders["base"]["2.8"])
    assert not _same(decoders["heads"]["2.7"], decoders["base"]["2.7"])
    assert decoders["heads"]["2.7"].ops.count("causal_attention") == 2 * H
    assert decoders["heads"]["2.8"].ops.count("causal_attention") == 2


@pytest.mark.parametrize("kind", ["heads-normed", "heads-differential"])
def test_heads_combined_before_the_projection_stay_apart(decoders, kind):
    """Heads normalised together, or combined (differential attention), before the projection are other designs."""
    assert _same(decoders[kind]["2.8"], decoders[kind]["2.7"])
    assert decoders[kind]["2.8"].ops.count("causal_attention") == 2 * H
    assert not _same(decoders[kind]["2.8"], decoders["base"]["2.8"])


def test_28_is_27_with_its_pass_applied(vits, decoders):
    for kind, by in {**vits, **decoders}.items():
        assert _same(upgrade(by["2.3"].ops, by["2.3"].edges, "2.8"), by["2.8"]), kind
        assert _same(upgrade(by["2.7"].ops, by["2.7"].edges, "2.8"), by["2.8"]), kind
        assert _same(upgrade(by["2.8"].ops, by["2.8"].edges, "2.8"), by["2.8"]), kind  # idempotent


def test_a_slice_of_the_input_concatenated_stays():
    """YOLOX's `Focus`: slices of the image concatenated (and convolved) are no table, even beside an upsample."""
    ops = ["slice", "slice", "concat", "conv", "upsample", "add"]
    edges = np.array([[0, 1, 2, 3, 3, 4], [2, 2, 3, 4, 5, 5]])
    assert upgrade(ops, edges, "2.8").ops == ops


def test_an_index_of_28_reads_a_23_corpus_under_28():
    from narbench.data.mapping import newest_rules

    assert newest_rules("2.3", "2.8") == "2.8" and newest_rules("2.3", "2.7") == "2.7"


@pytest.mark.slow
def test_what_28_changes_in_real_23():
    """Measured 2026-11-30 (`benchmarks/search/rules_next.py`): the pass rewrites 51 graphs of real 2.3 read under
    2.7, DPT's, PVT's and YOLOS's interpolated position tables; no graph has heads written as modules."""
    from narbench.data.dataset import load_dataset
    from narbench.data.mapping import read_newest

    ds = load_dataset("real-2.3")
    graphs, version = read_newest(ds.core_graphs, ds.vocab, ds.canonical_version, "2.7")
    assert version == "2.7"
    names = np.asarray(list(ds.vocab), dtype=object)
    changed = []
    for g in graphs:
        ops = names[g.ops].tolist()
        up = upgrade(ops, g.edges, "2.8")
        if up.ops != ops or not np.array_equal(up.edges, g.edges):
            changed.append(g.family)
            assert "upsample" in ops and up.ops.count("attention") == ops.count("attention"), g.name
    assert len(changed) == 51 and set(changed) == {"dpt", "pvt", "yolos"}
