"""What extraction records for canonical 2.3 (issue 59 items 2 and 3): a convolution's groups and
dimensions as design attributes, and custom autograd functions traced through."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.zoo.extract import extract_graph  # noqa: E402
from narbench.zoo.functions import ThroughFunctions, tracing_functions  # noqa: E402


def conv_names(model, x, device="cpu"):
    g = extract_graph(model.to(device), x.to(device), attributes=True)
    return [o for o in g.ops if o.startswith("Convolution")]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_groups_and_dimensions_are_recorded_on_every_device(device):
    x2, x1, x3 = torch.randn(1, 8, 8, 8), torch.randn(1, 8, 8), torch.randn(1, 8, 4, 8, 8)
    assert conv_names(nn.Conv2d(8, 16, 3), x2, device) == ["ConvolutionBackward0"]  # 2.2's name, unchanged
    assert conv_names(nn.Conv2d(8, 8, 3, groups=8), x2, device) == ["ConvolutionBackward0#depthwise"]
    assert conv_names(nn.Conv2d(8, 16, 3, groups=4), x2, device) == ["ConvolutionBackward0#grouped"]
    assert conv_names(nn.Conv1d(8, 8, 3, groups=8), x1, device) == ["ConvolutionBackward0#1d#depthwise"]
    assert conv_names(nn.Conv3d(8, 8, 3), x3, device) == ["ConvolutionBackward0#3d"]
    assert conv_names(nn.ConvTranspose2d(8, 8, 3, groups=8), x2, device) == ["ConvolutionBackward0#depthwise"]
    assert conv_names(nn.ConvTranspose2d(8, 16, 3, groups=2), x2, device) == ["ConvolutionBackward0#grouped"]


def test_every_spelling_of_a_depthwise_convolution_is_one_name():
    """nn.Conv2d, F.conv2d and torch.conv2d with the same groups record the same attributes."""
    w = torch.randn(8, 1, 3, 3, requires_grad=True)

    class Functional(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.w, self.f = nn.Parameter(w.detach().clone()), f

        def forward(self, x):
            return self.f(x, self.w, None, 1, 1, 1, 8)

    x = torch.randn(1, 8, 8, 8)
    want = ["ConvolutionBackward0#depthwise"]
    assert conv_names(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), x) == want
    assert conv_names(Functional(torch.nn.functional.conv2d), x) == want
    assert conv_names(Functional(torch.conv2d), x) == want


class TanhGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g


class NoGradInside(torch.autograd.Function):
    """Newer style (forward without ctx, setup_context apart), running under no_grad as reversible layers do."""

    @staticmethod
    def forward(x):
        with torch.no_grad():
            return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g


class Raises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if not ctx.needs_input_grad[0] or torch.is_grad_enabled():
            raise RuntimeError("only under apply")
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g


class UsesFunctions(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.lin, self.fn = nn.Linear(4, 4), fn

    def forward(self, x):
        return self.fn.apply(self.lin(x))


def test_a_custom_function_is_traced_through_when_asked():
    x = torch.randn(2, 4)
    opaque = extract_graph(UsesFunctions(TanhGelu), x, functions=False)
    assert opaque.ops == ["AddmmBackward0", "TanhGeluBackward"]
    through = extract_graph(UsesFunctions(TanhGelu), x, functions=True)
    assert "TanhGeluBackward" not in through.ops and "TanhBackward0" in through.ops
    assert "opaque_functions" not in through.meta
    with tracing_functions(True):  # the context switch a search uses
        assert extract_graph(UsesFunctions(TanhGelu), x).ops == through.ops


@pytest.mark.parametrize("fn", [NoGradInside, Raises])
def test_a_function_that_cannot_be_traced_through_stays_one_node_and_is_named(fn):
    x = torch.randn(2, 4)
    g = extract_graph(UsesFunctions(fn), x, functions=True)
    assert g.ops == ["AddmmBackward0", f"{fn.__name__}Backward"]
    assert g.meta["opaque_functions"] == [fn.__name__]


def test_the_patch_on_function_apply_is_undone_and_public():
    """`Function.apply` is public API, defined on `Function` as a classmethod (a Python one in torch 2.13, a C
    `classmethod_descriptor` from 2.14): if torch moves it, this fails before a build does."""
    before = torch.autograd.Function.__dict__["apply"]
    assert hasattr(before, "__get__") and callable(before.__get__(None, TanhGelu))
    with pytest.raises(ValueError):
        with ThroughFunctions():
            assert torch.autograd.Function.__dict__["apply"] is not before
            raise ValueError
    assert torch.autograd.Function.__dict__["apply"] is before


def test_the_private_name_that_tells_the_two_forward_styles_apart_is_still_there():
    """`narbench.zoo.functions._direct` reads `torch.autograd.function._SingleLevelFunction.setup_context` (private)
    to tell `forward(ctx, ...)` from `forward(...)` + `setup_context`: if torch moves it, this fails first."""
    from torch.autograd.function import _SingleLevelFunction

    assert TanhGelu.setup_context is _SingleLevelFunction.setup_context
    assert NoGradInside.setup_context is not _SingleLevelFunction.setup_context
