"""Canonical graphs of small models written here: pinned across torch versions, and the same for
independent implementations of one design (and different for different designs).

The pins (`tests/data/canonical-pins.json`) were written under torch 2.13 and checked under 2.14.1
and 2.15.0 (separate virtual environments):

    python tests/test_canonical_models.py --write     # rewrite the pins (a deliberate change)
    python tests/test_canonical_models.py             # compare this torch with the pins, print a table
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch") if __name__ != "__main__" else __import__("torch")
nn = torch.nn
F = torch.nn.functional

PINS = Path(__file__).parent / "data" / "canonical-pins.json"
DIM, HEADS, SEQ = 32, 4, 6


def _heads(t, heads=HEADS):
    b, n, d = t.shape
    return t.view(b, n, heads, d // heads).transpose(1, 2)


class ViTBlock(nn.Module):
    """One pre-norm transformer block; `attention` picks how the same attention is written."""

    def __init__(self, attention: str, norm: str = "pre") -> None:
        super().__init__()
        self.attention, self.norm = attention, norm
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.mha = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def attend(self, h):
        b, n, d = h.shape
        if self.attention == "mha":
            return self.mha(h, h, h)[0]
        qkv = self.qkv(h).reshape(b, n, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        if self.attention == "select":
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = qkv.unbind(0)
        if self.attention == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v)
        elif self.attention == "einsum":
            w = torch.einsum("bhid,bhjd->bhij", q, k) * (d // HEADS) ** -0.5
            o = torch.einsum("bhij,bhjd->bhid", w.softmax(-1), v)
        else:
            o = (q @ k.transpose(-2, -1) * (d // HEADS) ** -0.5).softmax(-1) @ v
        return self.proj(o.transpose(1, 2).reshape(b, n, d))

    def forward(self, x):
        if self.norm == "post":
            x = self.ln1(x + self.attend(x))
            return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))
        x = x + self.attend(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Stack(nn.Module):
    """An embedding, `depth` blocks and a head: the shape of a real model around one block kind."""

    def __init__(self, make, depth: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, DIM)
        self.blocks = nn.ModuleList(make() for _ in range(depth))
        self.head = nn.Linear(DIM, 10)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class MLP(nn.Module):
    def __init__(self, gelu: str = "module") -> None:
        super().__init__()
        self.fc1, self.fc2, self.gelu = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM), gelu

    def act(self, h):
        if self.gelu == "tanh-formula":
            return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        if self.gelu == "tanh":
            return F.gelu(h, approximate="tanh")
        if self.gelu == "erf-formula":
            return h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
        if self.gelu == "silu-formula":
            return h * torch.sigmoid(h)
        if self.gelu == "silu":
            return F.silu(h)
        return F.gelu(h)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class RMSNormBlock(nn.Module):
    """LLaMA-style: RMSNorm (by hand or F.rms_norm), SwiGLU."""

    def __init__(self, rms: str) -> None:
        super().__init__()
        self.rms, self.w = rms, nn.Parameter(torch.ones(DIM))
        self.gate, self.up, self.down = nn.Linear(DIM, 64, bias=False), nn.Linear(DIM, 64, bias=False), nn.Linear(64, DIM, bias=False)

    def norm(self, x):
        if self.rms == "fused":
            return F.rms_norm(x, (DIM,), self.w)
        xf = x.float()
        return self.w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class ConvNeXtBlock(nn.Module):
    """Depthwise conv, LayerNorm and two Linears on a 4-d channels-last tensor (an n-d nn.Linear)."""

    def __init__(self, layer_scale: bool = True) -> None:
        super().__init__()
        self.dw = nn.Conv2d(DIM, DIM, 7, padding=3, groups=DIM)
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(DIM), nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
        self.gamma = nn.Parameter(torch.ones(DIM)) if layer_scale else None

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.ln(self.dw(x).permute(0, 2, 3, 1)))))
        if self.gamma is not None:
            h = h * self.gamma
        return x + h.permute(0, 3, 1, 2)


class InPlaceBlock(nn.Module):
    """In-place ops as zoo models write them, after a Linear on 3-d input (whose output is a view
    under torch <= 2.14 and not under 2.15, so autograd wrapped the op in `CopySlices` in one and
    not in the other): an in-place ReLU (swin v2's position-bias MLP), `h += y` (RoCBert's and
    NaFlexViT's embeddings); and in-place writes into a part of a tensor."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
        self.side = nn.Linear(DIM, 4 * DIM)

    def forward(self, x):
        h = self.fc1(x)
        if self.kind == "relu-inplace":
            h = F.relu(h, inplace=True)
        elif self.kind == "relu":
            h = F.relu(h)
        elif self.kind == "add-inplace":
            h += self.side(x)
        elif self.kind == "add":
            h = h + self.side(x)
        elif self.kind == "slice-add-inplace":  # an add written into a slice
            h[..., :DIM] += self.side(x)[..., :DIM]
        elif self.kind == "slice-relu-inplace":  # a ReLU written into a slice
            h.narrow(-1, 0, DIM).relu_()
        return x + self.fc2(h)


class TinyResNet(nn.Module):
    def __init__(self, blocks: int = 2) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, DIM, 3, padding=1), nn.BatchNorm2d(DIM), nn.ReLU())
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(DIM, DIM, 3, padding=1), nn.BatchNorm2d(DIM), nn.ReLU(),
                                                  nn.Conv2d(DIM, DIM, 3, padding=1), nn.BatchNorm2d(DIM))
                                    for _ in range(blocks))
        self.fc = nn.Linear(DIM, 10)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = F.relu(x + b(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ConvNeXtNet(nn.Module):
    def __init__(self, layer_scale: bool = True) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, DIM, 4, stride=4)
        self.blocks = nn.Sequential(*(ConvNeXtBlock(layer_scale) for _ in range(2)))
        self.fc = nn.Linear(DIM, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


TOKENS = ("tokens",)
IMAGE = ("image",)

#: name -> (builder, input kind)
MODELS = {
    "vit-sdpa": (lambda: Stack(lambda: ViTBlock("sdpa")), TOKENS),
    "vit-manual": (lambda: Stack(lambda: ViTBlock("manual")), TOKENS),
    "vit-mha": (lambda: Stack(lambda: ViTBlock("mha")), TOKENS),
    "vit-select": (lambda: Stack(lambda: ViTBlock("select")), TOKENS),
    "vit-einsum": (lambda: Stack(lambda: ViTBlock("einsum")), TOKENS),
    "vit-postnorm": (lambda: Stack(lambda: ViTBlock("manual", norm="post")), TOKENS),
    "mlp-gelu": (lambda: Stack(lambda: MLP("module")), TOKENS),
    "mlp-gelu-tanh": (lambda: Stack(lambda: MLP("tanh")), TOKENS),
    "mlp-gelu-tanh-formula": (lambda: Stack(lambda: MLP("tanh-formula")), TOKENS),
    "mlp-gelu-erf-formula": (lambda: Stack(lambda: MLP("erf-formula")), TOKENS),
    "mlp-silu": (lambda: Stack(lambda: MLP("silu")), TOKENS),
    "mlp-silu-formula": (lambda: Stack(lambda: MLP("silu-formula")), TOKENS),
    "llama-rms-fused": (lambda: Stack(lambda: RMSNormBlock("fused")), TOKENS),
    "llama-rms-hand": (lambda: Stack(lambda: RMSNormBlock("hand")), TOKENS),
    "resnet": (lambda: TinyResNet(), IMAGE),
    "convnext": (lambda: ConvNeXtNet(), IMAGE),
    "convnext-no-layerscale": (lambda: ConvNeXtNet(layer_scale=False), IMAGE),
    "inplace-relu": (lambda: Stack(lambda: InPlaceBlock("relu-inplace")), TOKENS),
    "inplace-add": (lambda: Stack(lambda: InPlaceBlock("add-inplace")), TOKENS),
    "inplace-slice-add": (lambda: Stack(lambda: InPlaceBlock("slice-add-inplace")), TOKENS),
    "inplace-slice-relu": (lambda: Stack(lambda: InPlaceBlock("slice-relu-inplace")), TOKENS),
    "outofplace-relu": (lambda: Stack(lambda: InPlaceBlock("relu")), TOKENS),
    "outofplace-add": (lambda: Stack(lambda: InPlaceBlock("add")), TOKENS),
}

#: Pairs of independent implementations of one design: their canonical graphs are identical.
SAME_DESIGN = [
    ("vit-sdpa", "vit-manual"), ("vit-sdpa", "vit-mha"), ("vit-sdpa", "vit-select"), ("vit-sdpa", "vit-einsum"),
    ("mlp-gelu", "mlp-gelu-tanh"), ("mlp-gelu", "mlp-gelu-tanh-formula"), ("mlp-gelu", "mlp-gelu-erf-formula"),
    ("mlp-silu", "mlp-silu-formula"), ("llama-rms-fused", "llama-rms-hand"),
    ("convnext", "convnext-no-layerscale"),  # LayerScale is a learned per-channel scaling: elided
    ("inplace-relu", "outofplace-relu"), ("inplace-add", "outofplace-add"),  # an in-place op is the op
]
#: Pairs that differ in design: their canonical graphs differ.
DIFFERENT_DESIGN = [("vit-manual", "vit-postnorm"), ("mlp-gelu", "mlp-silu"), ("vit-manual", "mlp-gelu"),
                    ("resnet", "convnext"),
                    # a write into a part of a tensor is not the op on the whole tensor
                    ("inplace-slice-add", "inplace-add"), ("inplace-slice-relu", "inplace-relu")]


def canonical_graph(name: str):
    from narbench.zoo.extract import extract_graph

    build, (kind,) = MODELS[name]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = build()
    x = (torch.zeros(2, SEQ, dtype=torch.long, device="meta") if kind == "tokens"
         else torch.zeros(2, 3, 32, 32, device="meta"))
    return extract_graph(model, x).canonical()


def signature(name: str) -> dict:
    g = canonical_graph(name)
    return {"nodes": g.num_nodes, "edges": g.num_edges, "sha256": g.signature()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_canonical_graph_matches_its_pin(name):
    pins = json.loads(PINS.read_text())
    assert signature(name) == pins[name], f"{name}: canonical graph changed under torch {torch.__version__}"


@pytest.mark.parametrize("a,b", SAME_DESIGN)
def test_implementations_of_one_design_have_one_canonical_graph(a, b):
    assert canonical_graph(a).signature() == canonical_graph(b).signature()


@pytest.mark.parametrize("a,b", DIFFERENT_DESIGN)
def test_different_designs_stay_different(a, b):
    assert canonical_graph(a).signature() != canonical_graph(b).signature()


def test_raw_graphs_of_the_variants_do_differ():
    """The pairs are real variants: their raw autograd graphs differ before canonicalisation."""
    from narbench.zoo.extract import extract_graph

    def raw(name):
        build, (kind,) = MODELS[name]
        with torch.device("meta"):
            model = build()
        return extract_graph(model, torch.zeros(2, SEQ, dtype=torch.long, device="meta")).signature()

    assert raw("vit-sdpa") != raw("vit-manual") and raw("mlp-gelu") != raw("mlp-gelu-tanh-formula")


if __name__ == "__main__":
    sigs = {name: signature(name) for name in sorted(MODELS)}
    if "--write" in sys.argv:
        PINS.parent.mkdir(exist_ok=True)
        PINS.write_text(json.dumps(sigs, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(sigs)} pins under torch {torch.__version__}")
    else:
        pins = json.loads(PINS.read_text())
        differ = [n for n in sigs if sigs[n] != pins.get(n)]
        print(f"torch {torch.__version__}: {len(sigs) - len(differ)} of {len(sigs)} canonical graphs as pinned"
              + (f"; differ: {', '.join(differ)}" if differ else ""))
        sys.exit(1 if differ else 0)
