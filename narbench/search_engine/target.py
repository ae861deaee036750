"""What `narbench search TARGET` can point at, and how each kind becomes a graph.

A target is a `torch.nn.Module` instance (API only) or a string:

* `path/to/file.py:ClassName` or `package.module:ClassName`: built with no arguments (or the
  `kwargs` given) and run on the meta device, so a large model costs no memory (the CPU if
  that fails); an instance runs on meta too, on meta copies of its weights (its own device if
  meta fails; `narbench.search_engine._target_run` says which device when, and why);
* `timm:NAME`, `torchvision:NAME`, `transformers:MODEL_TYPE[/HEAD]`: a zoo model, built and run
  exactly as the `real` build runs it (`narbench.zoo.sources.extract_spec`);
* a graph file that narbench wrote (`narbench.data.store`; `FILE:NAME` picks one of several);
* the name of a graph in the index (`timm/resnet50/classification`).

A model runs on the example input `narbench.search_engine._target_inputs.example_inputs` chooses (of the
shape, or shapes, the caller gives), or on the example inputs the caller gives (`inputs`: a
tensor, a tuple of positional inputs, a dict of keyword inputs or an `(args, kwargs)` pair; the
CLI's `--inputs FILE.py:FUNC`, or `inputs="FILE.py:FUNC"`, is `load_inputs`, called where the model
runs). Every failure is a `TargetError` whose one-line message names the problem and the fix.

`resolve_target` runs the model in this process; `narbench.search` runs a target that is code
(`runs_code`) in a child process under a memory cap and a time limit
(`narbench.search_engine._target_child`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from narbench.search_engine._target_inputs import SEQ_LEN, TargetError, example_inputs, normalise_inputs  # noqa: F401 - re-exported
from narbench.search_engine._target_run import exited as _exited
from narbench.search_engine._target_run import extract as _extract
from narbench.search_engine._target_run import one_line as _one_line
from narbench.search_engine._target_run import stage as _stage
from narbench.search_engine._target_run import time_limit
from narbench.search_engine._target_run import warm_up as _warm_up
from narbench.data.graph import ArchGraph
from narbench.zoo.extract import recording_attributes

ZOOS = ("timm", "torchvision", "transformers")


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


# ---------------------------------------------------------------------- resolving a target


def _load_attr(label: str, module, attr: str, where: str):
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            import torch

            defined = sorted(k for k, v in vars(module).items() if isinstance(v, type)
                             and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__)
            hint = f" (it defines: {', '.join(defined)})" if defined else ""
            raise TargetError(f"{where} has no {attr!r}{hint}; name a class defined there")
        obj = getattr(obj, part)
    return obj


def _import_file(path: Path):
    name = "narbench_target_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))  # the file's own imports of its neighbours
    _stage(f"importing {path}")
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - report the user's error in one line
        sys.modules.pop(name, None)
        raise TargetError(f"importing {path} failed ({_one_line(exc)}); fix the file") from exc
    except SystemExit as exc:
        sys.modules.pop(name, None)
        raise _exited(f"importing {path}", exc) from None
    finally:
        sys.path.remove(str(path.parent))
    return module


def _parse_colon(target: str) -> tuple[str, str] | None:
    head, sep, tail = target.rpartition(":")
    return (head, tail) if sep and head and tail and "/" not in tail and "\\" not in tail else None


def _map_graph(query: Query, raw_ops: list[str], edges: np.ndarray, vocab: list[str], name: str,
               coarse: str | None = None, version: str | None = None) -> None:
    """Fill `query.graph` with the graph over `vocab`.

    Over a canonical vocabulary (`version`: the rules of the index's graphs, `SearchIndex.canonical_version`)
    a raw graph is canonicalised first by those rules (`narbench.data.canonical`): raw names the op table
    does not know become `other` and are listed in `query.unknown_ops`. Over any other vocabulary, ops it
    lacks are spliced out (and listed). `coarse`: the graph's coarse label if known (else derived from its
    ops, `coarse_label`)."""
    from collections import Counter

    from narbench.data.canonical import canonical_vocabulary, canonicalize
    from narbench.zoo.extract import coarse_label

    index = {op: i for i, op in enumerate(vocab)}
    unknown: dict[str, int] = {}
    if version is not None and list(vocab) == list(canonical_vocabulary(version)) and not set(raw_ops) <= set(index):
        c = canonicalize(raw_ops, edges, version)
        raw_ops, edges, unknown = c.ops, c.edges, c.unknown
    counts = Counter(raw_ops)
    query.ops = dict(counts)
    query.unknown_ops = unknown or {op: c for op, c in counts.items() if op not in index}
    query.coarse = coarse or coarse_label(raw_ops, edges)
    keep = np.array([op in index for op in raw_ops], dtype=bool)
    if not keep.all():
        edges = splice(edges, keep)
    renum = np.cumsum(keep) - 1
    ops = np.array([index[op] for op, k in zip(raw_ops, keep) if k], dtype=np.int64)
    edges = renum[edges] if edges.size else edges.reshape(2, 0)
    query.graph = ArchGraph(ops=ops, edges=edges, name=name, family="", coarse=query.coarse, source="query")


def splice(edges: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Edges after removing the nodes where `keep` is False, connecting their producers to their
    consumers (as `narbench.zoo.extract` splices dropped autograd nodes). Node ids unchanged."""
    n = len(keep)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges.T.tolist():
        preds[d].append(s)
    resolved: dict[int, list[int]] = {}
    out: set[tuple[int, int]] = set()
    for v in range(n):  # ids are a topological order (producers first)
        srcs: list[int] = []
        for p in preds[v]:
            srcs.extend([p] if keep[p] else resolved.get(p, []))
        if keep[v]:
            out.update((s, v) for s in srcs)
        else:
            resolved[v] = list(dict.fromkeys(srcs))
    return np.array(sorted(out), dtype=np.int64).reshape(-1, 2).T.copy()


def load_inputs(spec: str) -> tuple[tuple, dict[str, Any]]:
    """The (args, kwargs) that `FILE.py:FUNC` or `MODULE:FUNC` returns when called with no argument
    (what it may return: `narbench.search_engine._target_inputs.normalise_inputs`)."""
    colon = _parse_colon(spec)
    if not colon:
        raise TargetError(f"--inputs takes FILE.py:FUNC or MODULE:FUNC (a function returning the example inputs), "
                          f"got {spec!r}")
    if colon[0].endswith(".py"):
        path = Path(colon[0])
        if not path.is_file():
            raise TargetError(f"file not found: {path}; check the path (--inputs is FILE.py:FUNC)")
        module, where = _import_file(path), str(path)
    else:
        try:
            module, where = importlib.import_module(colon[0]), f"module {colon[0]}"
        except Exception as exc:  # noqa: BLE001
            raise TargetError(f"cannot import module {colon[0]!r} ({_one_line(exc)}); --inputs is FILE.py:FUNC or "
                              "MODULE:FUNC") from exc
    func = _load_attr(spec, module, colon[1], where)
    if not callable(func):
        raise TargetError(f"--inputs {spec} is a {type(func).__name__}, not a function; name a function that "
                          "returns the example inputs")
    _stage(f"--inputs {spec}")
    try:
        value = func()
    except Exception as exc:  # noqa: BLE001 - report the user's error in one line
        raise TargetError(f"calling {spec} failed ({_one_line(exc)}); fix the function") from exc
    except SystemExit as exc:
        raise _exited(f"calling {spec}", exc) from None
    return normalise_inputs(value)


def _shapes(input_shape) -> list[tuple[int, ...]] | None:
    """One shape (a tuple of ints) or several (a sequence of them) as a list of shapes."""
    if input_shape is None or len(input_shape) == 0:
        return None
    shapes = [input_shape] if isinstance(input_shape[0], (int, np.integer)) else list(input_shape)
    return [tuple(int(d) for d in sh) for sh in shapes]


def resolve_target(target: Any, index, *, kwargs: dict[str, Any] | None = None, input_shape=None,
                   inputs: Any = None, timeout: float | None = None) -> Query:
    """Turn `target` into a `Query` over `index`'s vocabulary (see the module docstring).

    `input_shape`: one shape (`(1, 3, 32, 32)`) or a list of shapes, one per positional input;
    `inputs`: the example inputs themselves (`normalise_inputs`), or `"FILE.py:FUNC"` /
    `"MODULE:FUNC"` naming a function that returns them (`load_inputs`, called with the model's
    time limit); at most one of the two.
    `timeout`: seconds that importing, building and running a model may take (torch's own first
    imports not counted; `narbench.search_engine._target_run.time_limit`), None for no limit."""
    t0 = time.perf_counter()
    shapes = _shapes(input_shape)
    if shapes is not None and inputs is not None:
        raise TargetError("give the example input's shape (--input-shape) or the inputs themselves (--inputs), "
                          "not both")
    feed = inputs if inputs is None or isinstance(inputs, str) else normalise_inputs(inputs)
    with recording_attributes(_reads_attributes(index)):  # canonical 2.2 reads a model's design attributes
        query = _resolve(target, index, kwargs or {}, shapes, feed, timeout)
    query.info["seconds"] = time.perf_counter() - t0
    return query


def _reads_attributes(index) -> bool:
    """Whether the index's canonical rules read design attributes (2.2 on): a model is then extracted with them."""
    version = getattr(index, "canonical_version", None)
    return version is not None and version >= "2.2"


def runs_code(target: Any, index) -> bool:
    """Whether resolving `target` imports or runs code: a FILE.py:CLASS that exists, a zoo name, a
    MODULE:CLASS that is neither a graph file nor a graph of `index`. Decided as `_resolve` decides,
    without importing anything; an `nn.Module` instance is the caller's own and is not counted."""
    if not isinstance(target, (str, Path)):
        return False
    target = str(target)
    colon = _parse_colon(target)
    if not colon:
        return False
    if colon[0] in ZOOS:
        return True
    if colon[0].endswith(".py"):
        return Path(colon[0]).is_file()
    if Path(colon[0]).is_file() or Path(target).is_file() or index.row_of(target) is not None:
        return False
    return bool(re.fullmatch(_NAME, colon[0]) and re.fullmatch(_NAME, colon[1]))


_NAME = r"[A-Za-z_][\w.]*"  # a dotted Python name (MODULE, CLASS)


@contextlib.contextmanager
def _running(label: str, timeout: float | None):
    """Where user code runs: torch's first imports done, then under the time limit."""
    _warm_up()
    with time_limit(timeout, label):
        yield


def _resolve(target: Any, index, kwargs: dict[str, Any], shapes, feed, timeout: float | None) -> Query:
    shape = shapes[0] if shapes and len(shapes) == 1 else shapes
    given = "--input-shape" if shapes else "--inputs" if feed else None
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(target, torch.nn.Module):
        label = type(target).__name__
        with _running(label, timeout):
            raw, info = _extract(label, None, instance=target, shape=shape, inputs=_fed(feed))
        return _from_raw(Query(label, "module", info=info), raw, index)
    if isinstance(target, ArchGraph):
        raise TargetError("an ArchGraph's op ids need their vocabulary; save it with narbench.data.store.write_graphs "
                          "and search the file")
    if not isinstance(target, (str, Path)):
        raise TargetError(f"cannot search a {type(target).__name__}; give an nn.Module, a FILE.py:CLASS, "
                          "a MODULE:CLASS, a zoo name (timm:NAME), a graph file or a graph name")
    target = str(target)
    colon = _parse_colon(target)
    if colon and colon[0] in ZOOS:
        if feed is not None or (shapes and len(shapes) > 1):
            raise TargetError("a zoo model runs on the real build's input; give one --input-shape to change its "
                              "shape, or search the model class with MODULE:CLASS and --inputs")
        with _running(target, timeout):
            return _zoo(target, *colon, index, shape)
    if colon and colon[0].endswith(".py"):
        path = Path(colon[0])
        if not path.is_file():
            raise TargetError(f"file not found: {path}; check the path (TARGET is FILE.py:CLASS)")
        with _running(target, timeout):
            module = _import_file(path)
            obj = _load_attr(target, module, colon[1], str(path))
            return _build(target, "file", obj, kwargs, index, shape, feed)
    if target.endswith(".py"):
        raise TargetError(f"name the model class too: {target}:ClassName")
    path, name = (Path(colon[0]), colon[1]) if colon and Path(colon[0]).is_file() else (Path(target), None)
    if given and (path.is_file() or index.row_of(target) is not None):
        raise TargetError(f"{target} is a graph: it needs no example input; drop {given}")
    if path.is_file():
        return _graph_file(target, path, name, index)
    row = index.row_of(target)
    if row is not None:
        q = Query(target, "index", row=row, ops=index.op_counts(row), coarse=index.record(row)["coarse"])
        return q
    if colon and re.fullmatch(_NAME, colon[0]) and re.fullmatch(_NAME, colon[1]):
        with _running(target, timeout):
            module = _import_module(colon[0])
            obj = _load_attr(target, module, colon[1], f"module {colon[0]}")
            return _build(target, "import", obj, kwargs, index, shape, feed)
    if "/" in target or target.endswith(".narg"):
        import difflib

        near = difflib.get_close_matches(target, index.names, n=3, cutoff=0.8)
        hint = f" (close graph names: {', '.join(near)})" if near else ""
        raise TargetError(f"{target!r} is neither a file nor a graph name in the index{hint}; check the path or name")
    raise TargetError(f"cannot read TARGET {target!r}: give FILE.py:CLASS, MODULE:CLASS, timm:NAME, torchvision:NAME, "
                      "transformers:TYPE, a graph file or a graph name from the index")


def _import_module(name: str):
    _stage(f"importing {name}")
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001
        raise TargetError(f"cannot import module {name!r} ({_one_line(exc)}); install it, or use "
                          f"FILE.py:CLASS for a file, or a zoo name: {', '.join(z + ':NAME' for z in ZOOS)}") from exc
    except SystemExit as exc:
        raise _exited(f"importing {name}", exc) from None


def _from_raw(query: Query, raw, index) -> Query:
    _map_graph(query, raw.ops, raw.edges, index.vocab, query.label, version=index.canonical_version)
    return query


def _build(label: str, kind: str, obj, kwargs: dict[str, Any], index, shape, feed) -> Query:
    if not callable(obj):
        raise TargetError(f"{label} is a {type(obj).__name__}, not a class; name an nn.Module class or a function "
                          "returning one")
    raw, info = _extract(label, lambda: obj(**kwargs), shape=shape, inputs=_fed(feed))
    return _from_raw(Query(label, kind, info=info), raw, index)


def _fed(feed):
    """The example inputs: `feed` itself, or what the function that `feed` names returns (`load_inputs`)."""
    return load_inputs(feed) if isinstance(feed, str) else feed


def _zoo(label: str, zoo: str, name: str, index, shape) -> Query:
    if importlib.util.find_spec(zoo) is None:
        raise TargetError(f"zoo {zoo!r} is not installed; pip install {zoo} (or pip install 'narbench[zoo]'), "
                          "or search a FILE.py:CLASS or graph instead")
    from narbench.zoo.sources import (AllDevicesFailed, NotApplicable, UnknownModelError, ZooImportError,
                                      default_spec, extract_spec)

    model, _, task = name.partition("/")
    try:
        spec = default_spec(zoo, model, task or None)
    except UnknownModelError as exc:
        raise TargetError(f"{exc}; check the name") from exc
    except ZooImportError as exc:
        raise TargetError(str(exc)) from exc
    except ImportError as exc:
        raise TargetError(f"zoo {zoo!r} fails to import ({_one_line(exc)}); reinstall it") from exc
    try:
        raw, info = extract_spec(spec, input_shape=shape)
    except ZooImportError as exc:  # transformers imports a model's module on first use
        raise TargetError(str(exc)) from exc
    except (AllDevicesFailed, NotApplicable) as exc:
        first = exc.first if isinstance(exc, AllDevicesFailed) else exc
        raise TargetError(f"extracting {label} failed ({_one_line(first)}); "
                          "if the input does not fit, give its shape with --input-shape") from exc
    dev = info.get("device", "")
    return _from_raw(Query(label, "zoo", info={"device": dev, "input": "the real build's input", **info}), raw, index)


def _graph_file(label: str, path: Path, name: str | None, index) -> Query:
    from narbench.data.store import CorruptFileError, read_graphs

    try:
        graphs, vocab, _, _ = read_graphs(path)
    except CorruptFileError as exc:
        raise TargetError(f"{exc}; give a graph file written by narbench (narbench.data.store.write_graphs)") from exc
    if name is not None:
        graphs = [g for g in graphs if g.name == name]
        if not graphs:
            raise TargetError(f"{path} has no graph named {name!r}; check the name")
    elif len(graphs) != 1:
        raise TargetError(f"{path} holds {len(graphs)} graphs; pick one with {path}:NAME "
                          f"(e.g. {path}:{graphs[0].name})" if graphs else f"{path} holds no graph")
    g = graphs[0]
    q = Query(g.name, "graph-file", info={"file": str(path)})
    _map_graph(q, [vocab[i] for i in g.ops.tolist()], g.edges, index.vocab, g.name, coarse=g.coarse or None,
               version=index.canonical_version)
    return q
