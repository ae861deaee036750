"""A faster meta-device forward pass: reuse the output shapes of repeated operator calls.

On the meta device torch computes output shapes with Python reference kernels (`torch._refs`,
`torch._decomp`), about 0.1-0.2 ms per operator: a 64-layer transformer costs ~0.3 s. Its layers
repeat the same calls on the same shapes, so `MetaShapeCache` (a `TorchDispatchMode`, which runs
below autograd: the autograd graph is recorded exactly as without it) remembers, per operator and
input metadata (shape, stride, offset, dtype, device, and every non-tensor argument), the shapes,
strides and dtypes of the outputs, and answers a repeated call with fresh empty meta tensors,
which is all a meta kernel returns. Only functional operators are cached: an operator that
mutates an input or returns an alias (views, in-place ops) always runs its own kernel, as does a
call with an argument the key cannot describe (a generator, a symbolic size).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


class _Uncacheable(Exception):
    pass


def _key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return (x.shape, x.stride(), x.storage_offset(), x.dtype, x.is_meta)
    if isinstance(x, (list, tuple)):
        return tuple(map(_key, x))
    if isinstance(x, _PLAIN):
        return (type(x), x)  # the type too: 1, 1.0 and True hash alike
    raise _Uncacheable


class MetaShapeCache(TorchDispatchMode):
    """Inside `with MetaShapeCache():`, repeated functional meta calls skip their shape kernels.

    Use one instance per forward pass (`hits` and `misses` count the calls it answered and ran)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Nothing is compiled in here: without this, torch wraps `__torch_dispatch__` in a
        # dynamo-disable guard that imports torch._dynamo (~1 s) and costs every call.
        return False

    def __init__(self) -> None:
        super().__init__()
        self._shapes: dict[Any, tuple[type | None, list[tuple]]] = {}
        self._functional: dict[Any, bool] = {}
        self.hits = 0
        self.misses = 0

    def _is_functional(self, func) -> bool:
        schema = func._schema
        ok = self._functional[func] = not schema.is_mutable and all(r.alias_info is None for r in schema.returns)
        return ok

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ok = self._functional.get(func)
        if not (ok or (ok is None and self._is_functional(func))):
            return func(*args, **kwargs)
        try:
            key = (func, _key(args), _key(tuple(kwargs.items())) if kwargs else ())
            spec = self._shapes.get(key)
        except (_Uncacheable, TypeError):  # e.g. a generator, a symbolic size (unhashable)
            return func(*args, **kwargs)
        if spec is None:
            self.misses += 1
            out = func(*args, **kwargs)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if all(isinstance(o, torch.Tensor) and o.is_meta for o in outs):
                many = type(out) if isinstance(out, (tuple, list)) else None
                self._shapes[key] = (many, [(o.shape, o.stride(), o.dtype) for o in outs])
            return out
        self.hits += 1
        many, metas = spec
        outs = [torch.empty_strided(shape, stride, dtype=dtype, device="meta") for shape, stride, dtype in metas]
        return many(outs) if many is not None else outs[0]
