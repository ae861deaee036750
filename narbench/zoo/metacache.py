"""A faster meta-device forward pass: reuse the output shapes of repeated operator calls.

On the meta device torch computes the output shapes of most operators with Python kernels
(`torch._meta_registrations`, `torch._refs`, `torch._decomp`), 0.03-0.9 ms per call: a 64-layer
transformer costs ~0.3 s. Its layers repeat the same calls on the same shapes. `install()` wraps
each of those Python meta kernels, once per process, through the dispatcher's public
registration API (`torch.library.Library.impl` at the `Meta` key). Outside a `MetaShapeCache`
context a wrapper only calls torch's own kernel. Inside one (on the thread that entered it), a
wrapper remembers, per kernel and input metadata (shape, stride, offset, dtype, device, every
non-tensor argument), the shapes, strides and dtypes of the outputs, and answers a repeated call
with fresh empty meta tensors, which is all a meta kernel returns.

The wrappers sit below autograd, so the autograd graph is recorded exactly as without them, and
operators with C++ meta kernels (views among them) never enter Python. An earlier version was a
`TorchDispatchMode`, which sends every call (views too) through Python: twice as slow on the
64-layer transformer (`benchmarks/speed/bench_search.py`). Only functional operators are wrapped: one
that mutates an input or returns an alias always runs its own kernel, as does a call with an
argument the key cannot describe (a generator, a symbolic size). Which kernels are torch's
Python ones is read from torch's private meta library (`_meta_lib_dont_use_me_use_register_meta`)
and each operator's `py_kernels`; a torch without them gets no wrappers, and passes run
uncached: slower, the same graph (`MetaShapeCache.active` says which).
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

import torch

_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)

_local = threading.local()  # .cache: the MetaShapeCache active on this thread, or None
_library: torch.library.Library | None = None
_wrapped: int | None = None  # kernels wrapped; None: not tried yet
_install_lock = threading.Lock()


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


def _python_meta_kernels() -> list[tuple[Any, Callable]]:
    """(operator, torch's Python meta kernel) for every functional aten operator that has one."""
    from torch._meta_registrations import _meta_lib_dont_use_me_use_register_meta as lib

    found = []
    for key in sorted(lib._op_impls):  # "aten/add.Tensor/Meta"
        ns, name, dispatch_key = key.split("/")
        if ns != "aten" or dispatch_key != "Meta":
            continue
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        schema = op._schema
        if schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
            continue
        fn = op.py_kernels.get(torch._C.DispatchKey.Meta)
        if callable(fn):
            found.append((op, fn))
    return found


def install() -> int:
    """Wrap torch's Python meta kernels (module docstring), once per process; the number wrapped.

    0 where this torch does not expose them: passes then run uncached, on torch's own kernels."""
    global _library, _wrapped
    with _install_lock:
        if _wrapped is None:
            library: torch.library.Library | None = torch.library.Library("aten", "IMPL")
            try:
                kernels = _python_meta_kernels()
                with warnings.catch_warnings():  # "Overriding a previously registered kernel": the point
                    warnings.simplefilter("ignore")
                    for op, fn in kernels:
                        library.impl(op, _wrapper(fn), "Meta")
            except Exception:  # noqa: BLE001 - a torch whose private layout differs
                library, kernels = None, []  # dropping the library takes back what it registered
            _library, _wrapped = library, len(kernels)
        return _wrapped


def _wrapper(fn: Callable) -> Callable:
    def kernel(*args, **kwargs):
        cache = getattr(_local, "cache", None)
        if cache is None:
            return fn(*args, **kwargs)
        return cache._call(fn, args, kwargs)

    kernel.__wrapped__ = fn
    return kernel


class MetaShapeCache:
    """Inside `with MetaShapeCache():`, repeated functional meta calls skip their shape kernels.

    Use one instance per forward pass (`hits` and `misses` count the calls it answered and ran;
    `active` is False where torch's meta kernels could not be wrapped)."""

    def __init__(self) -> None:
        self._shapes: dict[Any, tuple[type | None, list[tuple]]] = {}
        self.hits = 0
        self.misses = 0
        self.active = False
        self._outer: MetaShapeCache | None = None

    def __enter__(self) -> "MetaShapeCache":
        self.active = install() > 0
        self._outer = getattr(_local, "cache", None)
        _local.cache = self if self.active else self._outer
        return self

    def __exit__(self, *exc: object) -> None:
        _local.cache = self._outer

    def _call(self, fn: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
        try:
            key = (fn, _key(args), _key(tuple(kwargs.items())) if kwargs else ())
            spec = self._shapes.get(key)
        except (_Uncacheable, TypeError):  # e.g. a generator, a symbolic size (unhashable)
            return fn(*args, **kwargs)
        if spec is None:
            self.misses += 1
            out = fn(*args, **kwargs)
            many = (list if isinstance(out, list) else tuple) if isinstance(out, (tuple, list)) else None
            outs = out if many else (out,)
            if all(isinstance(o, torch.Tensor) and o.is_meta and o.storage_offset() == 0 for o in outs):
                self._shapes[key] = (many, [(o.shape, o.stride(), o.dtype) for o in outs])
            return out
        self.hits += 1
        many, metas = spec
        outs = [torch.empty_strided(shape, stride, dtype=dtype, device="meta") for shape, stride, dtype in metas]
        return many(outs) if many else outs[0]  # a named tuple goes back as a plain one, as torch takes it
