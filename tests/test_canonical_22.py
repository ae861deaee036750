"""Canonical version 2.2 (issue 38): each design-level rule of `narbench/data/canonical-rules.csv`
has a pair of hand-written modules that must give the identical canonical graph and a pair that
must not; and 2.1 is untouched by the design attributes the extraction now can record.

Models run on the CPU at small sizes (a causal buffer is only read off the meta device).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import CanonicalError, canonical_vocabulary, canonicalize, split_name  # noqa: E402
from narbench.data.canonical_rules import rules  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, H, T, P = 16, 2, 8, 4  # width, heads, tokens, patch size


def _heads(t):
    b, n, d = t.shape
    return t.view(b, n, H, d // H).transpose(1, 2)


def _merge(o):
    b, h, n, dh = o.shape
    return o.transpose(1, 2).reshape(b, n, h * dh)


class Attention(nn.Module):
    """Self-attention, written in the ways real code writes it.

    proj: "fused" (one qkv Linear, split) or "split" (three Linears).
    mask: "none", "buffer" (nanoGPT: a tril buffer and masked_fill), "tril" (made in the pass),
    "index" (positions compared, added as 0/-inf: transformers), "sdpa" (is_causal=True),
    "padding" (an attention mask from an input of ones, added: an encoder's), "delta" (moshi: position
    differences compared with 0, the mask given to sdpa), "band" (a local window |i - j| <= 1 given to sdpa: no
    triangle, not causal), "lengths" (funasr/ESPnet: positions compared with lengths made by `.new`, a padding
    mask applied by masked_fill: not causal).
    """

    def __init__(self, proj: str = "fused", mask: str = "none") -> None:
        super().__init__()
        self.proj, self.mask = proj, mask
        if proj == "fused":
            self.qkv = nn.Linear(D, 3 * D)
        else:
            self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.out = nn.Linear(D, D)
        self.register_buffer("bias", torch.ones(T, T).tril().view(1, 1, T, T))

    def forward(self, x, pad=None):
        if self.proj == "fused":
            q, k, v = self.qkv(x).chunk(3, dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q, k, v = _heads(q), _heads(k), _heads(v)
        n = x.shape[1]
        if self.mask == "sdpa":
            return self.out(_merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
        if self.mask in ("delta", "band"):
            pos = torch.arange(n)
            delta = pos[:, None] - pos[None, :]
            allowed = (pos[None, :] >= 0) & (delta >= 0) if self.mask == "delta" else delta.abs() <= 1
            return self.out(_merge(F.scaled_dot_product_attention(q, k, v, allowed)))
        s = q @ k.transpose(-2, -1) * (D // H) ** -0.5
        if self.mask == "buffer":
            s = s.masked_fill(self.bias[:, :, :n, :n] == 0, float("-inf"))
        elif self.mask == "tril":
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).tril().logical_not(), float("-inf"))
        elif self.mask == "index":
            i = torch.arange(n)
            allowed = i[None, :] <= i[:, None]
            s = s + torch.where(allowed, 0.0, torch.finfo(s.dtype).min)
        elif self.mask == "lengths":
            pos = torch.arange(n).unsqueeze(0).expand(x.shape[0], n)
            pad = pos >= pos.new([n] * x.shape[0]).unsqueeze(-1)  # True past each length: none here
            s = s.masked_fill(pad[:, None, None, :], float("-inf"))
        elif self.mask == "padding":
            s = s + (1.0 - pad[:, None, None, :].to(s.dtype)) * torch.finfo(s.dtype).min
        return self.out(_merge(s.softmax(-1) @ v))


class Block(nn.Module):
    """A pre-norm transformer block; its MLP is plain (GELU) or gated (SwiGLU, fused or split)."""

    def __init__(self, proj="fused", mask="none", mlp="gelu") -> None:
        super().__init__()
        self.attn = Attention(proj, mask)
        self.ln1, self.ln2, self.mlp = nn.LayerNorm(D), nn.LayerNorm(D), mlp
        if mlp == "gelu":
            self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        elif mlp == "glu-fused":
            self.gate_up, self.down = nn.Linear(D, 8 * D, bias=False), nn.Linear(4 * D, D, bias=False)
        else:
            self.gate, self.up = nn.Linear(D, 4 * D, bias=False), nn.Linear(D, 4 * D, bias=False)
            self.down = nn.Linear(4 * D, D, bias=False)

    def ffn(self, h):
        if self.mlp == "gelu":
            return self.fc2(F.gelu(self.fc1(h)))
        if self.mlp == "glu-fused":
            g, u = self.gate_up(h).chunk(2, dim=-1)
        else:
            g, u = self.gate(h), self.up(h)
        return self.down(F.silu(g) * u)

    def forward(self, x, pad=None):
        x = x + self.attn(self.ln1(x), pad)
        return x + self.ffn(self.ln2(x))


class TextModel(nn.Module):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, D)
        self.blocks = nn.ModuleList([Block(**kw), Block(**kw)])
        self.head = nn.Linear(D, 50)

    def forward(self, tokens, pad=None):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, pad)
        return self.head(x)


class CrossAttention(nn.Module):
    """q from the stream, k and v from a memory: not self-attention."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.mem = nn.Embedding(50, D), nn.Embedding(50, D)
        self.q, self.k, self.v, self.out = (nn.Linear(D, D) for _ in range(4))

    def forward(self, tokens):
        x, m = self.embed(tokens), self.mem(tokens.flip(-1))
        q, k, v = _heads(self.q(x)), _heads(self.k(m)), _heads(self.v(m))
        return self.out(_merge((q @ k.transpose(-2, -1)).softmax(-1) @ v))


class PatchViT(nn.Module):
    """A ViT whose patch embedding is a strided Conv2d, F.unfold + Linear, or reshape + Linear;
    `stem="overlap"` is a convolution over overlapping windows (kernel 7, stride 4: PVT v2)."""

    def __init__(self, stem: str) -> None:
        super().__init__()
        self.stem = stem
        if stem == "conv":
            self.patch = nn.Conv2d(3, D, P, stride=P)
        elif stem == "overlap":
            self.patch = nn.Conv2d(3, D, 7, stride=P, padding=3)
        else:
            self.patch = nn.Linear(3 * P * P, D)
        self.block, self.head = Block(), nn.Linear(D, 10)

    def forward(self, img):
        b = img.shape[0]
        if self.stem in ("conv", "overlap"):
            x = self.patch(img).flatten(2).transpose(1, 2)
        elif self.stem == "unfold":
            x = self.patch(F.unfold(img, P, stride=P).transpose(1, 2))
        else:  # reshape into patches by hand
            c, hh, ww = img.shape[1:]
            x = img.reshape(b, c, hh // P, P, ww // P, P).permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c * P * P)
            x = self.patch(x)
        return self.head(self.block(x).mean(1))


class PatchMerge(nn.Module):
    """Features cut into 2x2 patches and projected (Swin's patch merging) after a conv stem: by
    F.unfold, Tensor.unfold, or reshape; "overlap" unfolds 3x3 windows at stride 2 (not patches)."""

    def __init__(self, cut: str) -> None:
        super().__init__()
        self.cut = cut
        self.stem = nn.Conv2d(3, D, 3, padding=1)
        self.proj = nn.Linear(D * (9 if cut == "overlap" else 4), D)
        self.head = nn.Linear(D, 10)

    def forward(self, img):
        x = F.relu(self.stem(img))  # b, D, 16, 16
        b, c, hh, ww = x.shape
        if self.cut == "unfold":
            p = F.unfold(x, 2, stride=2).transpose(1, 2)
        elif self.cut == "overlap":
            p = F.unfold(x, 3, padding=1, stride=2).transpose(1, 2)
        elif self.cut == "tensor-unfold":
            p = x.unfold(2, 2, 2).unfold(3, 2, 2)  # b, c, hh/2, ww/2, 2, 2
            p = p.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * 4)
        else:
            p = x.reshape(b, c, hh // 2, 2, ww // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c * 4)
        return self.head(self.proj(p).mean(1))


class Mixer(nn.Module):
    """MLP-Mixer's token mixing: a Linear over tokens, or the same as Conv1d(kernel_size=1)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.embed = nn.Embedding(50, D)
        if token == "linear":
            self.mix1, self.mix2 = nn.Linear(T, 2 * T), nn.Linear(2 * T, T)
        elif token == "conv1d":
            self.mix1, self.mix2 = nn.Conv1d(T, 2 * T, 1), nn.Conv1d(2 * T, T, 1)
        else:  # "conv3": a real convolution over the channels, not a Linear
            self.mix1, self.mix2 = nn.Conv1d(T, 2 * T, 3, padding=1), nn.Conv1d(2 * T, T, 3, padding=1)
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, 10)

    def forward(self, tokens):
        x = self.embed(tokens)  # b, T, D
        h = self.ln(x)
        if self.token == "linear":
            h = self.mix2(F.gelu(self.mix1(h.transpose(1, 2)))).transpose(1, 2)
        else:
            h = self.mix2(F.gelu(self.mix1(h)))  # channels = tokens, length = D
        return self.head(x + h)


class Pointwise(nn.Module):
    """A 1x1 Conv2d on an image, or the same Linear applied channels-last."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.stem = nn.Conv2d(3, D, 3, padding=1)
        self.pw = nn.Linear(D, D) if kind == "linear" else nn.Conv2d(D, D, 1, groups=2 if kind == "grouped" else 1)
        self.head = nn.Linear(D, 10)

    def forward(self, img):
        x = F.relu(self.stem(img))
        if self.kind == "linear":
            x = self.pw(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        else:
            x = self.pw(x)
        return self.head(F.relu(x).mean((2, 3)))


class StrideBlock(nn.Module):
    """An inverted-residual-like block that downsamples on its 3x3 or on its closing 1x1 (timm's and
    pytorchcv's EfficientNet-EdgeTPU differ so): graphs do not record strides, 2.2 must not split them."""

    def __init__(self, where: str) -> None:
        super().__init__()
        s3, s1 = (2, 1) if where == "3x3" else (1, 2)
        self.stem = nn.Conv2d(3, D, 3, padding=1)
        self.c3, self.c1 = nn.Conv2d(D, 2 * D, 3, stride=s3, padding=1), nn.Conv2d(2 * D, D, 1, stride=s1)
        self.head = nn.Linear(D, 10)

    def forward(self, img):
        return self.head(self.c1(F.relu(self.c3(F.relu(self.stem(img))))).mean((2, 3)))


TEXT = ("tokens",)
IMAGE = ("image",)
MODELS = {
    "stride-on-3x3": (lambda: StrideBlock("3x3"), IMAGE),
    "stride-on-1x1": (lambda: StrideBlock("1x1"), IMAGE),
    "text-fused": (lambda: TextModel(), TEXT),
    "text-split": (lambda: TextModel(proj="split"), TEXT),
    "text-glu-fused": (lambda: TextModel(mlp="glu-fused"), TEXT),
    "text-glu-split": (lambda: TextModel(mlp="glu-split"), TEXT),
    "text-glu-split-qkv": (lambda: TextModel(proj="split", mlp="glu-split"), TEXT),
    "decoder-buffer": (lambda: TextModel(mask="buffer"), TEXT),
    "decoder-tril": (lambda: TextModel(mask="tril"), TEXT),
    "decoder-index": (lambda: TextModel(mask="index"), TEXT),
    "decoder-sdpa": (lambda: TextModel(mask="sdpa"), TEXT),
    "decoder-delta": (lambda: TextModel(mask="delta"), TEXT),
    "encoder-band": (lambda: TextModel(mask="band"), TEXT),
    "encoder-lengths": (lambda: TextModel(mask="lengths"), TEXT),
    "decoder-split-index": (lambda: TextModel(proj="split", mask="index"), TEXT),
    "encoder-padding": (lambda: TextModel(mask="padding"), ("tokens", "pad")),
    "cross-attention": (lambda: CrossAttention(), TEXT),
    "self-attention-1": (lambda: SelfAttentionOnly(), TEXT),
    "vit-conv": (lambda: PatchViT("conv"), IMAGE),
    "vit-unfold": (lambda: PatchViT("unfold"), IMAGE),
    "vit-reshape": (lambda: PatchViT("reshape"), IMAGE),
    "vit-overlap": (lambda: PatchViT("overlap"), IMAGE),
    "merge-unfold": (lambda: PatchMerge("unfold"), IMAGE),
    "merge-tensor-unfold": (lambda: PatchMerge("tensor-unfold"), IMAGE),
    "merge-reshape": (lambda: PatchMerge("reshape"), IMAGE),
    "merge-overlap": (lambda: PatchMerge("overlap"), IMAGE),
    "mixer-linear": (lambda: Mixer("linear"), TEXT),
    "mixer-conv1d": (lambda: Mixer("conv1d"), TEXT),
    "mixer-conv3": (lambda: Mixer("conv3"), TEXT),
    "pointwise-conv": (lambda: Pointwise("conv"), IMAGE),
    "pointwise-linear": (lambda: Pointwise("linear"), IMAGE),
    "pointwise-grouped": (lambda: Pointwise("grouped"), IMAGE),
}


class SelfAttentionOnly(CrossAttention):
    """CrossAttention's layers, with k and v from the stream itself."""

    def forward(self, tokens):
        x = self.embed(tokens)
        q, k, v = _heads(self.q(x)), _heads(self.k(x)), _heads(self.v(x))
        return self.out(_merge((q @ k.transpose(-2, -1)).softmax(-1) @ v))


def raw_graph(name: str, attributes: bool = True):
    build, kinds = MODELS[name]
    torch.manual_seed(0)
    model = build()
    args = []
    for kind in kinds:
        if kind == "tokens":
            args.append(torch.randint(0, 50, (2, T)))
        elif kind == "pad":
            args.append(torch.ones(2, T, dtype=torch.long))
        else:
            args.append(torch.randn(2, 3, 4 * P, 4 * P))
    return extract_graph(model, tuple(args), attributes=attributes)


def canonical(name: str, version: str = "2.2"):
    return raw_graph(name).canonical(version)


#: rule -> pairs that are one design (identical 2.2 graphs) and pairs that are not.
SAME = {
    "window-linear": [("mixer-linear", "mixer-conv1d"), ("vit-conv", "vit-reshape"),
                      ("pointwise-conv", "pointwise-linear"), ("stride-on-3x3", "stride-on-1x1")],
    "patch-unfold-layout": [("merge-unfold", "merge-reshape"), ("merge-tensor-unfold", "merge-reshape"),
                            ("vit-unfold", "vit-conv")],
    "one-projection": [("text-fused", "text-split"), ("text-glu-fused", "text-glu-split"),
                       ("decoder-index", "decoder-split-index")],
    "causal-attention": [("decoder-buffer", "decoder-tril"), ("decoder-buffer", "decoder-index"),
                         ("decoder-buffer", "decoder-sdpa"), ("text-fused", "encoder-padding"),
                         ("decoder-sdpa", "decoder-delta"), ("text-fused", "encoder-lengths")],
}
DIFFERENT = {
    "window-linear": [("mixer-linear", "mixer-conv3"), ("vit-conv", "vit-overlap"),
                      ("pointwise-conv", "pointwise-grouped")],
    "patch-unfold-layout": [("merge-unfold", "merge-overlap")],
    "one-projection": [("cross-attention", "self-attention-1"), ("text-glu-split", "text-fused")],
    "causal-attention": [("text-fused", "decoder-buffer"), ("encoder-padding", "decoder-index"),
                         ("text-split", "decoder-sdpa"), ("encoder-band", "decoder-delta")],
}


def test_every_22_rule_has_pairs_both_ways():
    added = {r.rule for r in rules() if r.version == "2.2"}
    assert added == set(SAME) == set(DIFFERENT)
    assert all(SAME[r] and DIFFERENT[r] for r in added)


@pytest.mark.parametrize("rule,a,b", [(r, a, b) for r, pairs in SAME.items() for a, b in pairs])
def test_one_design_one_22_graph(rule, a, b):
    ga, gb = canonical(a), canonical(b)
    assert ga.ops == gb.ops and ga.signature() == gb.signature(), f"{rule}: {a} != {b}"


@pytest.mark.parametrize("rule,a,b", [(r, a, b) for r, pairs in DIFFERENT.items() for a, b in pairs])
def test_different_designs_stay_different_in_22(rule, a, b):
    assert canonical(a).signature() != canonical(b).signature(), f"{rule}: {a} == {b}"


@pytest.mark.parametrize("a,b", [("text-fused", "text-split"), ("decoder-buffer", "text-fused"),
                                 ("vit-conv", "vit-reshape"), ("mixer-linear", "mixer-conv1d"),
                                 ("merge-unfold", "merge-reshape"), ("merge-tensor-unfold", "merge-reshape")])
def test_the_rules_are_new_in_22(a, b):
    """Each SAME pair was distinct under 2.1, or each DIFFERENT pair was merged: the rule is real."""
    same21 = canonical(a, "2.1").signature() == canonical(b, "2.1").signature()
    same22 = canonical(a).signature() == canonical(b).signature()
    assert same21 != same22


@pytest.mark.parametrize("name", sorted(MODELS))
def test_attributes_leave_21_unchanged(name):
    with_attrs, without = raw_graph(name), raw_graph(name, attributes=False)
    assert with_attrs.canonical("2.1").signature() == without.canonical("2.1").signature()
    assert [split_name(o)[0] for o in with_attrs.ops] == without.ops
    assert "attribute_errors" not in with_attrs.meta


def test_causal_mark_is_read_only_under_22():
    g = raw_graph("decoder-index")
    assert any(o.endswith("#causal") for o in g.ops)
    assert "causal_attention" in g.canonical("2.2").ops and "causal_attention" not in g.canonical("2.1").ops
    assert "attention" in g.canonical("2.1").ops


def test_22_vocabulary_adds_causal_attention_and_keeps_other_last():
    v21, v22 = canonical_vocabulary("2.1"), canonical_vocabulary("2.2")
    assert v22[-1] == v21[-1] == "other" and set(v22) - set(v21) == {"causal_attention"}
    for name in MODELS:
        assert set(canonical(name).ops) <= set(v22)


def test_unknown_version_is_refused_by_name():
    with pytest.raises(CanonicalError, match="9.9"):
        canonicalize(["ReluBackward0"], [[], []], version="9.9")


def test_one_projection_keeps_the_numbering_topological():
    g = canonical("text-glu-split-qkv")
    assert (g.edges[0] < g.edges[1]).all()
    assert g.ops.count("slice") >= 4  # qkv and gate/up of each of two blocks


def test_split_name():
    assert split_name("ConvolutionBackward0#patch") == ("ConvolutionBackward0", frozenset({"patch"}))
    assert split_name("AddBackward0") == ("AddBackward0", frozenset())
    assert split_name("AddBackward0#causal#x") == ("AddBackward0", frozenset({"causal", "x"}))
