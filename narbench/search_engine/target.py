"""What `narbench search TARGET` can point at (`resolve`), and the graph each kind becomes (`query_of`).

A target is a `torch.nn.Module` instance (API only) or a string:

* `path/to/file.py:ClassName` or `package.module:ClassName`: built with no arguments (or the
  `kwargs` given) and run on the meta device, so a large model costs no memory (the CPU if
  that fails); an instance runs on meta too, on meta copies of its weights (its own device if
  meta fails; `narbench.search_engine._target_run` says which device when, and why);
* `timm:NAME`, `torchvision:NAME`, `transformers:MODEL_TYPE[/HEAD]`: a zoo model, built and run
  exactly as the `real` build runs it (`narbench.zoo.specgraph.extract_spec`);
* a graph file that narbench wrote (`narbench.data.store`; `FILE:NAME` picks one of several);
* the name of a graph in the index (`timm/resnet50/classification`).

A model runs on the example input `narbench.search_engine._target_inputs.example_inputs` chooses (of the
shape, or shapes, the caller gives), or on the example inputs the caller gives (`inputs`: a
tensor, a tuple of positional inputs, a dict of keyword inputs or an `(args, kwargs)` pair; the
CLI's `--inputs FILE.py:FUNC`, or `inputs="FILE.py:FUNC"`, is `narbench.search_engine._target_model.
load_inputs`, called where the model runs). Every failure is a `TargetError` whose one-line message
names the problem and the fix.

`resolve` says what a target is and reads or runs nothing; `query_of` makes its graph over the index's
vocabulary in this process (the model built, traced and mapped); `narbench.search` runs a target that
is code (`Target.runs_code`) in a child process under a memory cap and a time limit
(`narbench.search_engine._target_child`). `resolve_target` is the two in this process.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from narbench.data.canonical import VERSIONS, at_least
from narbench.data.graph import ArchGraph
from narbench.data.mapping import onto_vocabulary
from narbench.search_engine._target_inputs import TargetError, normalise_inputs
from narbench.search_engine._target_model import model_graph
from narbench.search_engine._target_run import time_limit, warm_up
from narbench.search_engine.target_check import Served, TargetRefused, check_code_target
from narbench.search_engine.target_text import NAME, ZOOS, code_target, kind_of, parse_colon
from narbench.zoo.attributes import recording_attributes
from narbench.zoo.functions import tracing_functions

#: The kinds of target whose graph comes from running code (a model instance is the caller's own).
CODE = ("file", "import", "zoo", "code")


@dataclass
class Query:
    """A resolved target: its graph in the index's vocabulary (or its index row) and provenance."""

    label: str
    kind: str  # module, file, import, zoo, graph-file, index
    graph: ArchGraph | None = None
    row: int | None = None  # the target is this index row
    ops: dict[str, int] = field(default_factory=dict)  # op-type counts, by name
    unknown_ops: dict[str, int] = field(default_factory=dict)  # ops not in the index's vocabulary
    coarse: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # input, device, extraction seconds


@dataclass(frozen=True)
class Target:
    """What a TARGET is (`resolve`); nothing read or run yet.

    `kind`: module (an instance: `source`), file (`source` the path, `name` the class or function), import
    (`source` the module name), zoo (`source` the zoo, `name` its model), graph-file (`source` the path,
    `name` the graph or None), index (`row`), or code: a client's code target (`Served`), resolved in the
    child after its check. `guarded`: a client's path, every failure of which is `TargetRefused`."""

    label: str
    kind: str
    source: Any = None
    name: str | None = None
    row: int | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    shape: Any = None  # one shape, or a list of shapes (one per positional input)
    feed: Any = None  # the example inputs (args, kwargs), or "FILE.py:FUNC" naming a function returning them
    guarded: bool = False

    @property
    def runs_code(self) -> bool:
        return self.kind in CODE


def resolve(target: Any, index, *, kwargs: dict[str, Any] | None = None, input_shape=None, inputs: Any = None,
            served: Served | None = None) -> Target:
    """What `target` is over `index` (module docstring), decided from its type, its text, the files it names
    and the index's names; nothing is imported, built or read. `served`: a client's target, read by its kind
    only (`Served`; `TargetRefused` when that kind is not allowed). Options: see `resolve_target`."""
    shapes = _shapes(input_shape)
    if shapes is not None and inputs is not None:
        raise TargetError("give the example input's shape (--input-shape) or the inputs themselves (--inputs), "
                          "not both")
    if served is not None:
        return _served(str(target), index, served)
    feed = inputs if inputs is None or isinstance(inputs, str) else normalise_inputs(inputs)
    shape = shapes[0] if shapes and len(shapes) == 1 else shapes
    given = "--input-shape" if shapes else "--inputs" if feed else None
    runs = {"kwargs": kwargs or {}, "shape": shape, "feed": feed}
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(target, torch.nn.Module):
        return Target(type(target).__name__, "module", source=target, **runs)
    if isinstance(target, ArchGraph):
        raise TargetError("an ArchGraph's op ids need their vocabulary; save it with narbench.data.store.write_graphs "
                          "and search the file")
    if not isinstance(target, (str, Path)):
        raise TargetError(f"cannot search a {type(target).__name__}; give an nn.Module, a FILE.py:CLASS, "
                          "a MODULE:CLASS, a zoo name (timm:NAME), a graph file or a graph name")
    target = str(target)
    colon = parse_colon(target)
    if colon and colon[0] in ZOOS:
        if feed is not None or (shapes and len(shapes) > 1):
            raise TargetError("a zoo model runs on the real build's input; give one --input-shape to change its "
                              "shape, or search the model class with MODULE:CLASS and --inputs")
        return Target(target, "zoo", source=colon[0], name=colon[1], shape=shape)
    if colon and colon[0].endswith(".py"):
        path = Path(colon[0])
        if not path.is_file():
            raise TargetError(f"file not found: {path}; check the path (TARGET is FILE.py:CLASS)")
        return Target(target, "file", source=path, name=colon[1], **runs)
    if target.endswith(".py"):
        raise TargetError(f"name the model class too: {target}:ClassName")
    path, name = (Path(colon[0]), colon[1]) if colon and Path(colon[0]).is_file() else (Path(target), None)
    if given and (path.is_file() or index.row_of(target) is not None):
        raise TargetError(f"{target} is a graph: it needs no example input; drop {given}")
    if path.is_file():
        return Target(target, "graph-file", source=path, name=name)
    row = index.row_of(target)
    if row is not None:
        return Target(target, "index", row=row)
    if colon and NAME.fullmatch(colon[0]) and NAME.fullmatch(colon[1]):
        return Target(target, "import", source=colon[0], name=colon[1], **runs)
    if "/" in target or target.endswith(".narg"):
        near = close_names(target, index)
        hint = f" (close graph names: {', '.join(near)})" if near else ""
        raise TargetError(f"{target!r} is neither a file nor a graph name in the index{hint}; check the path or name")
    raise TargetError(f"cannot read TARGET {target!r}: give FILE.py:CLASS, MODULE:CLASS, timm:NAME, torchvision:NAME, "
                      "transformers:TYPE, a graph file or a graph name from the index")


def _served(target: str, index, served: Served) -> Target:
    """A client's target, by its kind (`Served`): an index name from the index alone, code deferred to the
    child, a path only when it is a regular file of at most `served.max_file` bytes."""
    import stat

    kind = kind_of(target, index)
    if kind == "index":
        return Target(target, "index", row=index.row_of(target))
    if not (served.code if kind == "code" else served.paths):
        raise TargetRefused(target, kind)
    if kind == "code":
        return Target(target, "code")
    colon = parse_colon(target)
    for path in [target] + ([colon[0]] if colon else []):
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size <= served.max_file:
            break
        raise TargetRefused(target, kind, unreadable=True)
    else:
        raise TargetRefused(target, kind, unreadable=True)
    try:
        return replace(resolve(target, index), guarded=True)
    except (TargetError, OSError, ValueError):
        raise TargetRefused(target, kind, unreadable=True) from None


def close_names(target: str, index) -> list[str]:
    """Up to three graph names of `index` close to `target` (a misspelt name)."""
    import difflib

    return difflib.get_close_matches(target, index.names, n=3, cutoff=0.8)


def query_of(target: Target, index, timeout: float | None = None) -> Query:
    """The graph of `target` over `index`'s vocabulary, in this process: a model built, traced and mapped
    (`timeout`: seconds for importing, building and running it, torch's first imports not counted;
    `narbench.search_engine._target_run.time_limit`), a graph file read and mapped, an index row looked up.
    A client's code target (kind code) is first checked (`check_code_target`) and resolved here."""
    from narbench.data.store import CorruptFileError

    t0 = time.perf_counter()
    try:
        with (recording_attributes(_reads_attributes(index)),  # canonical 2.2 reads a model's design attributes
              tracing_functions(_reads_attributes(index, "2.3"))):  # 2.3 traces through custom functions
            query = _graph(target, index, timeout)
    except (TargetError, CorruptFileError, OSError, ValueError):
        if target.guarded:  # a client's path: one line that says nothing of the file
            raise TargetRefused(target.label, "path", unreadable=True) from None
        raise
    query.info["seconds"] = time.perf_counter() - t0
    return query


def _graph(target: Target, index, timeout: float | None) -> Query:
    """`query_of`'s steps, in order: build and trace a model (or read a graph file), then map its ops onto the
    index's vocabulary (`narbench.data.mapping`)."""
    from narbench.data.canonical import rules_of
    from narbench.data.store import CorruptFileError, read_graphs

    if target.kind == "code":
        if code_target(target.label) is not None:
            check_code_target(target.label)
        target = resolve(target.label, index)
    if target.kind == "index":
        row = target.row
        return Query(target.label, "index", row=row, ops=index.op_counts(row), coarse=index.record(row)["coarse"])
    label, coarse, info = target.label, None, {}
    if target.kind != "graph-file":
        with _running(label, timeout):
            raw, info = model_graph(target)
        ops, edges = raw.ops, raw.edges
        if raw.meta.get("opaque_functions"):  # custom autograd functions kept as one node each (canonical 2.3)
            info["opaque_functions"] = list(raw.meta["opaque_functions"])
    else:
        path, name = target.source, target.name
        try:
            graphs, vocab, _, _ = read_graphs(path)
        except CorruptFileError as exc:
            raise TargetError(f"{exc}; give a graph file written by narbench "
                              "(narbench.data.store.write_graphs)") from exc
        if name is not None:
            graphs = [g for g in graphs if g.name == name]
            if not graphs:
                raise TargetError(f"{path} has no graph named {name!r}; check the name")
        elif len(graphs) != 1:
            raise TargetError(f"{path} holds {len(graphs)} graphs; pick one with {path}:NAME "
                              f"(e.g. {path}:{graphs[0].name})" if graphs else f"{path} holds no graph")
        g = graphs[0]
        label, coarse, info = g.name, g.coarse or None, {"file": str(path)}
        ops, edges = [vocab[i] for i in g.ops.tolist()], g.edges
        saved = rules_of(vocab)
        if saved and index.canonical_version and list(vocab) != list(index.vocab):
            info["saved_rules"] = saved  # engine.rules_warning says what that means (one vocabulary: read exactly)
    m = onto_vocabulary(ops, edges, index.vocab, index.canonical_version, coarse)
    graph = ArchGraph(ops=m.ops, edges=m.edges, name=label, family="", coarse=m.coarse, source="query")
    return Query(label, target.kind, graph=graph, ops=m.counts, unknown_ops=m.unknown, coarse=m.coarse, info=info)


def resolve_target(target: Any, index, *, kwargs: dict[str, Any] | None = None, input_shape=None,
                   inputs: Any = None, timeout: float | None = None) -> Query:
    """Turn `target` into a `Query` over `index`'s vocabulary in this process (module docstring):
    `resolve`, then `query_of`.

    `input_shape`: one shape (`(1, 3, 32, 32)`) or a list of shapes, one per positional input;
    `inputs`: the example inputs themselves (`normalise_inputs`), or `"FILE.py:FUNC"` /
    `"MODULE:FUNC"` naming a function that returns them (`load_inputs`, called with the model's
    time limit); at most one of the two.
    `timeout`: seconds that importing, building and running a model may take (torch's own first
    imports not counted; `narbench.search_engine._target_run.time_limit`), None for no limit."""
    t0 = time.perf_counter()
    query = query_of(resolve(target, index, kwargs=kwargs, input_shape=input_shape, inputs=inputs), index, timeout)
    query.info["seconds"] = time.perf_counter() - t0
    return query


def _shapes(input_shape) -> list[tuple[int, ...]] | None:
    """One shape (a tuple of ints) or several (a sequence of them) as a list of shapes."""
    if input_shape is None or len(input_shape) == 0:
        return None
    shapes = [input_shape] if isinstance(input_shape[0], (int, np.integer)) else list(input_shape)
    return [tuple(int(d) for d in sh) for sh in shapes]


def _reads_attributes(index, since: str = "2.2") -> bool:
    """Whether the index's canonical rules are `since` or later: design attributes from 2.2 on (a model is then
    extracted with them), custom functions traced through from 2.3 on (`narbench.zoo.functions`)."""
    version = getattr(index, "canonical_version", None)
    return version in VERSIONS and at_least(version, since)


@contextlib.contextmanager
def _running(label: str, timeout: float | None):
    """Where user code runs: torch's first imports done, then under the time limit."""
    warm_up()
    with time_limit(timeout, label):
        yield
