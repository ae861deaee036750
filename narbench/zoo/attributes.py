"""Design attributes (`DesignAttributes`): what a forward pass's autograd nodes do that their op names
do not say (a pointwise or patch convolution, a causal mask, a convolution's groups and dimensions), recorded when `narbench.zoo.extract.
extract_graph` is asked to (`recording_attributes`, `NARBENCH_DESIGN_ATTRIBUTES=1`) and written after
the node's name, `ConvolutionBackward0#pointwise`, for canonical version 2.2 to read.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from narbench.core.switch import Switch

#: Set to 1, `extract_graph` records design attributes by default (`DesignAttributes`).
ATTRIBUTES_ENV = "NARBENCH_DESIGN_ATTRIBUTES"
_SWITCH = Switch("narbench_design_attributes", ATTRIBUTES_ENV)


def recording_attributes(on: bool = True):
    """Within it, `extract_graph` (and the zoo sources that call it) records design attributes or
    not, whatever the environment says: how search extracts a query for an index of canonical 2.2
    graphs without changing the process's environment."""
    return _SWITCH.on(on)


def wants_attributes(asked: bool | None) -> bool:
    """`asked`, else what `recording_attributes` set, else the environment (`ATTRIBUTES_ENV`)."""
    return _SWITCH.wanted(asked)


class DesignAttributes:
    """Design attributes of a forward pass's autograd nodes that their op names do not carry,
    read by canonical version 2.2 (`narbench/data/canonical-rules.csv`):

    * `pointwise` / `patch` on a convolution whose windows do not overlap (kernel 1 and stride 1
      in every dimension / kernel no larger than stride: patches, or a strided 1x1), with no
      padding, no dilation and groups 1: a Linear at every position / of every patch; `patch` on
      `F.unfold` / `Tensor.unfold` into non-overlapping windows.
    * `depthwise` / `grouped` on a convolution with groups > 1 (one input channel per group / more),
      and `1d` / `3d` on a 1-D / 3-D one (a 2-D one carries no mark, so its name is what 2.2 recorded):
      ResNeXt is a grouped ResNet and a video network a 3-D image one, which op names do not say
      (since canonical 2.3; 2.1 and 2.2 ignore these marks).
    * `causal` on the node an attention's causal mask is applied by (`scores + mask`,
      `masked_fill`, `where`), and on the output of `scaled_dot_product_attention(is_causal=True)`
      or of one given a causal mask. A constant tensor is causal when it comes from `tril`/`triu`,
      from comparing two position indices (`arange(n)[:, None] >= arange(n)`, how transformers
      builds masks), from a model buffer that is triangular (off the meta device: nanoGPT's
      `register_buffer("bias", torch.ones(n, n).tril())`), or from any of those by constant ops
      (slicing, casting, `where`, `& padding`); and a constant square tensor given as the mask of a call that
      applies one (sdpa's `attn_mask`, `masked_fill`, `where`, a sum) is causal when its values are a triangle,
      however it was computed (moshi compares position differences with 0). A tensor made new from another's
      kind (`x.new(lengths)`, `zeros_like`) carries none of its flags: funasr compares positions with lengths so.

    * `causal_core` on the softmax of a call to torch's own multi-head attention
      (`F.multi_head_attention_forward`: `nn.MultiheadAttention`, `nn.Transformer` and its encoder and
      decoder layers) given a causal mask (`attn_mask` causal as above, or `is_causal=True`). The mode
      sees that call but not the calls inside it (a mode is off within its own handler), so where the
      mask is applied is never seen; the call's own nodes (`_call_nodes`) are searched for its
      softmax instead. Canonical 2.11 reads the mark (earlier versions ignore it).

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
            self.mark_node(fn, attr)

    def mark_node(self, fn: Any, attr: str) -> None:
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
    if name == "multi_head_attention_forward":
        if _torch_attention_causal(rec, kwargs):
            for node in _call_nodes(outs, ins):
                if node.name() in _softmax_names():
                    rec.mark_node(node, "causal_core")
        return
    flags: set[str] = set()
    for t in ins:
        f = rec.flags.get(t)
        if f:
            flags |= f
    if name == "arange":
        flags = {"index"}
    elif name in _FRESH:
        flags = set()  # new data of a tensor's kind: funasr's `seq_range.new(lengths)` is no position index
    elif name in _TRIANGLE:
        flags = flags | {"causal"}
    elif name in _COMPARE and len(ins) == 2 and all("index" in rec.flags.get(t, ()) for t in ins):
        flags = flags | {"causal"}  # position q compared with position k
    if name in _APPLY and "causal" not in flags and any(_mask_by_value(rec, t) for t in _masks(name, args, kwargs)):
        flags = flags | {"causal"}  # a triangle however computed (moshi's `(pos_k >= 0) & (pos_q - pos_k >= 0)`)
    window = _window_attr(func, args, kwargs) if name in _WINDOWED else None
    shape = _conv_shape(func, args, kwargs) if name in _CONV or name in _CONV_T else ()
    causal = "causal" in flags
    if name == "scaled_dot_product_attention":
        causal = causal or bool(kwargs.get("is_causal", args[5] if len(args) > 5 else False))
    for o in outs:
        if o.grad_fn is not None:
            if window:
                rec.mark(o, window)
            for a in shape:
                rec.mark(o, a)
            if causal:
                rec.mark(o, "causal")
        elif flags:
            rec.flags[o] = flags


#: At most this many nodes are searched for a call's softmax (a layer of torch's attention makes about 20).
_CALL_NODES = 512


@lru_cache(maxsize=1)
def _softmax_names() -> frozenset[str]:
    """The autograd nodes the op table (`narbench/data/ops.csv`) reads as `softmax` (`SafeSoftmaxBackward0` is how
    the math path of `scaled_dot_product_attention` writes it)."""
    from narbench.data.ops import load_table

    return frozenset(raw for raw, rule in load_table().items() if rule.op == "softmax")


def _torch_attention_causal(rec: DesignAttributes, kwargs: dict[str, Any]) -> bool:
    """Whether a call to `F.multi_head_attention_forward` (which torch makes with every argument after the first 13
    by keyword) masks causally: `is_causal=True`, or an `attn_mask` flagged causal or whose values are a triangle."""
    import torch

    if kwargs.get("is_causal"):
        return True
    mask = kwargs.get("attn_mask")
    if not isinstance(mask, torch.Tensor):
        return False
    return "causal" in rec.flags.get(mask, ()) or _mask_by_value(rec, mask)


def _call_nodes(outs: Sequence[Any], ins: Sequence[Any]) -> list[Any]:
    """The autograd nodes a call made: those reached back from its outputs before the nodes of its tensor
    arguments (a parameter's `AccumulateGrad` ends a path), at most `_CALL_NODES`."""
    stop = {id(t.grad_fn) for t in ins if t.grad_fn is not None}
    todo = [o.grad_fn for o in outs if o.grad_fn is not None]
    seen: dict[int, Any] = {}
    while todo and len(seen) < _CALL_NODES:
        fn = todo.pop()
        if fn is None or id(fn) in stop or id(fn) in seen or not hasattr(fn, "next_functions"):
            continue
        seen[id(fn)] = fn
        todo.extend(nxt for nxt, _ in fn.next_functions)
    return list(seen.values())


#: Functions that make new data of a tensor's dtype and device, not of its values: they carry none of its flags.
_FRESH = frozenset({"new", "new_tensor", "new_empty", "new_zeros", "new_ones", "new_full", "zeros_like",
                    "ones_like", "empty_like", "full_like", "rand_like", "randn_like"})

#: Functions that apply a mask to attention scores, and which of their arguments is the mask (`_masks`).
_APPLY = frozenset({"scaled_dot_product_attention", "masked_fill", "masked_fill_", "where", "add", "__add__",
                    "__radd__", "add_", "__iadd__"})


def _masks(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The tensors a mask-applying call (`_APPLY`) could take its mask from: sdpa's `attn_mask`, `masked_fill`'s
    mask, `where`'s condition, either operand of a sum."""
    import torch

    if name == "scaled_dot_product_attention":
        found = [args[3] if len(args) > 3 else kwargs.get("attn_mask")]
    elif name.startswith("masked_fill"):
        found = [args[1] if len(args) > 1 else kwargs.get("mask")]
    elif name == "where":
        found = [args[0] if args else kwargs.get("condition")]
    else:
        found = [*args[:2], kwargs.get("other")]
    return [t for t in found if isinstance(t, torch.Tensor)]


def _mask_by_value(rec: DesignAttributes, t: Any) -> bool:
    """Whether `t` is a constant (no gradient) square tensor whose values are a triangle (`_triangular`): a causal
    mask computed in a way the flags do not follow. One on the meta device has no values: it is counted with the
    unread masks (`DesignAttributes.unread`), so extraction runs the model again where it has them."""
    if t.grad_fn is not None or t.requires_grad or not _square(t):
        return False
    if t.device.type == "meta":
        rec.unread += 1
        return False
    return _triangular(t)


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


def _conv_shape(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, ...]:
    """A convolution's groups (`depthwise`: one input channel per group, `grouped`: several, dense: no
    mark) and dimensions (`1d`, `3d`; 2-D: no mark), read from its call as every implementation makes it."""
    name = getattr(func, "__name__", "")
    d = _CONV.get(name) or _CONV_T[name]
    weight = args[1] if len(args) > 1 else kwargs.get("weight")
    groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
    marks = {1: ("1d",), 3: ("3d",)}.get(d, ())
    if weight is None or not isinstance(groups, int) or groups <= 1:
        return marks
    # conv weight: [out, in / groups, *k]; transposed: [in, out / groups, *k]
    per_group = weight.shape[1] if name in _CONV else weight.shape[0] // groups
    return marks + ("depthwise" if per_group == 1 else "grouped",)


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
