"""ReLU + dropout in one compiled pass (narbench.train.dropout) gives torch's own masks, outputs,
gradients and generator state."""

from __future__ import annotations

import pytest
import torch

from narbench.train import dropout, fastpath


def _both(x: torch.Tensor, p: float, grad: torch.Tensor):
    start = torch.get_rng_state()
    out = []
    for fused in (False, True):
        torch.set_rng_state(start)
        leaf = x.clone().requires_grad_()
        module = torch.nn.Dropout(p).train()
        y = dropout.relu_dropout(leaf, module) if fused else module(torch.relu(leaf))
        y.backward(grad)
        out.append((y.detach(), leaf.grad, torch.get_rng_state(), torch.rand(4)))
    return out


@pytest.mark.parametrize("shape", [(1,), (311, 1), (312, 2), (313, 2), (1000, 7), (40, 128)])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.93])
def test_the_fused_pass_is_torchs_relu_then_dropout(shape, p):
    assert dropout.verified()
    gen = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=gen)
    flat = x.view(-1)
    flat[::5] = 0.0
    if flat.numel() > 8:
        flat[1], flat[2], flat[3] = -0.0, float("nan"), float("inf")
    grad = torch.randn(shape, generator=gen)
    torch.manual_seed(int(shape[0]))
    torch.rand(int(shape[0]) % 700)  # the generator part-way through its 624 words
    (a, ga, sa, ra), (b, gb, sb, rb) = _both(x, p, grad)
    assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    assert torch.equal(torch.signbit(a), torch.signbit(b))
    assert torch.equal(ga.isnan(), gb.isnan()) and torch.equal(ga.nan_to_num(), gb.nan_to_num())
    assert torch.equal(sa, sb) and torch.equal(ra, rb)


def test_torchs_own_dropout_runs_where_the_fused_pass_does_not_apply():
    x = torch.randn(10, 4)
    module = torch.nn.Dropout(0.2)
    assert dropout._usable(x, module.train())
    assert not dropout._usable(x, module.eval())
    assert not dropout._usable(x.double(), module.train())
    assert not dropout._usable(x.t(), module)  # not contiguous
    assert not dropout._usable(x, torch.nn.Dropout(0.0).train())
    with fastpath.eager():
        assert not dropout._usable(x, module)
    handle = module.register_forward_hook(lambda *a: None)
    assert not dropout._usable(x, module)
    handle.remove()
    torch.manual_seed(0)
    want = torch.nn.functional.dropout(torch.relu(x), 0.2, training=False)
    assert torch.equal(dropout.relu_dropout(x, module.eval()), want)
