"""Canonical 2.11: torch's own multi-head attention given a causal mask is `causal_attention`
(`torch-attention-causal`; the mark `causal_core`, recorded by `narbench.zoo.attributes`).

The attribute mode sees a call to `F.multi_head_attention_forward` but not the calls inside it, so where its mask is
applied was never seen: these tests fail if torch stops dispatching that function to modes with `attn_mask` and
`is_causal` by keyword (how the mark reads them), or if its softmax is no longer among the nodes the call makes."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import (UPGRADES, VERSIONS, at_least, canonical_vocabulary, canonicalize,  # noqa: E402
                                     reaches, upgrade)
from narbench.zoo.extract import extract_graph  # noqa: E402

D, HEADS, VOCAB, N = 32, 4, 50, 8


def _cores(raw, version: str) -> tuple[int, int]:
    counts = raw.canonical(version).op_counts()
    return counts.get("causal_attention", 0), counts.get("attention", 0)


def _graph(model, *args):
    torch.manual_seed(0)
    return extract_graph(model, args, attributes=True)


class Seq2Seq(nn.Module):
    """Vaswani's encoder-decoder on `nn.Transformer`, its decoder's mask built in forward (`mask`: how)."""

    def __init__(self, mask: str = "float", padding: bool = False, layers: int = 2):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.t = nn.Transformer(D, HEADS, layers, layers, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(D, VOCAB)
        self.mask, self.padding = mask, padding

    def forward(self, src, tgt):
        n = tgt.shape[1]
        if self.mask == "float":
            mask = nn.Transformer.generate_square_subsequent_mask(n, device=tgt.device)
        elif self.mask == "bool":
            mask = torch.ones(n, n, dtype=torch.bool, device=tgt.device).triu(1)
        else:  # no mask: the decoder sees the future
            mask = None
        pad = (tgt == 0) if self.padding else None
        return self.out(self.t(self.emb(src), self.emb(tgt), tgt_mask=mask, tgt_key_padding_mask=pad))


class TorchGPT(nn.Module):
    """A GPT on `nn.MultiheadAttention` (weights returned, so its math path), the mask a triangle of `kind`."""

    def __init__(self, kind: str = "bool", is_causal: bool = False):
        super().__init__()
        self.emb, self.norm = nn.Embedding(VOCAB, D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.head = nn.Linear(D, VOCAB)
        self.kind, self.is_causal = kind, is_causal

    def forward(self, ids):
        x = self.emb(ids)
        n = ids.shape[1]
        if self.kind == "bool":
            mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=ids.device), 1)
        elif self.kind == "compare":  # positions compared, as transformers builds masks
            pos = torch.arange(n, device=ids.device)
            mask = pos[None, :] > pos[:, None]
        elif self.kind == "band":  # a constant mask that is not a triangle: each position sees its neighbours
            pos = torch.arange(n, device=ids.device)
            mask = (pos[None, :] - pos[:, None]).abs() > 1
        elif self.kind == "padding":
            mask = None
        else:
            mask = None
        h = self.norm(x)
        pad = (ids == 0) if self.kind == "padding" else None
        a, _ = self.attn(h, h, h, attn_mask=mask, key_padding_mask=pad, is_causal=self.is_causal and mask is not None)
        return self.head(x + a)


class EncoderGPT(nn.Module):
    """A decoder-only model on `nn.TransformerEncoder` with a causal mask (common in from-scratch code)."""

    def __init__(self, causal: bool = True):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, HEADS, 64, 0.0, batch_first=True,
                                                                    norm_first=True), 2, enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)
        self.causal = causal

    def forward(self, ids):
        n = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=ids.device) if self.causal else None
        return self.head(self.enc(self.emb(ids), mask=mask, is_causal=self.causal))


class HandGPT(nn.Module):
    """`EncoderGPT` written by hand: one packed projection, heads, sdpa(is_causal=True), a pre-LN block."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(nn.ModuleDict({"n1": nn.LayerNorm(D), "qkv": nn.Linear(D, 3 * D),
                                                   "o": nn.Linear(D, D), "n2": nn.LayerNorm(D),
                                                   "f1": nn.Linear(D, 64), "f2": nn.Linear(64, D)})
                                    for _ in range(2))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        b, n, _ = x.shape
        for blk in self.blocks:
            q, k, v = (t.view(b, n, HEADS, -1).transpose(1, 2) for t in blk["qkv"](blk["n1"](x)).chunk(3, -1))
            x = x + blk["o"](F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, D))
            x = x + blk["f2"](F.relu(blk["f1"](blk["n2"](x))))
        return self.head(x)


def _ids(n: int = N) -> torch.Tensor:
    return torch.randint(1, VOCAB, (1, n))


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("mask", ["float", "bool"])
@pytest.mark.parametrize("padding", [False, True])
def test_a_decoder_on_torch_layers_is_causal_under_211(mask, padding):
    raw = _graph(Seq2Seq(mask, padding), _ids(), _ids())
    assert _cores(raw, "2.11") == (2, 4)  # each decoder layer's self-attention; cross- and encoder attention not
    assert _cores(raw, "2.10") == (0, 6)  # before: the mark is ignored, a decoder read as an encoder


def test_without_a_mask_torch_attention_stays_attention():
    raw = _graph(Seq2Seq("none"), _ids(), _ids())
    assert _cores(raw, "2.11") == (0, 6)
    assert not any("causal" in op for op in raw.ops)


@pytest.mark.parametrize("kind,is_causal", [("bool", False), ("compare", False), ("bool", True)])
def test_multihead_attention_with_a_triangle_is_causal(kind, is_causal):
    raw = _graph(TorchGPT(kind, is_causal), _ids())
    assert _cores(raw, "2.11") == (1, 0)
    assert _cores(raw, "2.10") == (0, 1)


@pytest.mark.parametrize("kind", ["band", "padding", "none"])
def test_multihead_attention_without_a_triangle_is_not(kind):
    raw = _graph(TorchGPT(kind), _ids())
    assert _cores(raw, "2.11") == (0, 1)


def test_torch_encoder_layers_with_a_causal_mask_are_the_hand_written_decoder():
    torch_raw, hand_raw = _graph(EncoderGPT(), _ids()), _graph(HandGPT(), _ids())
    a, b = torch_raw.canonical("2.11"), hand_raw.canonical("2.11")
    assert a.op_counts()["causal_attention"] == 2
    assert a.ops == b.ops and np.array_equal(a.edges, b.edges)  # one design, two spellings: one graph
    assert torch_raw.canonical("2.10").op_counts().get("causal_attention", 0) == 0  # before: they differed
    plain = _graph(EncoderGPT(causal=False), _ids()).canonical("2.11")  # the same layers unmasked: an encoder
    assert plain.op_counts().get("causal_attention", 0) == 0 and plain.op_counts()["attention"] == 2


def test_on_meta_the_mask_is_read_from_how_it_was_built():
    with torch.device("meta"):
        model = TorchGPT("bool")
    raw = extract_graph(model, (torch.randint(1, VOCAB, (1, N), device="meta"),), attributes=True)
    assert _cores(raw, "2.11") == (1, 0)


def test_version_211_reads_the_mark_and_changes_no_canonical_graph():
    assert VERSIONS.index("2.11") == VERSIONS.index("2.10") + 1 and at_least("2.11", "2.10") and not at_least("2.10", "2.11")
    assert canonical_vocabulary("2.11") == canonical_vocabulary("2.10")
    assert reaches("2.10", "2.11") and reaches("2.3", "2.11")
    ops, edges = ["linear", "matmul", "softmax", "matmul"], np.array([[0, 1, 2], [1, 2, 3]])
    assert UPGRADES["2.11"][1](ops, edges) is False
    up = upgrade(ops, edges, "2.11")
    assert up.ops == ops and np.array_equal(up.edges, edges)
    raw = ["EmbeddingBackward0", "BmmBackward0", "SafeSoftmaxBackward0#causal_core", "BmmBackward0"]
    e = np.array([[0, 0, 1, 2, 0], [1, 3, 2, 3, 1]])[:, :4]
    assert canonicalize(raw, e, "2.10").ops == ["embedding", "attention"]
    assert canonicalize(raw, e, "2.11").ops == ["embedding", "causal_attention"]


def test_rules_of_211_hash_its_row():
    from narbench.data.canonical_rules import rules, rules_sha256

    assert rules_sha256("2.11") != rules_sha256("2.10")
    assert any(r.rule == "torch-attention-causal" and r.version == "2.11" for r in rules())
