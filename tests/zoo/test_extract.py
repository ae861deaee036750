"""Graph extraction (`narbench.zoo.extract`), and the width shrinking of `narbench.zoo.transformers_config`."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.data.coarse import attention_patterns, coarse_label  # noqa: E402
from narbench.zoo.extract import (  # noqa: E402
    DROPPED_OPS,
    autograd_graph,
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
    from narbench.zoo.transformers_config import shrink_config
    from narbench.zoo.transformers_zoo import transformers_inputs

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


# ----------------------------------------------------------------------------- in-place ops on views


class InPlace(nn.Module):
    """One in-place op on a view of a Linear's output (`kind`), or the same written out of place."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.a, self.b = nn.Linear(4, 6), nn.Linear(4, 6)

    def forward(self, x):
        h = self.a(x)
        if self.kind == "relu-whole":  # a view of the whole tensor (a transpose): the op itself
            h.t().relu_()
        elif self.kind == "relu-whole-out-of-place":
            h = torch.relu(h.t()).t()
        elif self.kind == "add-whole":
            h.view(-1).add_(self.b(x).view(-1))
        elif self.kind == "add-whole-out-of-place":
            h = (h.view(-1) + self.b(x).view(-1)).view(h.shape)
        elif self.kind == "add-part":  # a write into a part of the tensor
            h[:, :3] += self.b(x)[:, :3]
        elif self.kind == "relu-part":
            h.narrow(1, 0, 3).relu_()
        return h


def test_an_in_place_op_on_a_view_of_a_whole_tensor_is_recorded_as_the_op():
    relu = extract_graph(InPlace("relu-whole"), torch.randn(2, 4))
    assert relu.ops == ["AddmmBackward0", "ReluBackward0"] and edges_of(relu) == [(0, 1)]
    assert relu.signature() == extract_graph(InPlace("relu-whole-out-of-place"), torch.randn(2, 4)).signature()
    add = extract_graph(InPlace("add-whole"), torch.randn(2, 4))
    assert "CopySlices" not in add.ops and add.ops.count("AddBackward0") == 1
    assert (add.canonical().signature()
            == extract_graph(InPlace("add-whole-out-of-place"), torch.randn(2, 4)).canonical().signature())


def test_an_in_place_op_on_a_part_is_the_op_written_into_its_base():
    g = extract_graph(InPlace("relu-part"), torch.randn(2, 4))
    # the ReLU reads the Linear's output; CopySlices writes it back into that output
    assert g.ops == ["AddmmBackward0", "ReluBackward0", "CopySlices"]
    assert edges_of(g) == [(0, 1), (0, 2), (1, 2)]
    assert g.canonical().ops == ["linear", "relu", "scatter"]
    add = extract_graph(InPlace("add-part"), torch.randn(2, 4))
    i = add.ops.index("AddBackward0")
    assert add.ops[i + 1] == "CopySlices" and (i, i + 1) in edges_of(add)
    assert add.canonical().ops == ["linear", "linear", "slice", "add", "scatter"]


@pytest.mark.parametrize("kind", ["relu-whole", "add-whole", "add-part", "relu-part"])
def test_in_place_ops_give_one_graph_on_meta_and_cpu(kind):
    with torch.device("meta"):
        meta = InPlace(kind)
    assert (extract_graph(meta, torch.zeros(2, 4, device="meta")).signature()
            == extract_graph(InPlace(kind), torch.randn(2, 4)).signature())


def test_a_copyslices_the_recorder_did_not_see_keeps_its_name():
    """`autograd_graph` without the recorder's names: the form `real` 1.0 stored."""
    m = InPlace("relu-whole")
    with torch.enable_grad():
        out = m(torch.randn(2, 4))
    assert autograd_graph(out).ops == ["AddmmBackward0", "CopySlices"]


@pytest.mark.parametrize("kind", ["relu-whole", "add-whole", "add-part", "relu-part"])
def test_the_recorded_op_is_the_one_torch_wraps(kind):
    """torch >= 2.14 keeps the op a CopySlices wraps as the private `_wrapped_node` (2.13 does not:
    that is why the recorder runs the call again instead of reading it); where it is there, the
    two agree."""
    from narbench.zoo.inplace import InPlaceOnViews

    m = InPlace(kind)
    with torch.enable_grad(), InPlaceOnViews() as rec:
        m(torch.randn(2, 4))
    assert len(rec.ops) == 1
    ((node, op),) = rec.ops.items()
    assert op.whole == kind.endswith("whole")
    wrapped = getattr(node, "_wrapped_node", None)
    if wrapped is None:
        pytest.skip(f"torch {torch.__version__} does not expose CopySlices._wrapped_node")
    assert op.op == type(wrapped).__name__


def test_the_view_api_the_recorder_reads_is_there():
    """`InPlaceOnViews` reads `Tensor._is_view()` and `Tensor._base`; without them it records
    nothing (in-place ops on views stay `CopySlices`, graphs change across torch versions)."""
    from narbench.zoo.inplace import _view_api_present

    x = torch.zeros(2, 3)
    v = x.view(-1)
    assert _view_api_present()
    assert v._is_view() and v._base is x and not x._is_view()


def test_without_the_view_api_in_place_ops_stay_copyslices(monkeypatch):
    """The fallback when torch moves `_is_view`/`_base`: nothing recorded, extraction still works."""
    import narbench.zoo.inplace as inplace

    monkeypatch.setattr(inplace, "_view_api_present", lambda: False)
    assert extract_graph(InPlace("relu-whole"), torch.randn(2, 4)).ops == ["AddmmBackward0", "CopySlices"]


# ----------------------------------------------------------------------------- compiled and scripted code


@torch.jit.script
def _snake_scripted(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return x + torch.sin(a * x) ** 2 / a


def _snake(x, a):
    return x + torch.sin(a * x) ** 2 / a


class _Snake(torch.nn.Module):
    """A conv and a Snake activation (SNAC's and BigVGAN's), written plain, scripted or compiled."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(2, 2, 3)
        self.a = torch.nn.Parameter(torch.ones(1, 2, 1))
        self.fn = fn

    def forward(self, x):
        return self.fn(self.conv(x), self.a)


def test_scripted_and_compiled_functions_are_extracted_op_by_op():
    """A scripted function's ops are the design: optimised, the JIT fuses them into nodes (`CppFunction`) after its
    first runs, so a model's graph would depend on how often the process ran it; a compiled one would be one opaque
    node. Both run op by op, every time (a function the process had run optimised before stays fused: docs)."""
    x = torch.randn(1, 2, 8)
    torch.manual_seed(0)
    plain = extract_graph(_Snake(_snake), x)
    for _ in range(4):  # unoptimised, the profiling executor never fuses: the same graph each time
        scripted = extract_graph(_Snake(_snake_scripted), x)
        assert not any("CppFunction" in op for op in scripted.ops)
        assert (scripted.ops, scripted.edges.tolist()) == (plain.ops, plain.edges.tolist())
    assert any(op.startswith("SinBackward") for op in scripted.ops)
    compiled = extract_graph(_Snake(torch.compile(_snake)), x)
    assert (compiled.ops, compiled.edges.tolist()) == (plain.ops, plain.edges.tolist())
