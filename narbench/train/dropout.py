"""ReLU then dropout in one pass on the CPU, with the very masks torch's dropout draws.

`nn.Dropout` on the CPU draws its mask with `bernoulli_` (one float per element, from torch's
Mersenne Twister, element by element), divides it by the keep rate and multiplies: on a `real`
batch the mask alone took about 30% of a gcn epoch's time (benchmarks/speed/breakdown.py). Here
a compiled loop (`_dropout_kernels`) runs the same generator on the state `torch.get_rng_state()`
gives, applies ReLU and the mask in one pass and puts the advanced state back: the same output,
the same gradient (one byte per element kept for it instead of two floats), and the global
generator where torch's dropout leaves it, so every later draw is the same too.

It is used for `GNNStack`'s `dropout(relu(h))` when training on the CPU with a float32 tensor and
a plain `nn.Dropout` (0 < p < 1, no hooks), outside `torch.compile`, and only after a check in the
process found it equal to torch's own (`verified`): a torch whose generator or dropout works
otherwise gets its own dropout back, never different numbers. `narbench.train.fastpath.eager()`
switches it off.
"""

from __future__ import annotations

import numpy as np
import torch

from narbench.train import fastpath

#: `torch.get_rng_state()` of the CPU generator: its size, and where `left`, `next` and the words are
_STATE_BYTES = 5056
_LEFT, _NEXT, _WORDS = slice(8, 12), slice(16, 24), slice(24, 24 + 624 * 8)
_VERIFIED: list[bool] = []


def _read_state():
    raw = torch.get_rng_state().numpy().copy()
    return raw, raw[_WORDS].view(np.uint64).astype(np.uint32), int(raw[_LEFT].view(np.int32)[0]), \
        int(raw[_NEXT].view(np.uint64)[0])


def _write_state(raw: np.ndarray, words: np.ndarray, left: int, nxt: int) -> None:
    raw[_LEFT].view(np.int32)[0] = left
    raw[_NEXT].view(np.uint64)[0] = nxt
    raw[_WORDS].view(np.uint64)[:] = words
    torch.set_rng_state(torch.from_numpy(raw))


def _scale(p: float) -> float:
    """The kept elements' noise, computed as torch's dropout computes it (1 divided by the keep rate)."""
    return float(torch.ones(1).div_(1 - p))


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        from narbench.train._dropout_kernels import relu_dropout

        scale = np.float32(_scale(p))
        raw, words, left, nxt = _read_state()
        flat = x.detach().reshape(-1)
        out = torch.empty_like(flat)
        code = torch.empty(flat.shape, dtype=torch.uint8)
        left, nxt = relu_dropout(flat.numpy(), 1 - p, scale, words, left, nxt, out.numpy(), code.numpy())
        _write_state(raw, words, left, nxt)
        ctx.save_for_backward(code)
        ctx.scale = scale
        return out.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        from narbench.train._dropout_kernels import relu_dropout_backward

        (code,) = ctx.saved_tensors
        flat = grad.contiguous().reshape(-1)
        out = torch.empty_like(flat)
        relu_dropout_backward(flat.numpy(), code.numpy(), ctx.scale, out.numpy())
        return out.view_as(grad), None


def verified() -> bool:
    """Whether the fused pass gives torch's own outputs, gradients and generator state here (checked
    once per process on a small tensor; the global generator is put back afterwards)."""
    if not _VERIFIED:
        _VERIFIED.append(_check())
    return _VERIFIED[0]


def _check() -> bool:
    saved = torch.get_rng_state()
    try:
        torch.manual_seed(1234)
        x = torch.randn(5003)
        x[::11] = 0.0
        x[3] = -0.0
        grad = torch.randn(5003)
        start = torch.get_rng_state()
        results = []
        for fused in (False, True):
            torch.set_rng_state(start)
            leaf = x.clone().requires_grad_()
            out = _ReluDropout.apply(leaf, 0.3) if fused else torch.nn.functional.dropout(torch.relu(leaf), 0.3, True)
            out.backward(grad)
            results.append((out.detach(), leaf.grad, torch.get_rng_state(), torch.rand(3)))
        (a, ga, sa, ra), (b, gb, sb, rb) = results
        return torch.equal(a, b) and torch.equal(ga, gb) and torch.equal(sa, sb) and torch.equal(ra, rb)
    except Exception:  # noqa: BLE001 - no compiled kernel, another state layout: torch's own dropout then
        return False
    finally:
        torch.set_rng_state(saved)


def _usable(x: torch.Tensor, module: torch.nn.Module) -> bool:
    return (type(module) is torch.nn.Dropout and module.training and 0.0 < module.p < 1.0 and not module.inplace
            and not module._forward_hooks and not module._forward_pre_hooks and x.device.type == "cpu"
            and x.dtype == torch.float32 and x.is_contiguous() and not torch.compiler.is_compiling()
            and fastpath.enabled()
            and torch.get_rng_state().numel() == _STATE_BYTES and verified())


def relu_dropout(x: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
    """`module(torch.relu(x))`, in one compiled pass where that gives the same numbers (module doc)."""
    if _usable(x, module):
        return _ReluDropout.apply(x, float(module.p))
    return module(torch.relu(x))
