"""Computational graph of one forward pass, read from the autograd graph.

`extract_graph(model, example_inputs)` runs one forward pass and returns a `RawGraph`: one
autograd node type name per node (`ConvolutionBackward0`, `AddmmBackward0`, ...) and a 2 x E
producer -> consumer edge index (the reverse of `next_functions`). The same function serves the
model zoos (the `real` dataset) and a user's own model (narbench search), so both go through the
same normalisation:

* `AccumulateGrad` (parameter leaves) and `TBackward0` (weight transposes) are dropped and
  spliced through: their producers are connected to their consumers.
* `ReshapeAliasBackward0` is renamed `ViewBackward0` (meta and CPU name the same view differently).
* An in-place op on a view is recorded as the op it is, not as autograd's `CopySlices` node
  (`narbench.zoo.inplace.InPlaceOnViews`, a `TorchFunctionMode` around the forward pass).
* Attention runs on the math SDPA kernel (`deterministic_kernels`) and transformers models should
  be built with eager attention, so the graph does not depend on which fused kernel a backend has.
* The model runs in eval mode (no dropout / drop-path nodes, no randomness) and every floating
  point parameter requires grad, so frozen layers still appear.
* Nodes are numbered in a deterministic topological order: the post-order of a depth-first walk
  from the outputs (in output order) through `next_functions` (in argument order); producers come
  before consumers. Edges are unique and sorted by (producer, consumer).

Design attributes (`narbench.zoo.attributes.DesignAttributes`) are written after the op names when
asked (`recording_attributes`); the coarse label is `narbench.data.coarse.coarse_label`. torch is
imported lazily, and no model-zoo package (timm, torchvision, transformers) is imported here at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from narbench.data.coarse import coarse_label
from narbench.data.graph import ArchGraph
from narbench.zoo.attributes import DesignAttributes, wants_attributes
from narbench.zoo.functions import ThroughFunctions, wants_functions
from narbench.zoo.inplace import COPY_SLICES, InPlaceOnViews, InPlaceOp

#: Autograd nodes removed (and spliced through) before numbering.
DROPPED_OPS = frozenset({"AccumulateGrad", "TBackward0"})
#: Autograd node names that differ between devices for the same operation.
RENAMED_OPS = {"ReshapeAliasBackward0": "ViewBackward0"}
class ExtractionError(RuntimeError):
    """The forward pass produced no autograd graph (no output depends on a parameter)."""


class GradientsNeededError(RuntimeError):
    """The forward fails with gradients on, runs with them off (`.numpy()` on an output, a weight changed in
    place): the graph is autograd's record of a pass with them on (`autograd_graph`). `cause`: its error."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"the forward pass fails with gradients on ({type(cause).__name__}: {cause}) "
                         "but runs with them off")
        self.cause = cause


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


def autograd_graph(outputs: Any, inplace_ops: dict[Any, InPlaceOp] | None = None,
                   attributes: dict[Any, set[str]] | None = None) -> RawGraph:
    """The normalised autograd graph behind `outputs` (see the module docstring).

    `inplace_ops`: `CopySlices` node -> the in-place op it records (`InPlaceOnViews.ops`): the op
    node (renamed as every node is), followed by a `CopySlices` node (inputs: the base and the op) when it wrote a part.
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
                ops.append(RENAMED_OPS.get(inplace.op, inplace.op))
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
    functions: bool | None = None,
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
    this function themselves, are switched). `functions`: trace through custom autograd functions
    (`narbench.zoo.functions`, canonical 2.3), switched alike (`tracing_functions`).
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
    design = DesignAttributes(model) if wants_attributes(attributes) else None
    through = ThroughFunctions() if wants_functions(functions) else contextlib.nullcontext()
    with _gc_paused():
        try:
            with (torch.enable_grad(), deterministic_kernels(), eager_execution(), cache, InPlaceOnViews() as inplace,
                  design if design is not None else contextlib.nullcontext(), through):
                out = model(*args, **kwargs)
        except Exception as exc:
            if _runs_without_grad(model, args, kwargs):
                raise GradientsNeededError(exc) from exc
            raise
        graph = autograd_graph(out, inplace.ops, design.attrs if design is not None else None)
        del out, inplace  # the autograd graph is freed before the collector runs again
    if design is not None and design.errors:
        graph.meta["attribute_errors"] = design.errors[:10]
    if isinstance(through, ThroughFunctions) and through.fallbacks:
        graph.meta["opaque_functions"] = through.fallbacks  # custom functions kept as one node
    if design is not None and design.unread:
        graph.meta["unread_masks"] = design.unread  # off the meta device the pass could read them
    return graph


@contextlib.contextmanager
def eager_execution() -> Iterator[None]:
    """Compiled and scripted functions run op by op for one pass: `torch.compile`d ones as plain torch
    (`torch.compiler.set_stance("force_eager")`, public since torch 2.6), `torch.jit.script`ed ones without the JIT's
    optimisations (`torch.jit.optimized_execution(False)`). Their ops are the design. Optimised, a scripted function
    becomes fused nodes (`CppFunction`, which no table maps) whose number depends on how often the process ran it
    before: the profiling executor rewrites a function after its first runs (wildval2's sockeye attention read 5 such
    nodes extracted first and 6 after more runs in the same process)."""
    import torch

    stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    with contextlib.ExitStack() as stack:
        if stance is not None:
            stack.enter_context(stance("force_eager"))
        stack.enter_context(torch.jit.optimized_execution(False))
        yield


def _runs_without_grad(model: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a forward that failed with gradients on runs with them off (one more pass, only on failure)."""
    import torch
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except (Exception, SystemExit):  # noqa: BLE001 - it fails either way: the forward's own error is reported
        return False
    return True


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


def summarize_ops(graphs: Iterable[RawGraph]) -> Counter:
    """How many graphs use each op type."""
    c: Counter = Counter()
    for g in graphs:
        c.update(set(g.ops))
    return c
