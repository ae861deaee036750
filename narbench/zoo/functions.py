"""Tracing through custom autograd functions (`ThroughFunctions`): what a `torch.autograd.Function`
computes, recorded as the ops its `forward` runs instead of one opaque node.

A custom `Function` (DeBERTa's and BLOOM's GELU, a fused norm, a parallel scan) appears in autograd's
record as a single `<Name>Backward` node, which the op table does not know unless someone listed it:
an activation written so becomes an unknown node, and two implementations of one design differ. Within
`ThroughFunctions`, `Function.apply` calls the function's `forward` directly with gradients on, so its
ops are recorded like any other code's (and canonical rules then fold them by meaning). It falls back to
the real `apply` (one opaque node, as before) when the direct call raises, or when an input requires
gradients and no output has a `grad_fn` (a forward that runs under `no_grad` itself, as reversible layers
do: there is nothing to trace through); `fallbacks` names those functions, so a search can say so.

`Function.apply` is public API; the patch is undone on exit. A forward that falls back has run once more
(side effects, such as an in-place write into an input, happen twice). Asked for by canonical version 2.3
(`tracing_functions`, `NARBENCH_THROUGH_FUNCTIONS=1` for a build's worker processes).
"""

from __future__ import annotations

from typing import Any

from narbench.core.switch import Switch

#: Set to 1, `narbench.zoo.extract.extract_graph` traces through custom functions by default.
FUNCTIONS_ENV = "NARBENCH_THROUGH_FUNCTIONS"
_SWITCH = Switch("narbench_through_functions", FUNCTIONS_ENV)


def tracing_functions(on: bool = True):
    """Within it, `extract_graph` traces through custom functions or not, whatever the environment says."""
    return _SWITCH.on(on)


def wants_functions(asked: bool | None) -> bool:
    """`asked`, else what `tracing_functions` set, else the environment (`FUNCTIONS_ENV`)."""
    return _SWITCH.wanted(asked)


class _Context:
    """What a `forward(ctx, ...)` may call on its context, as no-ops: nothing is saved for a backward
    pass that never runs. Attributes it sets are kept (a forward may read them back)."""

    def __init__(self, inputs: tuple[Any, ...]) -> None:
        import torch

        self.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in inputs)
        self.saved_tensors: tuple[Any, ...] = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class ThroughFunctions:
    """Within it, custom autograd functions are traced through (module docstring)."""

    def __init__(self) -> None:
        self.fallbacks: list[str] = []  # functions kept as one node
        self._saved: Any = None

    def __enter__(self) -> "ThroughFunctions":
        import torch

        # a Python classmethod (torch 2.13) or a C classmethod_descriptor (2.14 on): either binds to a subclass
        self._saved = saved = torch.autograd.Function.__dict__["apply"]
        recorder = self

        def apply(cls, *args: Any, **kwargs: Any) -> Any:
            out = _direct(cls, args, kwargs)
            if out is _FALLBACK:
                name = cls.__name__
                if name not in recorder.fallbacks:
                    recorder.fallbacks.append(name)
                return saved.__get__(None, cls)(*args, **kwargs)
            return out

        torch.autograd.Function.apply = classmethod(apply)
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        torch.autograd.Function.apply = self._saved


_FALLBACK = object()


def _direct(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`cls.forward` run directly with gradients on, or `_FALLBACK` (module docstring)."""
    import torch
    from torch.autograd.function import _SingleLevelFunction

    try:
        with torch.enable_grad():
            if getattr(cls, "setup_context", None) is not _SingleLevelFunction.setup_context:
                out = cls.forward(*args, **kwargs)  # the newer style: forward(*args), setup_context apart
            else:
                out = cls.forward(_Context(args), *args, **kwargs)
    except Exception:  # noqa: BLE001 - user code may raise anything; then it is kept as one node
        return _FALLBACK
    ins = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    outs = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)] \
        if isinstance(out, (tuple, list)) else []
    if ins and outs and not any(o.grad_fn is not None for o in outs):
        return _FALLBACK
    return out
