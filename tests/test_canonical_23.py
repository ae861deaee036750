"""Canonical version 2.3 (issue 59): each 2.3 row of `narbench/data/canonical-rules.csv` has a pair of
real torch modules that must give the identical canonical graph and a pair that must not, extracted as a
2.3 build does (`extract_graph(..., attributes=True, functions=True)`); 2.1 and 2.2 stay as pinned.

Models run on the CPU at small sizes.
"""

from __future__ import annotations

import math
from functools import lru_cache

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from narbench.data.canonical import OPS_2_2, OPS_2_3, canonical_vocabulary, canonicalize  # noqa: E402
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

D, EPS = 16, 1e-6


def norm(kind: str, x, w):
    """A normalisation over the last dim of x, written as `kind`, times a learned scale w."""
    u = x.mean(-1, keepdim=True)
    if kind == "rms-pow":  # LLaMA
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
    if kind == "rms-xx":  # the spelling issue 59 saw: x * x reads as a scaling
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w
    if kind == "rms-div":
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * w
    if kind == "rms-pow-half":  # Gemma-3n
        return x * torch.pow(x.pow(2).mean(-1, keepdim=True) + EPS, -0.5) * w
    if kind == "rms-recip":
        return x * torch.reciprocal(torch.sqrt(x.square().mean(-1, keepdim=True) + EPS)) * w
    if kind == "l2-normalize":  # Swin-V2, XCiT: F.normalize
        return F.normalize(x, dim=-1) * w
    if kind == "l2-sum":  # gated delta nets' l2norm
        return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + EPS) * w
    if kind == "l2-norm":
        return x / x.norm(dim=-1, keepdim=True).clamp_min(EPS) * w
    if kind == "sum-norm":  # a division by the sum, as a hand-written softmax divides: not a norm
        return x / x.sum(-1, keepdim=True) * w
    if kind == "ln":
        return F.layer_norm(x, (D,), w)
    if kind == "ln-var":
        return (x - u) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + EPS) * w
    if kind == "ln-std":
        return (x - u) / (x.std(-1, keepdim=True) + EPS) * w
    if kind == "ln-var-mean":
        v, m = torch.var_mean(x, -1, keepdim=True, unbiased=False)
        return (x - m) * torch.rsqrt(v + EPS) * w
    if kind == "ln-xx":
        c = x - u
        return c * torch.rsqrt((c * c).mean(-1, keepdim=True) + EPS) * w
    if kind == "ln-twice":  # DeBERTa, Cohere: the centring computed twice
        return (x - u) / torch.sqrt((x - u).pow(2).mean(-1, keepdim=True) + EPS) * w
    if kind == "ln-moments":  # E[x^2] - E[x]^2
        return (x - u) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) - u.pow(2) + EPS) * w
    if kind == "simple-rsqrt":  # timm's SimpleNorm: scaled by the std, not centred
        return x * torch.rsqrt(x.var(-1, keepdim=True) + EPS) * w
    if kind == "simple-sqrt":
        return x / torch.sqrt(x.var(-1, keepdim=True) + EPS) * w
    if kind == "simple-std":
        return x / (x.std(-1, keepdim=True) + EPS) * w
    if kind == "gn-hand":  # a group norm by hand: the layer norm of 4 groups
        g = x.reshape(*x.shape[:-1], 4, D // 4)
        m, v = g.mean(-1, keepdim=True), g.var(-1, keepdim=True, unbiased=False)
        return ((g - m) / torch.sqrt(v + EPS)).reshape(x.shape) * w
    if kind == "gn":
        return F.group_norm(x.transpose(1, 2), 4).transpose(1, 2) * w
    raise KeyError(kind)


class NormBlock(nn.Module):
    """A pre-norm (or post-norm) residual MLP block whose normalisation is written as `kind`."""

    def __init__(self, kind: str, post: bool = False) -> None:
        super().__init__()
        self.kind, self.post = kind, post
        self.inp, self.fc1, self.fc2 = nn.Linear(8, D), nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        self.w = nn.Parameter(torch.ones(D))

    def forward(self, x):
        h = self.inp(x)
        if self.post:
            return norm(self.kind, h + self.fc2(F.gelu(self.fc1(h))), self.w)
        return h + self.fc2(F.gelu(self.fc1(norm(self.kind, h, self.w))))


class Quotient(nn.Module):
    """a / b, a * reciprocal(b) or a * b of two branches of one input."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.inp, self.fa, self.fb, self.out = nn.Linear(8, D), nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, 4)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        a, b = torch.tanh(self.fa(h)), F.softplus(self.fb(h)) + 1
        q = {"div": lambda: a / b, "recip": lambda: a * torch.reciprocal(b), "mul": lambda: a * b}[self.kind]()
        return self.out(q)


def standardize(kind: str, w):
    """A conv weight standardised (per output channel) as `kind`."""
    dims = (1, 2, 3)
    if kind == "batch_norm":  # timm's StdConv2d
        return F.batch_norm(w.reshape(1, w.shape[0], -1), None, None, training=True, momentum=0.0,
                            eps=EPS).reshape_as(w)
    m = w.mean(dim=dims, keepdim=True)
    if kind == "var-sqrt":
        return (w - m) / torch.sqrt(w.var(dim=dims, keepdim=True, unbiased=False) + EPS)
    if kind == "var-rsqrt":
        return (w - m) * torch.rsqrt(w.var(dim=dims, keepdim=True, unbiased=False) + EPS)
    if kind == "std":
        return (w - m) / (w.std(dim=dims, keepdim=True) + EPS)
    if kind == "var-mean":
        v, m = torch.var_mean(w, dim=dims, keepdim=True, unbiased=False)
        return (w - m) / torch.sqrt(v + EPS)
    return w  # "none"


class WSNet(nn.Module):
    """A stem and a residual pair of 3x3 convolutions whose weights are standardised as `kind` (NF-ResNet, BiT)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.stem, self.c1, self.c2 = (nn.Conv2d(3 if i == 0 else 8, 8, 3, padding=1) for i in range(3))
        self.head = nn.Linear(8, 4)

    def conv(self, c, x):
        return F.conv2d(x, standardize(self.kind, c.weight), c.bias, padding=1)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = h + self.conv(self.c2, torch.relu(self.conv(self.c1, h)))
        return self.head(h.mean((2, 3)))


class BNNet(nn.Module):
    """conv -> batch norm (nn.BatchNorm2d, or by hand in eval mode, or none) -> relu -> conv."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.c1, self.c2, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = self.c1(x)
        if self.kind == "nn":
            h = self.bn(h)
        elif self.kind == "hand":
            shape = (1, -1, 1, 1)
            h = (h - self.bn.running_mean.view(shape)) / torch.sqrt(self.bn.running_var.view(shape) + EPS)
            h = h * self.bn.weight.view(shape) + self.bn.bias.view(shape)
        return self.head(self.c2(torch.relu(h)).mean((2, 3)))


class ConvNet(nn.Module):
    """A stem, a 3x3 convolution of `groups` ("dense", "depthwise", "grouped") and a 1x1, in `dims`
    dimensions; `functional`: the 3x3 by F.convNd."""

    def __init__(self, dims: int = 2, groups: str = "dense", functional: bool = False) -> None:
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
        self.dims, self.functional = dims, functional
        self.stem = conv(3, 8, 3, padding=1)
        self.mid = conv(8, 8, 3, padding=1, groups={"dense": 1, "depthwise": 8, "grouped": 4}[groups])
        self.pw, self.head = conv(8, 8, 1), nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        if self.functional:
            f = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[self.dims]
            m = f(h, self.mid.weight, self.mid.bias, 1, 1, 1, self.mid.groups)
        else:
            m = self.mid(h)
        return self.head((h + self.pw(torch.relu(m))).flatten(2).mean(-1))


C_GELU = math.sqrt(2 / math.pi)


def bloom_gelu(x):
    """transformers' `bloom_gelu_forward`: the cubic written with products."""
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class BloomGelu(torch.autograd.Function):
    """BLOOM's GELU as the custom autograd function transformers trains it with (traced through in 2.3)."""

    forward = staticmethod(lambda ctx, x: bloom_gelu(x))
    backward = staticmethod(lambda ctx, g: g)  # never run: the extraction reads the forward pass


ACTS = {
    "gelu-nn": lambda x: F.gelu(x, approximate="tanh"),
    "gelu-pow": lambda x: 0.5 * x * (1 + torch.tanh(C_GELU * (x + 0.044715 * torch.pow(x, 3.0)))),
    "gelu-bloom": bloom_gelu,
    "gelu-cube": lambda x: 0.5 * x * (1 + torch.tanh(C_GELU * (x + 0.044715 * x * x * x))),
    "gelu-x-pow2": lambda x: 0.5 * x * (1 + torch.tanh(C_GELU * x * (1 + 0.044715 * x.pow(2)))),
    "gelu-function": lambda x: BloomGelu.apply(x),
    "silu": F.silu,
    "mish": lambda x: x * torch.tanh(F.softplus(x)),
    "tanh": torch.tanh,
}


class MLP(nn.Module):
    def __init__(self, act: str) -> None:
        super().__init__()
        self.act = ACTS[act]
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, D), nn.Linear(D, D), nn.Linear(D, 4)

    def forward(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


TOKENS, IMAGE = (2, 5, 8), (1, 3, 8, 8)
CONV_INPUT = {1: (1, 3, 8), 2: IMAGE, 3: (1, 3, 4, 8, 8)}
MODELS = {
    **{f"norm-{k}": (lambda k=k: NormBlock(k), TOKENS) for k in (
        "rms-pow", "rms-xx", "rms-div", "rms-pow-half", "rms-recip", "l2-normalize", "l2-sum", "l2-norm",
        "sum-norm", "ln", "ln-var", "ln-std", "ln-var-mean", "ln-xx", "ln-twice", "ln-moments",
        "simple-rsqrt", "simple-sqrt", "simple-std", "gn-hand", "gn")},
    "post-ln": (lambda: NormBlock("ln", post=True), TOKENS),
    "post-ln-xx": (lambda: NormBlock("ln-xx", post=True), TOKENS),
    **{f"quotient-{k}": (lambda k=k: Quotient(k), (2, 8)) for k in ("div", "recip", "mul")},
    **{f"ws-{k}": (lambda k=k: WSNet(k), IMAGE) for k in ("batch_norm", "var-sqrt", "var-rsqrt", "std", "var-mean",
                                                          "none")},
    **{f"bn-{k}": (lambda k=k: BNNet(k), IMAGE) for k in ("nn", "hand", "none")},
    **{f"conv{d}d-{g}{'-F' if f else ''}": (lambda d=d, g=g, f=f: ConvNet(d, g, f), CONV_INPUT[d])
       for d in (1, 2, 3) for g in ("dense", "depthwise", "grouped") for f in (False, True)},
    **{f"act-{a}": (lambda a=a: MLP(a), (2, 8)) for a in ACTS},
}


@lru_cache(maxsize=None)
def raw_graph(name: str):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    return extract_graph(build(), torch.randn(*shape), attributes=True, functions=True)


def canonical(name: str, version: str = "2.3"):
    return raw_graph(name).canonical(version)


#: rule -> pairs that are one design (identical 2.3 graphs) and pairs that are not.
SAME = {
    "conv-groups-dims": [("conv2d-depthwise", "conv2d-depthwise-F"), ("conv2d-grouped", "conv2d-grouped-F"),
                         ("conv3d-dense", "conv3d-dense-F"), ("conv1d-depthwise", "conv1d-depthwise-F")],
    "rmsnorm-by-value": [("norm-rms-pow", "norm-rms-xx"), ("norm-rms-pow", "norm-rms-div"),
                         ("norm-rms-pow", "norm-rms-pow-half"), ("norm-rms-pow", "norm-rms-recip")],
    "l2-normalize-is-rms": [("norm-rms-pow", "norm-l2-normalize"), ("norm-rms-pow", "norm-l2-sum"),
                            ("norm-l2-normalize", "norm-l2-norm")],
    "layernorm-by-value": [("norm-ln", "norm-ln-std"), ("norm-ln", "norm-ln-var-mean"), ("norm-ln", "norm-ln-xx"),
                           ("norm-ln", "norm-ln-twice"), ("norm-ln", "norm-ln-moments"), ("norm-ln", "norm-ln-var")],
    "weight-standardization": [("ws-batch_norm", "ws-var-sqrt"), ("ws-batch_norm", "ws-var-rsqrt"),
                               ("ws-batch_norm", "ws-std"), ("ws-batch_norm", "ws-var-mean")],
    "quotient-form": [("norm-simple-rsqrt", "norm-simple-std"), ("norm-simple-sqrt", "norm-simple-std"),
                      ("quotient-div", "quotient-recip")],
    "tanh-gelu-products": [("act-gelu-nn", "act-gelu-bloom"), ("act-gelu-nn", "act-gelu-function"),
                           ("act-gelu-nn", "act-gelu-cube"), ("act-gelu-nn", "act-gelu-x-pow2"),
                           ("act-gelu-nn", "act-gelu-pow")],
    # non-rewrites: what the graph cannot tell apart, stated as such
    "group-norm-axes": [("norm-gn-hand", "norm-ln")],
    "batchnorm-eval-by-hand": [("bn-hand", "bn-none")],
}
DIFFERENT = {
    "conv-groups-dims": [("conv2d-dense", "conv2d-depthwise"), ("conv2d-dense", "conv2d-grouped"),
                         ("conv2d-depthwise", "conv2d-grouped"), ("conv2d-dense", "conv3d-dense"),
                         ("conv1d-dense", "conv2d-dense"), ("conv3d-depthwise", "conv2d-depthwise")],
    "rmsnorm-by-value": [("norm-rms-pow", "norm-ln"), ("norm-rms-xx", "norm-ln-xx"), ("norm-rms-pow", "post-ln")],
    "l2-normalize-is-rms": [("norm-l2-normalize", "norm-sum-norm"), ("norm-l2-sum", "norm-ln")],
    "layernorm-by-value": [("norm-ln-xx", "post-ln-xx"), ("norm-ln", "post-ln"), ("norm-ln-std", "norm-simple-std")],
    "weight-standardization": [("ws-var-sqrt", "ws-none"), ("ws-batch_norm", "ws-none")],
    "quotient-form": [("quotient-div", "quotient-mul"), ("norm-simple-rsqrt", "norm-ln")],
    "tanh-gelu-products": [("act-gelu-bloom", "act-silu"), ("act-gelu-bloom", "act-mish"),
                           ("act-gelu-bloom", "act-tanh")],
    "group-norm-axes": [("norm-gn", "norm-ln"), ("norm-gn", "norm-gn-hand")],
    "batchnorm-eval-by-hand": [("bn-nn", "bn-hand")],
}
#: rows that state what the graph cannot tell apart (no rewrite: 2.2 and 2.3 agree on their pairs)
NON_REWRITES = {"group-norm-axes", "batchnorm-eval-by-hand"}
PAIRS = [(rule, a, b, True) for rule, pairs in SAME.items() for a, b in pairs] + \
    [(rule, a, b, False) for rule, pairs in DIFFERENT.items() for a, b in pairs]


def one_graph(a: str, b: str, version: str = "2.3") -> bool:
    ga, gb = canonical(a, version), canonical(b, version)
    return ga.ops == gb.ops and ga.signature() == gb.signature()


def test_the_23_rows_are_the_rules_tested_here_both_ways():
    rows = {r.rule for r in rules() if r.version == "2.3"}
    assert rows == {rule for rule, *_ in PAIRS}
    assert all({same for rule2, _, _, same in PAIRS if rule2 == rule} == {True, False} for rule in rows)


@pytest.mark.parametrize("rule,a,b,same", PAIRS)
def test_a_23_pair_is_one_graph_exactly_when_one_design(rule, a, b, same):
    assert one_graph(a, b) == same, f"{rule}: {a} {canonical(a).ops} vs {b} {canonical(b).ops}"


@pytest.mark.parametrize("rule", sorted(set(SAME) - NON_REWRITES))
def test_each_23_rule_changes_what_22_gave(rule):
    """A rule that 2.2 already satisfied would be no rule: some pair's verdict differs under 2.2."""
    assert any(one_graph(a, b, "2.2") != same for rule2, a, b, same in PAIRS if rule2 == rule)


@pytest.mark.parametrize("rule", sorted(NON_REWRITES))
def test_a_non_rewrite_is_what_22_gave(rule):
    assert all(one_graph(a, b, "2.2") == same for rule2, a, b, same in PAIRS if rule2 == rule)


def test_what_the_folds_produce():
    assert set(canonical("norm-rms-xx").ops) >= {"rmsnorm"} and "mul" not in canonical("norm-rms-xx").ops
    assert canonical("norm-ln-twice").ops.count("layernorm") == 1
    assert canonical("ws-std").ops.count("batchnorm") == 2 and "var" not in canonical("ws-std").ops
    assert canonical("norm-simple-rsqrt").ops[1:3] == ["var", "div"]  # x / std(x): not centred, not a norm op
    assert canonical("act-gelu-bloom").ops == ["linear", "gelu", "linear", "gelu", "linear"]
    assert canonical("conv1d-grouped").ops[:3] == ["conv1d", "relu", "conv1d_grouped"]
    assert canonical("conv3d-depthwise").ops[:3] == ["conv3d", "relu", "conv3d_depthwise"]
    assert canonical("conv2d-dense").ops[:3] == ["conv", "relu", "conv"]  # 2.2's op, unchanged


def test_the_23_vocabulary_appends_its_ops_and_covers_every_graph():
    v21, v22, v23 = (canonical_vocabulary(v) for v in ("2.1", "2.2", "2.3"))
    assert v22 == v21[:-1] + OPS_2_2 + v21[-1:]
    assert v23 == v22[:-1] + OPS_2_3 + v22[-1:] and len(set(v23)) == len(v23)
    for name in MODELS:
        assert set(canonical(name).ops) <= set(v23), name


def test_a_statistic_used_elsewhere_is_not_folded_away():
    """The fold takes a subgraph whose inner nodes nobody else reads: a shared scale stays."""
    ops = ["AddmmBackward0", "PowBackward0", "MeanBackward1", "RsqrtBackward0", "MulBackward0",
           "AddmmBackward0", "MulBackward0"]
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (3, 6), (5, 6)]
    c = canonicalize(ops, torch.tensor(edges).T.numpy(), "2.3")
    assert "rmsnorm" not in c.ops and c.ops.count("mul") == 2
    c = canonicalize(ops[:5], torch.tensor(edges[:5]).T.numpy(), "2.3")
    assert c.ops == ["linear", "rmsnorm"]


def test_the_rules_of_22_hash_as_real_22_and_crossimpl_22_recorded():
    """2.3's rows are appended, so a rebuild of a 2.2 file records the same rules sha256 as it did."""
    from importlib import resources
    from pathlib import Path

    from narbench.data.store import read_graphs

    _, _, header, _ = read_graphs(Path(str(resources.files("narbench"))) / "data" / "crossimpl-2.2.narg")
    assert rules_sha256("2.2") == header["ops"]["rules_sha256"] == \
        "9c494ea899568f541fccb18d43ddfe22f0cd9eacd01d4f3486ac609b074e5745"
    _, _, header23, _ = read_graphs(Path(str(resources.files("narbench"))) / "data" / "real-2.3.narg")
    assert rules_sha256("2.3") == header23["ops"]["rules_sha256"] != rules_sha256("2.2")  # 2.4's and 2.5's rows change neither
    assert rules_sha256("2.16") == rules_sha256() != rules_sha256("2.15") != rules_sha256("2.14") != rules_sha256("2.13") != rules_sha256("2.12") != rules_sha256("2.11") != rules_sha256("2.10") != rules_sha256("2.9") != rules_sha256("2.8") != rules_sha256("2.7") != rules_sha256("2.6") != rules_sha256("2.5") \
        != rules_sha256("2.4") != rules_sha256("2.3")
