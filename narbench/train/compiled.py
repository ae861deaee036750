"""Opt-in `torch.compile` of the trained model's forward, with eager PyTorch as the fallback.

`Trainer(compile=True)` (`narbench run --compile`) runs the forward pass of training and
embedding through `torch.compile(forward, dynamic=True)`: one compilation per mode (training,
inference) and per process, whatever the batch's node count, instead of one per shape. On one
CPU core it fuses the GNN's element-wise work (measured with `benchmarks/speed/bench.py --only
train-real --compile`: 1.25-1.3x over the tuned eager loop; docs/running.md; since issue 60 the
eager loop's CSR products and fused dropout, which compiled code does not use, are faster still:
docs/speed.md). It is off by default, because the fused kernels add in another order: losses agree with eager to about 1e-7
and a gcn smoke run's metrics to 5e-6, not to the last digit (gin's embeddings drift further:
docs/running.md), so a compiled run is recorded (and hashed) as a configuration of its own.

Dropout draws its random numbers as eager PyTorch does (inductor's `fallback_random`): the same
masks, so a compiled run differs from an eager one by rounding only, not by a different random
stream.

Which forward: the model's own `forward` when its class defines one (gcn, gat, gin, gps, the
macro model of `ours`); a container without one (the (F_s, F_c) pair of `ours`' stage 1) has each
direct submodule that defines a forward compiled instead.

Compilation happens on the first call (tens of seconds on a loaded CPU; inductor caches its
kernels under `TORCHINDUCTOR_CACHE_DIR`). If it fails (no C++ compiler, an op inductor does not
support, `torch.compile` itself missing), `CompiledForward` warns once with the reason, puts the
random number generators back where they were before the call and runs eager from then on: the
run goes on with eager results, never a traceback.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

#: inductor options: dropout's random numbers drawn as eager draws them (the same masks)
OPTIONS = {"fallback_random": True}


class CompileWarning(RuntimeWarning):
    """`torch.compile` failed: the run goes on eager."""


def _reason(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= 300 else text[:297] + "..."


def _rng_state() -> tuple:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def has_own_forward(module: nn.Module) -> bool:
    """Whether the module's class defines `forward` (a plain container does not)."""
    return type(module).forward is not nn.Module.forward


def targets(model: nn.Module) -> list[nn.Module]:
    """The modules whose forward `Trainer(compile=True)` compiles for `model` (see the module doc)."""
    if has_own_forward(model):
        return [model]
    return [child for child in model.children() if has_own_forward(child)]


class CompiledForward:
    """`module`'s eager forward, called through `torch.compile(..., dynamic=True)` until that fails.

    `on_failure(reason)` is called once, on the first failure; after it every call is eager.
    """

    def __init__(self, module: nn.Module, on_failure: Callable[[str], None]) -> None:
        self.eager = module.forward  # bound: the class's forward (or whatever stood there)
        self.on_failure = on_failure
        self.compiled: Callable | None = None
        try:
            self.compiled = torch.compile(self.eager, dynamic=True, options=OPTIONS)
        except Exception as exc:  # torch.compile refused at once (no dynamo on this Python, ...)
            self.on_failure(_reason(exc))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.compiled is None:
            return self.eager(*args, **kwargs)
        state = _rng_state()
        try:
            return self.compiled(*args, **kwargs)
        except Exception as exc:  # compilation failed (inductor, the C++ compiler, dynamo)
            self.compiled = None
            _set_rng_state(state)
            self.on_failure(_reason(exc))
            return self.eager(*args, **kwargs)


def warn_failure(reason: str) -> None:
    warnings.warn(f"torch.compile failed, running eager instead ({reason})", CompileWarning, stacklevel=3)
