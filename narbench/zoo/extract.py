"""Computational graph of one forward pass, read from the autograd graph.

`extract_graph(model, example_inputs)` runs one forward pass and returns a `RawGraph`: one
autograd node type name per node (`ConvolutionBackward0`, `AddmmBackward0`, ...) and a 2 x E
producer -> consumer edge index (the reverse of `next_functions`). The same function serves the
model zoos (the `real` dataset) and a user's own model (narbench search), so both go through the
same normalisation:

* `AccumulateGrad` (parameter leaves) and `TBackward0` (weight transposes) are dropped and
  spliced through: their producers are connected to their consumers.
* `ReshapeAliasBackward0` is renamed `ViewBackward0` (meta and CPU name the same view differently).
* An in-place op on a view is recorded as the op it is: autograd records it as one `CopySlices`
  node (the op, written back into the view's base), and which tensors are views is a torch
  detail (`nn.Linear` on n-d input returns a view of its 2-d product under torch <= 2.14, a fresh
  tensor under 2.15, so an in-place ReLU after it was `CopySlices` in one and `ReluBackward0` in
  the other). `InPlaceOnViews`, a `TorchFunctionMode` around the forward pass, finds the op's own
  node name the same way on every torch. On a view of a whole tensor (a reshape, transpose) the
  node becomes the op (`ReluBackward0`); on a part (`x[:, :k] += y`, `x.narrow(...).relu_()`) it
  becomes the op followed by a `CopySlices` node whose inputs are the base and the op: the op,
  written into a slice. A `CopySlices` the mode did not see (made inside a torch function) stays.
* Attention runs on the math SDPA kernel (`deterministic_kernels`) and transformers models should
  be built with eager attention, so the graph does not depend on which fused kernel a backend has.
* The model runs in eval mode (no dropout / drop-path nodes, no randomness) and every floating
  point parameter requires grad, so frozen layers still appear.
* Nodes are numbered in a deterministic topological order: the post-order of a depth-first walk
  from the outputs (in output order) through `next_functions` (in argument order); producers come
  before consumers. Edges are unique and sorted by (producer, consumer).

torch is imported lazily, and no model-zoo package (timm, torchvision, transformers) is imported
here at all.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import gc
import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from narbench.data.graph import ArchGraph

#: Autograd nodes removed (and spliced through) before numbering.
DROPPED_OPS = frozenset({"AccumulateGrad", "TBackward0"})
#: Autograd node names that differ between devices for the same operation.
RENAMED_OPS = {"ReshapeAliasBackward0": "ViewBackward0"}

COARSE_LABELS = ("cnn", "attention", "other")
#: Set to 1, `extract_graph` records design attributes by default (`DesignAttributes`).
ATTRIBUTES_ENV = "NARBENCH_DESIGN_ATTRIBUTES"
#: Set by `recording_attributes`: the default of `extract_graph(attributes=None)` in this context.
_ATTRIBUTES: contextvars.ContextVar[bool | None] = contextvars.ContextVar("narbench_design_attributes", default=None)


@contextlib.contextmanager
def recording_attributes(on: bool = True) -> Iterator[None]:
    """Within it, `extract_graph` (and the zoo sources that call it) records design attributes or
    not, whatever the environment says: how search extracts a query for an index of canonical 2.2
    graphs without changing the process's environment."""
    token = _ATTRIBUTES.set(bool(on))
    try:
        yield
    finally:
        _ATTRIBUTES.reset(token)


class ExtractionError(RuntimeError):
    """The forward pass produced no autograd graph (no output depends on a parameter)."""


@dataclass
class RawGraph:
    """An extracted graph before it is mapped onto a dataset's op vocabulary."""

    ops: list[str]
    edges: np.ndarray  # int64, shape (2, E), producer -> consumer, sorted, unique
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.ops)

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[1])

    def op_counts(self) -> Counter:
        return Counter(self.ops)

    def signature(self) -> str:
        """sha256 of the op names and edges: equal for identical graphs, vocabulary independent."""
        h = hashlib.sha256()
        h.update("\n".join(self.ops).encode())
        h.update(b"|")
        h.update(np.ascontiguousarray(self.edges, dtype="<i8").tobytes())
        return h.hexdigest()

    def coarse(self) -> str:
        return coarse_label(self.ops, self.edges)

    def canonical(self, version: str | None = None) -> "RawGraph":
        """This graph rewritten onto the canonical op vocabulary (`narbench.data.canonical`) of
        `version` (default: `DEFAULT_VERSION`, 2.1).

        Raw names the op table does not know become `other`; they are listed, with their
        counts, in the result's `meta["unknown_ops"]`."""
        from narbench.data.canonical import DEFAULT_VERSION, canonicalize

        c = canonicalize(self.ops, self.edges, version or DEFAULT_VERSION)
        meta = {k: v for k, v in self.meta.items() if k != "unknown_ops"}
        if c.unknown:
            meta["unknown_ops"] = dict(sorted(c.unknown.items()))
        return RawGraph(ops=c.ops, edges=c.edges, meta=meta)

    def to_arch_graph(
        self,
        vocab: Sequence[str] | dict[str, int],
        *,
        name: str,
        family: str = "",
        coarse: str | None = None,
        source: str = "",
        meta: dict[str, Any] | None = None,
        unknown: str = "error",
    ) -> ArchGraph:
        """Map op names onto `vocab` (a list, or a name -> id dict) and build an `ArchGraph`.

        `unknown`: what to do with an op name not in the vocabulary: "error" (raise KeyError
        naming the ops), or "extend" (append it; `vocab` must then be a list or dict you own).
        `coarse` defaults to the rule in `coarse_label`.
        """
        index = vocab if isinstance(vocab, dict) else {op: i for i, op in enumerate(vocab)}
        missing = sorted({op for op in self.ops if op not in index})
        if missing:
            if unknown != "extend":
                raise KeyError(f"graph {name!r}: ops not in the vocabulary: {', '.join(missing)}")
            for op in missing:
                index[op] = len(index)
                if isinstance(vocab, list):
                    vocab.append(op)
        ops = np.array([index[op] for op in self.ops], dtype=np.int64)
        return ArchGraph(
            ops=ops,
            edges=self.edges.copy(),
            name=name,
            family=family,
            coarse=coarse if coarse is not None else self.coarse(),
            source=source,
            meta=dict(self.meta if meta is None else meta),
        )

    def to_json(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "src": self.edges[0].tolist(), "dst": self.edges[1].tolist(),
                "meta": self.meta}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RawGraph":
        edges = np.array([data["src"], data["dst"]], dtype=np.int64).reshape(2, -1)
        return cls(ops=list(data["ops"]), edges=edges, meta=dict(data.get("meta", {})))


# ----------------------------------------------------------------------------- traversal


def iter_tensors(obj: Any, _depth: int = 0) -> Iterator[Any]:
    """Tensors inside a model output (tensor, tuple/list, dict / ModelOutput, dataclass), in order."""
    import torch

    if _depth > 8:
        return
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):  # includes transformers' ModelOutput (an OrderedDict)
        for value in obj.values():
            yield from iter_tensors(value, _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from iter_tensors(value, _depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, f.name, None), _depth + 1)


def autograd_graph(outputs: Any, inplace_ops: dict[Any, "InPlaceOp"] | None = None,
                   attributes: dict[Any, set[str]] | None = None) -> RawGraph:
    """The normalised autograd graph behind `outputs` (see the module docstring).

    `inplace_ops`: `CopySlices` node -> the in-place op it records (`InPlaceOnViews.ops`): the op
    node, followed by a `CopySlices` node (inputs: the base and the op) when it wrote a part.
    `attributes`: autograd node -> its design attributes (`DesignAttributes.attrs`), written after
    the node's name: `ConvolutionBackward0#pointwise` (`narbench.data.canonical.split_name`)."""
    roots: list[Any] = []
    seen_roots: set[Any] = set()
    for t in iter_tensors(outputs):
        fn = t.grad_fn
        if fn is not None and fn not in seen_roots:
            seen_roots.add(fn)
            roots.append(fn)
    if not roots:
        raise ExtractionError("no output of the forward pass has an autograd graph "
                              "(do the parameters require grad, and is grad mode on?)")

    # Post-order depth-first walk toward the producers (in argument order), producers emitted
    # before consumers: a node is expanded when first popped, and emitted (numbered, or spliced
    # through if dropped) when popped again after its producers.
    names: dict[type, str | None] = {}  # node type -> its op name (None: dropped)
    producers: dict[Any, list[Any]] = {}
    resolved: dict[Any, tuple[int, ...]] = {}  # a kept node: itself; a dropped one: its producers
    ops: list[str] = []
    src: list[int] = []
    dst: list[int] = []
    for root in roots:
        stack = [root]
        while stack:
            node = stack.pop()
            if node in resolved:
                continue
            ps = producers.get(node)
            if ps is None:
                ps = producers[node] = [fn for fn, _ in node.next_functions if fn is not None]
                if ps:  # expand now, emit when popped again; a leaf is emitted at once
                    stack.append(node)
                    stack.extend([p for p in reversed(ps) if p not in producers])
                    continue
            kind = type(node)
            if kind in names:
                name = names[kind]
            else:
                name = RENAMED_OPS.get(kind.__name__, kind.__name__)
                name = names[kind] = None if name in DROPPED_OPS else name
            srcs = [s for p in ps for s in resolved[p]]
            inplace = inplace_ops.get(node) if name == COPY_SLICES and inplace_ops else None
            if inplace is not None:  # the op; then, for a part of a tensor, its write into the base
                i = len(ops)
                ops.append(inplace.op)
                src += srcs
                dst += [i] * len(srcs)
                resolved[node] = (i,)
                if not inplace.whole:
                    base = node.next_functions[0][0]  # the base's producer (None: no history)
                    into = [*(resolved[base] if base is not None else ()), i]
                    ops.append(COPY_SLICES)
                    src += into
                    dst += [i + 1] * len(into)
                    resolved[node] = (i + 1,)
            elif name is None:
                resolved[node] = tuple(dict.fromkeys(srcs))
            else:
                i = len(ops)
                marks = attributes.get(node) if attributes else None
                ops.append(name + "".join("#" + a for a in sorted(marks)) if marks else name)
                src += srcs
                dst += [i] * len(srcs)
                resolved[node] = (i,)
    if not ops:
        raise ExtractionError("the autograd graph has no operation besides parameter leaves")
    n = len(ops)  # unique edges sorted by (producer, consumer)
    key = np.unique(np.asarray(src, dtype=np.int64) * n + np.asarray(dst, dtype=np.int64))
    return RawGraph(ops=ops, edges=np.stack([key // n, key % n]))


# ----------------------------------------------------------------------------- in-place ops on views

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
    return None if name in (None, COPY_SLICES, "CloneBackward0") else RENAMED_OPS.get(name, name)


# ----------------------------------------------------------------------------- design attributes


class DesignAttributes:
    """Design attributes of a forward pass's autograd nodes that their op names do not carry,
    read by canonical version 2.2 (`narbench/data/canonical-rules.csv`):

    * `pointwise` / `patch` on a convolution whose windows do not overlap (kernel 1 and stride 1
      in every dimension / kernel no larger than stride: patches, or a strided 1x1), with no
      padding, no dilation and groups 1: a Linear at every position / of every patch; `patch` on
      `F.unfold` / `Tensor.unfold` into non-overlapping windows.
    * `causal` on the node an attention's causal mask is applied by (`scores + mask`,
      `masked_fill`, `where`), and on the output of `scaled_dot_product_attention(is_causal=True)`
      or of one given a causal mask. A constant tensor is causal when it comes from `tril`/`triu`,
      from comparing two position indices (`arange(n)[:, None] >= arange(n)`, how transformers
      builds masks), from a model buffer that is triangular (off the meta device: nanoGPT's
      `register_buffer("bias", torch.ones(n, n).tril())`), or from any of those by constant ops
      (slicing, casting, `where`, `& padding`).

    A `TorchFunctionMode` (public API, like `InPlaceOnViews`): it sees the calls the model's own
    code makes, reads the call's arguments and its output's `grad_fn`, and marks constant tensors
    by identity (`torch.utils.weak.WeakIdKeyDictionary`). A mask built inside another torch
    function, or held on the meta device, is not seen: the attention then stays `attention`.
    """

    def __init__(self, model: Any = None) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self.attrs: dict[Any, set[str]] = {}
        self.flags: Any = WeakIdKeyDictionary()  # constant tensor -> {"index", "causal"}
        self.errors: list[str] = []  # calls whose attributes could not be read (the pass went on)
        #: square buffers on the meta device: a causal mask there has no values to read (`unread_masks`)
        self.unread = sum(1 for b in _buffers(model, meta=True) if _square(b))
        for b in _buffers(model):
            if _triangular(b):
                self.flags[b] = {"causal"}
        self._mode = _make_attribute_mode(self)

    def mark(self, t: Any, attr: str) -> None:
        fn = getattr(t, "grad_fn", None)
        if fn is not None:
            self.attrs.setdefault(fn, set()).add(attr)

    def __enter__(self) -> "DesignAttributes":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def _buffers(model: Any, *, meta: bool = False) -> list[Any]:
    """The model's buffers off the meta device (`meta`: those on it)."""
    try:
        return [b for b in model.buffers() if (b.device.type == "meta") == meta]
    except AttributeError:  # not an nn.Module
        return []


def _square(t: Any) -> bool:
    """Square in its last two dims (n > 1): what a causal mask buffer is shaped like."""
    return t.dim() >= 2 and t.shape[-1] == t.shape[-2] >= 2


def _triangular(t: Any) -> bool:
    """A square (in its last two dims, n > 1) tensor with one value on and below the diagonal and
    another above it: a causal mask, whichever way it is spelled (bool, 0/1, 0/-inf, triu)."""
    import torch

    if t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2 or t.numel() > 1 << 22:
        return False
    n = t.shape[-1]
    lower = torch.ones(n, n, dtype=torch.bool, device=t.device).tril()
    with torch.no_grad():
        low, up = t[..., lower], t[..., ~lower]
        return bool((low == low.flatten()[0]).all() and (up == up.flatten()[0]).all()
                    and low.flatten()[0] != up.flatten()[0])


def _make_attribute_mode(recorder: DesignAttributes) -> Any:
    from torch.overrides import TorchFunctionMode

    class _Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            try:
                _observe(recorder, func, args, kwargs, out)
            except Exception as e:  # noqa: BLE001 - an attribute missed, never a pass failed
                recorder.errors.append(f"{getattr(func, '__name__', func)}: {type(e).__name__}: {e}")
            return out

    return _Mode()


def _tensors(args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    import torch

    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(x for x in a if isinstance(x, torch.Tensor))
    return out


def _observe(rec: DesignAttributes, func: Any, args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> None:
    import torch

    if isinstance(out, torch.Tensor):
        outs = [out]
    elif isinstance(out, (tuple, list)):
        outs = [o for o in out if isinstance(o, torch.Tensor)]
    else:
        return
    if not outs:
        return
    name = getattr(func, "__name__", "")
    ins = _tensors(args, kwargs)
    flags: set[str] = set()
    for t in ins:
        f = rec.flags.get(t)
        if f:
            flags |= f
    if name == "arange":
        flags = {"index"}
    elif name in _TRIANGLE:
        flags = flags | {"causal"}
    elif name in _COMPARE and len(ins) == 2 and all("index" in rec.flags.get(t, ()) for t in ins):
        flags = flags | {"causal"}  # position q compared with position k
    window = _window_attr(func, args, kwargs) if name in _WINDOWED else None
    causal = "causal" in flags
    if name == "scaled_dot_product_attention":
        causal = causal or bool(kwargs.get("is_causal", args[5] if len(args) > 5 else False))
    for o in outs:
        if o.grad_fn is not None:
            if window:
                rec.mark(o, window)
            if causal:
                rec.mark(o, "causal")
        elif flags:
            rec.flags[o] = flags


#: Functions that make a triangle of a tensor, and comparisons (eq is a diagonal, not causal).
_TRIANGLE = frozenset({"tril", "triu", "tril_", "triu_"})
_WINDOWED = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                       "conv_transpose3d", "unfold"})

#: Convolution functions and where their stride/padding/dilation/groups arguments sit.
_CONV = {"conv1d": 1, "conv2d": 2, "conv3d": 3}
_CONV_T = {"conv_transpose1d": 1, "conv_transpose2d": 2, "conv_transpose3d": 3}
_COMPARE = frozenset({"le", "lt", "ge", "gt", "__le__", "__lt__", "__ge__", "__gt__"})


def _tuple(v: Any, d: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * d


def _window_attr(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """`pointwise` / `patch` for a convolution or unfold over non-overlapping windows, else None."""
    name = getattr(func, "__name__", "")
    def arg(i: int, key: str, default: Any) -> Any:
        return args[i] if len(args) > i else kwargs.get(key, default)

    if name in _CONV or name in _CONV_T:
        d = _CONV.get(name) or _CONV_T[name]
        weight = arg(1, "weight", None)
        if weight is None or weight.dim() != d + 2:
            return None
        kernel = tuple(weight.shape[2:])
        stride = _tuple(arg(3, "stride", 1), d)
        padding = arg(4, "padding", 0)
        if name in _CONV:
            dilation, groups, extra = _tuple(arg(5, "dilation", 1), d), arg(6, "groups", 1), (0,)
        else:
            extra = _tuple(arg(5, "output_padding", 0), d)
            groups, dilation = arg(6, "groups", 1), _tuple(arg(7, "dilation", 1), d)
        if isinstance(padding, str):
            padding = (0,) * d if padding == "valid" or all(k == 1 for k in kernel) else (1,)
        if groups != 1 or any(_tuple(padding, d)) or any(extra):
            return None
        if any(k > 1 and dl != 1 for k, dl in zip(kernel, dilation)):
            return None
        if all(k == 1 and s == 1 for k, s in zip(kernel, stride)):
            return "pointwise"
        return "patch" if all(k <= s for k, s in zip(kernel, stride)) else None
    if name == "unfold":
        import torch

        if func is torch.Tensor.unfold:  # Tensor.unfold(dimension, size, step): sliding windows
            size, step = arg(2, "size", None), arg(3, "step", None)
            return "patch" if size is not None and step is not None and size <= step else None
        kernel = arg(1, "kernel_size", None)  # F.unfold(input, kernel_size, dilation, padding, stride)
        if kernel is None:
            return None
        dilation, padding, stride = arg(2, "dilation", 1), arg(3, "padding", 0), arg(4, "stride", 1)
        if any(_tuple(padding, 2)) or any(x != 1 for x in _tuple(dilation, 2)):
            return None
        return "patch" if all(k <= s for k, s in zip(_tuple(kernel, 2), _tuple(stride, 2))) else None
    return None


@contextlib.contextmanager
def deterministic_kernels() -> Iterator[None]:
    """Force the math scaled-dot-product-attention kernel (decomposed matmul/softmax nodes)."""
    import torch

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # older torch
        with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
            yield
        return
    with sdpa_kernel([SDPBackend.MATH]):
        yield


def prepare_model(model: Any) -> Any:
    """Eval mode, and every floating point parameter requires grad (frozen layers still show)."""
    model.eval()
    for p in model.parameters():
        if p.is_floating_point() and not p.requires_grad:
            p.requires_grad_(True)
    return model


def extract_graph(
    model: Any,
    example_inputs: Any = (),
    example_kwargs: dict[str, Any] | None = None,
    *,
    prepare: bool = True,
    shape_cache: bool = True,
    attributes: bool | None = None,
) -> RawGraph:
    """Run `model(*example_inputs, **example_kwargs)` once and return its normalised graph.

    `example_inputs` may be a single tensor or a tuple/list of positional arguments. Works on any
    device where autograd records (CPU, meta, CUDA): put the model and inputs there yourself.
    For a transformers model, build it with `attn_implementation="eager"` (see
    `narbench.zoo.sources`) so the graph does not depend on the attention backend.
    `shape_cache`: on the meta device, reuse the output shapes of repeated operator calls
    (`narbench.zoo.metacache`; the same graph, 2-6x faster on models of repeated blocks).
    `attributes`: record design attributes after the op names (`DesignAttributes`), which
    canonical version 2.2 reads; off, the graph is the one `real` 2.1 was built from. None: on
    within `recording_attributes(on)`, `on`; else on when the environment sets
    `NARBENCH_DESIGN_ATTRIBUTES=1` (how a build's worker processes and the zoo sources, which call
    this function themselves, are switched).
    """
    import torch

    if prepare:
        prepare_model(model)
    args = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    kwargs = example_kwargs or {}
    cache = contextlib.nullcontext()
    if shape_cache and _on_meta(model, args, kwargs):
        from narbench.zoo.metacache import MetaShapeCache

        cache = MetaShapeCache()
    if attributes is None:
        attributes = _ATTRIBUTES.get()
    if attributes is None:
        attributes = os.environ.get(ATTRIBUTES_ENV, "") == "1"
    design = DesignAttributes(model) if attributes else None
    with _gc_paused():
        with (torch.enable_grad(), deterministic_kernels(), cache, InPlaceOnViews() as inplace,
              design if design is not None else contextlib.nullcontext()):
            out = model(*args, **kwargs)
        graph = autograd_graph(out, inplace.ops, design.attrs if design is not None else None)
        del out, inplace  # the autograd graph is freed before the collector runs again
    if design is not None and design.errors:
        graph.meta["attribute_errors"] = design.errors[:10]
    if design is not None and design.unread:
        graph.meta["unread_masks"] = design.unread  # off the meta device the pass could read them
    return graph


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for one pass, then back as it was.

    A pass makes and frees hundreds of thousands of small objects (autograd nodes, saved tensors,
    the walk's lists); with the collector on, they trigger full collections that traverse the
    whole heap, ~0.2 s each in a process holding the search index, every ten searches or so.
    They are freed by reference counting when the pass ends; what is cyclic is collected later."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _on_meta(model: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether the forward pass runs on the meta device (an input or the first parameter is there)."""
    import torch

    for t in iter_tensors((list(args), kwargs)):
        return t.device.type == "meta"
    if isinstance(model, torch.nn.Module):
        p = next(model.parameters(), None)
        return p is not None and p.device.type == "meta"
    return False


def model_to_arch_graph(
    model: Any,
    example_inputs: Any,
    vocab: Sequence[str] | dict[str, int],
    *,
    name: str,
    family: str = "",
    coarse: str | None = None,
    source: str = "",
    meta: dict[str, Any] | None = None,
    example_kwargs: dict[str, Any] | None = None,
    unknown: str = "error",
) -> ArchGraph:
    """`extract_graph` then `RawGraph.to_arch_graph`: a user's model as a dataset-compatible graph."""
    raw = extract_graph(model, example_inputs, example_kwargs)
    return raw.to_arch_graph(vocab, name=name, family=family, coarse=coarse, source=source,
                             meta=meta, unknown=unknown)


# ----------------------------------------------------------------------------- coarse label

#: Softmax nodes (names differ between torch versions and kernels).
SOFTMAX_OPS = frozenset({"SoftmaxBackward0", "SafeSoftmaxBackward0", "LogSoftmaxBackward0"})
#: Batched matrix products (what `q @ k^T` and `attn @ v` become).
BMM_OPS = frozenset({"BmmBackward0", "BaddbmmBackward0"})
CONV_OPS = frozenset({"ConvolutionBackward0", "ConvolutionBackward1", "MkldnnConvolutionBackward0",
                      "ConvolutionBackwardOverrideable", "SlowConv2DBackward0", "ThnnConv2DBackward0",
                      "ConvDepthwise2DBackward0", "SlowConvDilated2DBackward0", "SlowConv3DBackward0"})
DENSE_OPS = frozenset({"AddmmBackward0", "MmBackward0", "LinearBackward0", "MvBackward0"})
#: How many hops a softmax may sit from the batched matmuls around it (Gemma-2 soft-capping
#: puts 7 ops between q k^T and the softmax).
ATTENTION_HOPS = 8


def attention_patterns(ops: Sequence[str], edges: np.ndarray, hops: int = ATTENTION_HOPS) -> int:
    """Softmax nodes with a batched matmul among their ancestors and among their descendants,
    each within `hops` edges: the `softmax(q k^T) v` pattern of (self- or cross-) attention."""
    n = len(ops)
    soft = [i for i, op in enumerate(ops) if op in SOFTMAX_OPS]
    if not soft:
        return 0
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges.T.tolist():
        succ[s].append(d)
        pred[d].append(s)

    def near_bmm(start: int, adj: list[list[int]]) -> bool:
        frontier, seen = [start], {start}
        for _ in range(hops):
            nxt = []
            for u in frontier:
                for v in adj[u]:
                    if v not in seen:
                        if ops[v] in BMM_OPS:
                            return True
                        seen.add(v)
                        nxt.append(v)
            frontier = nxt
        return False

    return sum(1 for i in soft if near_bmm(i, pred) and near_bmm(i, succ))


def coarse_label(ops: Sequence[str], edges: np.ndarray) -> str:
    """The coarse label of a graph, derived from its ops alone (never from its name).

    Canonical graphs (`narbench.data.canonical`): ``attention`` if an `attention` node is left,
    else the ``cnn`` rule below with `conv` and `linear` nodes. Raw autograd graphs:

    * ``attention``: at least one attention pattern (`attention_patterns`: a softmax fed by a
      batched matmul and feeding one). Hybrids (CoAtNet, MobileViT, DETR) are attention.
    * ``cnn``: otherwise, when there are at least 2 convolutions and they are at least a fifth of
      the weighted layers (convolution + dense matmul nodes): ResNets, and ConvNeXts whose blocks
      are one depthwise convolution and two pointwise Linear layers; not an MLP-Mixer or a ViT
      with a single convolutional stem.
    * ``other``: everything else (MLPs, MLP-Mixers, RNNs, state-space models, ...).
    """
    if any("#" in o for o in ops):  # design attributes (canonical 2.2) do not change the label
        ops = [o.split("#", 1)[0] for o in ops]
    counts = Counter(ops)
    if "conv" in counts or "linear" in counts or "attention" in counts or "causal_attention" in counts:
        if counts["attention"] or counts["causal_attention"]:
            return "attention"
        conv, dense = counts["conv"], counts["linear"]
        return "cnn" if conv >= 2 and 5 * conv >= conv + dense else "other"
    if attention_patterns(ops, edges) > 0:
        return "attention"
    conv = sum(counts[o] for o in CONV_OPS)
    dense = sum(counts[o] for o in DENSE_OPS)
    if conv >= 2 and 5 * conv >= conv + dense:
        return "cnn"
    return "other"


def summarize_ops(graphs: Iterable[RawGraph]) -> Counter:
    """How many graphs use each op type."""
    c: Counter = Counter()
    for g in graphs:
        c.update(set(g.ops))
    return c
