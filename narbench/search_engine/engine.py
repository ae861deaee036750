"""The search engine: `search(target)` -> the most similar real architectures (paper eq. 1).

Resolve the target to a graph (`narbench.search_engine.target`), embed it with the index's encoder
(`narbench.search_engine.index`), rank the index's graphs by cosine similarity (`narbench.search_engine.backends`), and say
why the top hit is close (the op types the two share most), whether the query's graph is in
the index itself (an exact duplicate, ranked first), which hits are weak (a cosine below the
index's `weak_below`, `narbench.search_engine.weak.weak_threshold`), whether no family of the index fits
(`narbench.search_engine.outside`), and how much of the query's graph the index does not know
(`narbench.search_engine.unknown`).

The first search in a process pays for importing torch, `torch._dynamo` (torch's meta kernels
import it) and the index's encoder: 6-7 s on a busy 2-core CPU, where the next search takes tens
of milliseconds (docs/search.md, Speed). It says so in one line on stderr (`_announce`), so that the pause does not
look like a hang.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narbench.data.ops import UNKNOWN_OP
from narbench.search_engine._target_child import MAX_MEMORY, resolve_apart, runs_apart
from narbench.search_engine.backends import exact_scores
from narbench.search_engine.index import SearchIndex
from narbench.search_engine.index_file import load_index, row_families
from narbench.search_engine.order import DEFAULT_ORDER, check_order, depth, kind_overlap, order_hits, weighs_kinds
from narbench.search_engine.target import Query, query_of, resolve
from narbench.search_engine.target_check import Served
from narbench.search_engine.unknown import caveats, unknown_share
from narbench.search_engine import outside

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class Hit:
    """One result: rank (1-based), the graph's name and labels, cosine similarity and size.

    `weak`: the cosine is below the index's `weak_below` (less similar than 95% of the index's
    graphs are to their nearest other model); never set when the index has no threshold."""

    rank: int
    name: str
    family: str
    coarse: str
    source: str
    similarity: float
    num_nodes: int
    num_edges: int
    weak: bool = False
    #: every family of the graph, `family` (its primary) first: several where specs of several families share it
    families: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "families", tuple(self.families) or (self.family,))  # a frozen dataclass


@dataclass
class SearchResult:
    """The hits of one search, best first (in `order`), and what explains them. Iterates like the list of hits."""

    query: str
    kind: str
    hits: list[Hit]
    num_nodes: int
    num_edges: int
    coarse: str
    why: str
    duplicate_of: list[str] = field(default_factory=list)  # index graphs identical to the query
    unknown_ops: dict[str, int] = field(default_factory=dict)  # query ops not in the index's vocabulary
    unknown_as: str = "spliced"  # "other": embedded as the canonical `other` op; "spliced": left out
    warnings: list[str] = field(default_factory=list)  # e.g. a torch outside the range the index was checked with
    index: str = ""
    backend: str = "exact"
    info: dict[str, Any] = field(default_factory=dict)  # input, device, timings
    weak_below: float | None = None  # hits with a lower cosine are weak (None: the index has no threshold)
    index_pinned: bool = True  # False: not the shipped index (`SearchIndex.pinned`; `index` says "unpinned" too)
    out_of_family: float | None = None  # how likely no family fits (`narbench.search_engine.outside`; None: no score)
    no_family_fits: bool = False  # the score is at or above the index's threshold: "no family in the index fits"
    unknown_share: float = 0.0  # share of the query's nodes whose op the index does not know (`unknown`)
    order: str = "cosine"  # the hits' order (`narbench.search_engine.order.ORDERS`): "vote", "family" first, "cosine"

    def __iter__(self):
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i):
        return self.hits[i]

    def __str__(self) -> str:
        """The hits as a small table (rank, graph, family, cosine) under a line naming the query."""
        head = f"{self.query}: top {len(self.hits)} in {self.index or 'the index'}"
        if not self.hits:
            return f"{head}: no hits"
        names = [h.name for h in self.hits]
        families = [", ".join(h.families) for h in self.hits]
        w_rank, w_name = len(str(self.hits[-1].rank)), max(5, *map(len, names))
        w_fam = max(6, *map(len, families))
        rows = [f"{'#':>{w_rank}}  {'graph':<{w_name}}  {'family':<{w_fam}}  cosine"]
        rows += [f"{h.rank:>{w_rank}}  {h.name:<{w_name}}  {fam:<{w_fam}}  {h.similarity:6.3f}"
                 f"{' weak' if h.weak else ''}" for h, fam in zip(self.hits, families)]
        return "\n".join([head, *(r.rstrip() for r in rows), *([no_fit_line(self)] if self.no_family_fits else [])])

    __repr__ = __str__  # the table, also in a REPL or notebook; the fields stay attributes (`to_json`)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "hits": [{**asdict(h), "families": list(h.families)} for h in self.hits]}  # JSON's types


def _short(op: str) -> str:
    return op.removesuffix("Backward0").removesuffix("Backward1")


def explain(query_ops: dict[str, int], hit_ops: dict[str, int], top: int = 3, roles: bool = False) -> str:
    """One line on why two graphs are close: op-histogram overlap and the ops they share most; with `roles` (an
    index that reads activations and norms by role, `narbench.data.roles`) their ops counted by role, as it reads them."""
    if roles:
        query_ops, hit_ops = by_role(query_ops), by_role(hit_ops)
    ops = set(query_ops) | set(hit_ops)
    shared = {op: min(query_ops.get(op, 0), hit_ops.get(op, 0)) for op in ops}
    union = sum(max(query_ops.get(op, 0), hit_ops.get(op, 0)) for op in ops)
    overlap = sum(shared.values()) / union if union else 0.0
    most = [f"{_short(op)} x{c}" for op, c in sorted(shared.items(), key=lambda kv: (-kv[1], kv[0]))[:top] if c]
    diff = max(ops, key=lambda op: (abs(query_ops.get(op, 0) - hit_ops.get(op, 0)), op), default=None)
    line = (f"{overlap:.0%} of their op counts overlap{' (activations and norms by role)' if roles else ''}; "
            f"most shared: {', '.join(most) or 'none'}")
    if diff is not None and query_ops.get(diff, 0) != hit_ops.get(diff, 0):
        delta = query_ops.get(diff, 0) - hit_ops.get(diff, 0)
        line += f"; largest difference: {_short(diff)} ({'+' if delta > 0 else ''}{delta} in the query)"
    return line


def by_role(ops: dict[str, int]) -> dict[str, int]:
    """Op counts with every op of a role (`narbench.data.roles.ROLES`) counted under the role's name."""
    from narbench.data.roles import ROLE_OF

    out: dict[str, int] = {}
    for op, count in ops.items():
        out[ROLE_OF.get(op, op)] = out.get(ROLE_OF.get(op, op), 0) + count
    return out


def no_fit_line(result: SearchResult) -> str:
    """The one line a search prints when its out-of-family score fires."""
    return (f"no family in the index fits: out-of-family score {result.out_of_family:.2f} (the hits listed are the "
            "nearest designs, not its kind)")


def _backend(index: SearchIndex, name: str):
    key = f"backend:{name}"
    backend = index._cache.get(key)
    if backend is None:
        from narbench.search_engine.backends import make_backend

        backend = index._cache[key] = make_backend(name, index.arrays["embeddings"])
    return backend


def torch_warning(index: SearchIndex, version: str | None = None) -> str | None:
    """A warning when the installed torch is outside the versions the index's graphs were checked with.

    Graphs are recorded by torch; the canonical op table makes them the same under the versions
    listed in the index (`torch_checked`). Outside them a query's graph may differ unnoticed."""
    checked = index.header.get("torch_checked")
    if not checked:
        return None
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as pkg_version

        try:
            version = pkg_version("torch")
        except PackageNotFoundError:
            return None
    minor = ".".join(version.split("+")[0].split(".")[:2])
    if minor in checked:
        return None
    return (f"torch {version} is outside the versions this index's graphs were checked with "
            f"({', '.join(checked)}): a query's graph may differ from what those versions record")


def search(
    target: Any,
    k: int = 10,
    *,
    encoder: str | None = None,
    index: SearchIndex | str | Path | None = None,
    backend: str = "exact",
    input_shape: tuple[int, ...] | list[tuple[int, ...]] | None = None,
    kwargs: dict[str, Any] | None = None,
    inputs: Any = None,
    timeout: float | None = None,
    max_memory: int | None = MAX_MEMORY,
    isolate: bool | None = None,
    progress: bool = True,
    order: str = DEFAULT_ORDER,
) -> SearchResult:
    """The `k` graphs of the index most similar to `target`.

    `target`: an `nn.Module`, `"file.py:Class"`, `"package.module:Class"`, `"timm:resnet50"` (zoo
    installed), a graph file written by narbench, or a graph name in the index (that graph itself
    is left out of its hits); or a `Query` that `narbench.search_engine.target.resolve_target`
    returned for this index. `encoder`: use the index built with that encoder (default: the
    shipped one); `index`: a loaded `SearchIndex` or an index file instead. `input_shape`
    overrides the example input's shape (a list of shapes: one positional input each);
    `inputs` are the example inputs themselves, for a forward that takes several or keywords:
    a tensor, a tuple of positional inputs, a dict of keyword inputs, or an `(args, kwargs)`
    pair (moved to the device the model runs on); `kwargs` are the constructor's arguments.
    `timeout`: seconds that importing, building and running the model may take (None: no limit).
    A model given as code (a file, a module, a zoo name) is imported and run in a child process
    (`narbench.search_engine._target_child`) that may add `max_memory` bytes to its address space
    (default 4 GiB; None or 0: no cap) and whose whole process group is killed at `timeout`; a
    model instance runs there too when a `timeout` is given, else here (its weights stay where they
    are). `isolate=False` runs everything in this process (the time limit then by SIGALRM, in the
    main thread; no memory cap); `isolate=True` runs an instance in a child even without a limit.
    A saved graph or an index graph name runs no code and no child. `progress`: the
    first search in a process says on stderr that it loads torch and the index (`_announce`). `order`: "vote"
    (default) the first ten hits vote for their families, "family" lists the nearest graph's families first, then
    the next family's, "cosine" by cosine alone (`narbench.search_engine.order`).
    Raises `TargetError`, `IndexFileError` or `BackendError` with a one-line message and fix, and
    `narbench.eval.retrieval.EmbeddingError` when the index's encoder embeds the target's graph
    as NaN or inf (nothing to rank it by).
    """
    return run_search(target, k, encoder=encoder, index=index, backend=backend, input_shape=input_shape, kwargs=kwargs,
                      inputs=inputs, timeout=timeout, max_memory=max_memory, isolate=isolate, progress=progress,
                      order=order)[1]


def rules_warning(saved: str | None, index: SearchIndex) -> str | None:
    """What it means that a saved graph follows other canonical rules than the index (a migration: docs/search.md)."""
    if not saved or not index.canonical_version or saved == index.canonical_version:
        return None
    if tuple(map(int, saved.split("."))) < tuple(map(int, index.canonical_version.split("."))):
        return (f"the graph was saved under canonical rules {saved}, the index follows {index.canonical_version}: it is "
                f"read as saved (what {index.canonical_version} tells apart that {saved} does not, e.g. a convolution's "
                f"groups and dimensions, it lacks); extract it again from its model for a {index.canonical_version} reading")
    return (f"the graph was saved under canonical rules {saved}, the index follows {index.canonical_version}: its "
            f"ops that only {saved} writes are read as {index.canonical_version} writes them (conv_grouped as conv)")


def run_search(target: Any, k: int = 10, *, encoder: str | None = None, index: SearchIndex | str | Path | None = None,
               backend: str = "exact", input_shape=None, kwargs: dict[str, Any] | None = None, inputs: Any = None,
               timeout: float | None = None, max_memory: int | None = MAX_MEMORY, isolate: bool | None = None,
               progress: bool = True, served: Served | None = None,
               order: str = DEFAULT_ORDER) -> tuple[Query, SearchResult]:
    """The one way through search (`search`, the CLI's `narbench search` and the explorer's `Searcher` go
    through it), and the query with the result: resolve the target (`narbench.search_engine.target.resolve`)
    -> build its model in a child (`_target_child.resolve_apart`) or here (`target.query_of`) -> trace it
    (`narbench.zoo.extract`) -> its graph over the index's vocabulary (`narbench.data.mapping`) -> embed
    it (`SearchIndex.embed`) -> rank the index's graphs (`narbench.search_engine.backends`) -> judge whether a
    family fits (`outside`, on the hits by cosine) -> order the hits (`narbench.search_engine.order`).

    Arguments as `search`; `served`: a target a client sent, searched as a server allows (`Served`).
    """
    t0 = time.perf_counter()
    check_order(order)
    if not isinstance(index, SearchIndex):
        index = load_index(encoder, index)
    t_index = time.perf_counter() - t0
    if progress:
        _announce(index)
    if isinstance(target, Query):  # resolved already (`resolve_target`)
        query = target
    else:
        plan = resolve(target, index, kwargs=kwargs, input_shape=input_shape, inputs=inputs, served=served)
        if runs_apart(plan, isolate, timeout):
            query = resolve_apart(plan, index, timeout=timeout, max_memory=max_memory)
        else:
            query = query_of(plan, index, timeout)
    t1 = time.perf_counter()
    as_other = UNKNOWN_OP in index.vocab  # a canonical vocabulary: unknown raw names are `other` nodes
    digest = None  # the query graph's content hash: an index graph with the same is an exact duplicate
    if query.row is not None:
        vec = index.arrays["embeddings"][query.row].astype("float32")
        size = index.record(query.row)
        num_nodes, num_edges = size["num_nodes"], size["num_edges"]
    else:
        vec = index.embed([query.graph])[0]
        if as_other or not query.unknown_ops:
            digest = query.graph.content_hash()
        num_nodes, num_edges = query.graph.num_nodes, query.graph.num_edges
        if not as_other:
            num_nodes += sum(query.unknown_ops.values())
    t_embed = time.perf_counter() - t1
    hits, duplicates = _rank(index, vec, query.row, digest, depth(max(k, outside.K), order), backend)
    score, no_fit = outside.judge(index, hits, num_nodes, query.ops)  # from the first K hits by cosine, whatever k and order
    overlaps = ([kind_overlap(query.ops, index.op_counts(index.row_of(h.name))) for h in hits]
                if weighs_kinds(order) else None)
    hits = order_hits(hits, order, k, overlaps)
    why = explain(query.ops, index.op_counts(index.row_of(hits[0].name)), roles=index.reads_roles) if hits else ""
    timings = {"index": t_index, "target": query.info.pop("seconds", 0.0), "embed": t_embed,
               "total": time.perf_counter() - t0}
    return query, SearchResult(
        query=query.label, kind=query.kind, hits=hits, num_nodes=num_nodes, num_edges=num_edges,
        coarse=query.coarse, why=why, duplicate_of=[index.names[r] for r in duplicates],
        unknown_ops=query.unknown_ops, unknown_as="other" if as_other else "spliced", index=index.describe(),
        backend=backend, info={**query.info, "seconds": {k_: round(v, 4) for k_, v in timings.items()}},
        warnings=[w for w in [torch_warning(index), rules_warning(query.info.get("saved_rules"), index),
                              *caveats(query.unknown_ops, num_nodes, query.info.get("opaque_functions"))]
                  if w and query.row is None],
        weak_below=index.weak_below, index_pinned=index.pinned, out_of_family=score, no_family_fits=no_fit,
        unknown_share=unknown_share(query.unknown_ops, num_nodes), order=order,
    )


def _rank(index: SearchIndex, vec, row: int | None, digest: str | None, k: int,
          backend: str) -> tuple[list[Hit], list[int]]:
    """The `k` hits of query embedding `vec`, best first, and the index rows of the query's exact duplicates:
    the query's own `row` (left out of its hits), or the rows whose graph has content hash `digest`
    (ranked first: an exact duplicate is the closest graph there is)."""
    exclude = {row} if row is not None else set()
    duplicates = [row] if row is not None else index.duplicates(digest) if digest is not None else []
    first = [r for r in duplicates if r not in exclude]
    rows, scores = _backend(index, backend).search(vec[None], k + len(exclude) + len(first))
    ranked = dict(zip(rows[0].tolist(), scores[0].tolist()))
    for r in first:
        ranked.setdefault(r, float(exact_scores(index.arrays["embeddings"][r][None], vec)[0]))
    hits, weak_below = [], index.weak_below
    for r in first + [r for r in ranked if r not in first]:
        if r in exclude or r < 0 or len(hits) == k:
            continue
        # rows are stored as float16, so a row's norm is 1 +- 5e-4: an exact twin can score 1.0003
        sim = round(min(max(float(ranked[r]), -1.0), 1.0), 4)
        hits.append(Hit(rank=len(hits) + 1, similarity=sim, weak=weak_below is not None and sim < weak_below,
                        families=row_families(index, r), **index.record(r)))
    return hits, duplicates


_announced = False  # `_announce` has run in this process


def _announce(index: SearchIndex) -> None:
    """Once per process, on an interactive stderr (a terminal, a notebook) and unless
    NARBENCH_NO_PROGRESS=1: a line saying that the first search loads torch, its meta kernels and
    the index's encoder (seconds; module docstring)."""
    global _announced
    if _announced or os.environ.get("NARBENCH_NO_PROGRESS") == "1":
        return
    _announced = True
    if "torch._dynamo" in sys.modules and "encoder" in index._cache:  # nothing slow left to load
        return
    interactive = getattr(sys.stderr, "isatty", lambda: False)() or "ipykernel" in sys.modules
    if interactive:
        sys.stderr.write(f"narbench search: loading torch and the search index ({index.describe()}); "
                         "the first search in a process takes a few seconds...\n")
        sys.stderr.flush()


def render(result: SearchResult, console: Console) -> None:
    """The hits as a table, then the query, why the top hit is close, and duplicates."""
    from rich.markup import escape
    from rich.table import Table

    info = result.info
    how = f" · {info['input']} on {info['device']}" if info.get("device") else ""
    console.print(f"[bold]{escape(result.query)}[/bold]: {result.num_nodes:,} ops, {result.num_edges:,} edges, "
                  f"coarse {result.coarse}{escape(how)}")
    table = Table(title=f"top {len(result.hits)} in {escape(result.index)} · {result.backend}", title_justify="left")
    for col, justify in (("#", "right"), ("graph", "left"), ("family", "left"), ("coarse", "left"),
                         ("source", "left"), ("cosine", "right"), ("ops", "right"), ("edges", "right")):
        table.add_column(col, justify=justify, overflow="fold")
    for h in result.hits:
        table.add_row(str(h.rank), escape(h.name), escape(", ".join(h.families)), h.coarse, h.source,
                      f"{h.similarity:.3f}{' weak' if h.weak else ''}", f"{h.num_nodes:,}", f"{h.num_edges:,}",
                      style="dim" if h.weak else None)
    console.print(table)
    if result.no_family_fits:
        console.print(f"[bold]{escape(no_fit_line(result))}[/bold]", soft_wrap=True)
    weak = sum(h.weak for h in result.hits)
    if weak:
        what = "no close match: every hit is weak" if weak == len(result.hits) else f"{weak} of {len(result.hits)} hits are weak"
        console.print(f"{what} (cosine below {result.weak_below:.3f}, the cosine that 95% of the index's graphs "
                      "reach to their nearest other model): they share little design with the query", soft_wrap=True)
    if result.hits:
        console.print(f"why #1 is close: {escape(result.why)}", soft_wrap=True)
    if result.kind == "index":
        console.print("in the index: yes, this is an index graph (left out of its own hits)", soft_wrap=True)
    elif result.duplicate_of:
        console.print(f"in the index: yes, an exact duplicate of {escape(', '.join(result.duplicate_of))}",
                      soft_wrap=True)
    else:
        console.print("in the index: no exact duplicate", soft_wrap=True)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
    if result.unknown_ops:
        ops = ", ".join(f"{op} x{c}" for op, c in sorted(result.unknown_ops.items(), key=lambda kv: -kv[1]))
        how = ("unknown to the op table (embedded as `other`)" if result.unknown_as == "other"
               else "not in the index's op vocabulary (spliced out before embedding)")
        console.print(f"{how}: {escape(ops)}", soft_wrap=True)
