"""In-place ops on views, recorded as the op they are (`narbench.zoo.extract` runs `InPlaceOnViews` around a pass).

Autograd records an in-place op on a view as one `CopySlices` node (the op, written back into the
view's base), and which tensors are views is a torch detail (`nn.Linear` on n-d input returns a view
of its 2-d product under torch <= 2.14, a fresh tensor under 2.15, so an in-place ReLU after it was
`CopySlices` in one and `ReluBackward0` in the other). `InPlaceOnViews` finds the op's own node name
the same way on every torch; `narbench.zoo.extract.autograd_graph` writes it in the `CopySlices`
node's place: on a view of a whole tensor (a reshape, transpose) the node becomes the op
(`ReluBackward0`); on a part (`x[:, :k] += y`, `x.narrow(...).relu_()`) it becomes the op followed
by a `CopySlices` node whose inputs are the base and the op. A `CopySlices` the mode did not see
(made inside a torch function) stays.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Sequence

#: The autograd node of an in-place op applied to a view (the op, written back into the base).
COPY_SLICES = "CopySlices"


@dataclass(frozen=True)
class InPlaceOp:
    """What a `CopySlices` node records: the in-place op's own node name, and whether the view it
    wrote covers its whole base (then the node is the op) or a part (the op, written into it)."""

    op: str
    whole: bool


class InPlaceOnViews:
    """Names the in-place ops on views of a forward pass, which autograd records as `CopySlices`.

    Used as a context manager around the forward pass (a `torch.overrides.TorchFunctionMode`:
    public API, the same on torch 2.13-2.15; it reads no attribute of an autograd node but its
    type, and of a tensor `_is_view()` and `_base`, see `_view_api_present`). For every
    torch call whose first argument is a view, it notes the autograd node of the view's base
    before and after; when the call made it a new `CopySlices`, the call was an in-place op on
    the view. Its own node name is found by running the call once more on a fresh tensor of the
    view's shape that is no view (`_own_node_name`); `ops` maps the `CopySlices` node to an
    `InPlaceOp`: whole when the view has its base's elements and offset (a reshape, transpose or
    alias), else a part (a slice, narrow, select).

    Only calls made by the model's own code are seen (a torch function called inside another
    torch function runs with the mode off); a `CopySlices` not seen keeps its name, on every torch.
    """

    def __init__(self) -> None:
        self.ops: dict[Any, InPlaceOp] = {}
        self._mode = _make_mode(self)

    def __enter__(self) -> "InPlaceOnViews":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def _view_api_present() -> bool:
    """Whether torch still has the (underscored, long-standing) view API the recorder reads:
    `Tensor._is_view()` and `Tensor._base` (the tensor a view aliases)."""
    import torch

    return hasattr(torch.Tensor, "_is_view") and hasattr(torch.Tensor, "_base")


def _make_mode(recorder: InPlaceOnViews) -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    if not _view_api_present():  # tests/zoo/test_extract.py notices; the nodes keep their CopySlices name
        return contextlib.nullcontext()

    class _Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            t = args[0] if args else None
            if not isinstance(t, torch.Tensor) or not t._is_view():
                return func(*args, **kwargs)
            base = t._base
            before = base.grad_fn
            out = func(*args, **kwargs)
            after = base.grad_fn
            if after is not before and after is not None and type(after).__name__ == COPY_SLICES:
                name = _own_node_name(func, t, args, kwargs)
                if name is not None:
                    whole = t.numel() == base.numel() and t.storage_offset() == base.storage_offset()
                    recorder.ops[after] = InPlaceOp(name, whole)
            return out

    return _Mode()


def _own_node_name(func: Any, t: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """The autograd node name of the in-place call `func(t, *args[1:])` on a tensor that is no view.

    None when the call fails on it or records no node of its own (it wrote into a view it made
    itself, `x[i] = y`: `CopySlices` again)."""
    import torch

    try:
        with torch.no_grad():
            fresh = torch.zeros_like(t, memory_format=torch.contiguous_format)
        probe = fresh.requires_grad_().clone()  # not a leaf, not a view
        func(probe, *args[1:], **kwargs)
    except Exception:  # noqa: BLE001 - then the node keeps its CopySlices name
        return None
    fn = probe.grad_fn
    name = type(fn).__name__ if fn is not None else None
    return None if name in (None, COPY_SLICES, "CloneBackward0") else name

