"""Graph extraction (`narbench.zoo.extract`), and the width shrinking of `narbench.zoo.sources`."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.zoo.extract import (  # noqa: E402
    DROPPED_OPS,
    attention_patterns,
    autograd_graph,
    coarse_label,
    extract_graph,
)


def edges_of(g) -> list[tuple[int, int]]:
    return [tuple(e) for e in g.edges.T.tolist()]


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 3, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        h = self.conv1(x)
        return torch.relu(self.conv2(torch.relu(h)) + h)


class Attention(nn.Module):
    def __init__(self, d=8, sdpa=False):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.sdpa, self.d = sdpa, d

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        if self.sdpa:
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            a = torch.softmax(q @ k.transpose(-2, -1) / self.d**0.5, dim=-1) @ v
        return self.o(a)


def test_mlp_ops_and_edges():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    g = extract_graph(mlp, torch.randn(3, 4))
    assert g.ops == ["AddmmBackward0", "ReluBackward0", "AddmmBackward0"]
    assert edges_of(g) == [(0, 1), (1, 2)]
    assert coarse_label(g.ops, g.edges) == "other"


def test_residual_block_ops_and_edges():
    g = extract_graph(Residual(), torch.randn(1, 3, 8, 8))
    assert g.ops == ["ConvolutionBackward0", "ReluBackward0", "ConvolutionBackward0", "AddBackward0", "ReluBackward0"]
    # conv1 feeds both relu1 and the skip connection into the add.
    assert edges_of(g) == [(0, 1), (0, 3), (1, 2), (2, 3), (3, 4)]
    assert g.coarse() == "cnn"
    arch = g.to_arch_graph(sorted(set(g.ops)), name="res", family="resnet")
    arch.validate()
    assert list(arch.topological_order()) == list(range(arch.num_nodes))


def test_accumulate_grad_and_transpose_spliced():
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    out = torch.relu(lin(x).t())  # TBackward0 between two kept ops; weights' AccumulateGrad leaves
    names = []
    stack, seen = [out.grad_fn], set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        names.append(type(n).__name__)
        stack += [f for f, _ in n.next_functions if f is not None]
    assert {"AccumulateGrad", "TBackward0"} <= set(names)  # they are there in the raw graph
    g = autograd_graph(out)
    assert not DROPPED_OPS & set(g.ops)
    assert g.ops == ["AddmmBackward0", "ReluBackward0"]
    assert edges_of(g) == [(0, 1)]  # spliced through the transpose


def test_frozen_parameters_still_appear():
    mlp = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    for p in mlp[0].parameters():
        p.requires_grad_(False)
    assert extract_graph(mlp, torch.randn(1, 4)).ops[0] == "AddmmBackward0"


@pytest.mark.parametrize("sdpa", [False, True])
def test_attention_block_is_attention(sdpa):
    g = extract_graph(Attention(sdpa=sdpa), torch.randn(2, 5, 8))
    assert "BmmBackward0" in g.ops
    assert any("Softmax" in op for op in g.ops)
    assert attention_patterns(g.ops, g.edges) == 1
    assert g.coarse() == "attention"


def test_meta_and_cpu_give_the_same_graph():
    torch.manual_seed(0)
    cpu = extract_graph(Attention(sdpa=True), torch.randn(2, 5, 8))
    with torch.device("meta"):
        model, x = Attention(sdpa=True), torch.randn(2, 5, 8)
    meta = extract_graph(model, x)
    assert cpu.signature() == meta.signature()


def test_extraction_is_deterministic():
    sigs = {extract_graph(m, x).signature() for m, x in
            [(Residual(), torch.randn(1, 3, 8, 8)) for _ in range(3)]}
    assert len(sigs) == 1
    sigs = {extract_graph(Attention(), torch.randn(1, 4, 8)).signature() for _ in range(3)}
    assert len(sigs) == 1


def test_unknown_ops_against_a_vocabulary():
    g = extract_graph(Residual(), torch.randn(1, 3, 8, 8))
    with pytest.raises(KeyError, match="ReluBackward0"):
        g.to_arch_graph(["ConvolutionBackward0", "AddBackward0"], name="x")
    vocab = ["ConvolutionBackward0"]
    arch = g.to_arch_graph(vocab, name="x", unknown="extend")
    assert vocab[1:] == ["AddBackward0", "ReluBackward0"] and arch.ops.max() == 2


# ----------------------------------------------------------------------------- transformers


@pytest.mark.parametrize("model_type", ["bert", "llama"])
def test_shrunk_width_matches_full_width(model_type):
    transformers = pytest.importorskip("transformers")
    from narbench.zoo.sources import shrink_config, transformers_inputs

    base = transformers.AutoConfig.for_model(
        model_type, hidden_size=256, intermediate_size=512, num_attention_heads=8, num_hidden_layers=2,
        vocab_size=3000, **({"num_key_value_heads": 2} if model_type == "llama" else {}))
    small = shrink_config(base)
    assert small.hidden_size == 64 and small.num_hidden_layers == 2
    if model_type == "llama":
        assert small.num_key_value_heads < small.num_attention_heads  # grouped-query kept
    sigs = []
    for cfg, dev in ((base, "cpu"), (small, "cpu")):
        with torch.device(dev):
            model = transformers.AutoModelForSequenceClassification.from_config(cfg, attn_implementation="eager")
        kw = transformers_inputs(model, cfg, "sequence-classification", dev)
        sigs.append(extract_graph(model, (), kw).signature())
    assert sigs[0] == sigs[1]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_is_back_as_it_was_after_a_pass(enabled):
    import gc

    from narbench.zoo.extract import extract_graph

    def broken(x):
        raise ValueError("bad forward")

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        extract_graph(torch.nn.Linear(3, 2), torch.zeros(1, 3))
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError):
            extract_graph(broken, torch.zeros(1, 3), prepare=False)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
