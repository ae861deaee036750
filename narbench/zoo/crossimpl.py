"""Build `crossimpl-2.1.1.narg`: canonical graphs of the reimplementations in `narbench/data/crossimpl.csv`.

Each row's builder is imported and called with its keyword arguments on the meta device (the CPU
when the meta device fails), run once on an input of the row's shape (`narbench.zoo.extract`); the
nodes of custom autograd functions are renamed by what they compute (`crossimpl-functions.csv`),
the graph is canonicalised (`narbench.data.canonical`), mapped onto the canonical vocabulary and
labelled by the table: family from the table, coarse label by `coarse_label` of the canonical graph,
source = the package, identity `crossimpl/<package>/<model>`. A query whose share of `other` nodes
exceeds `MAX_OTHER_SHARE` fails the build, naming its unknown ops. Each query's
`meta["corpus_twins"]` lists the shipped `real` graphs isomorphic to it (`isomorphism.canonical_hash`):
those queries form the `exact` subset. `build` writes another table's rows the same way given its
`QuerySet` (the wild set's, `narbench.zoo.wild_graphs`: no corpus twins, no cap on `other`). Needs the
optional `crossimpl` extra:

    pip install 'narbench[crossimpl]' && narbench build-crossimpl --out build/crossimpl
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import types
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

from narbench.data.canonical import DEFAULT_VERSION, at_least, canonical_vocabulary, check_version
from narbench.data.canonical_rules import rules_sha256
from narbench.datasets.crossimpl import (MAX_OTHER_SHARE, NAME, VERSION, Row, functions_path, other_share, read_functions,
                                         read_table, table_path)
from narbench.data.graph import ArchGraph
from narbench.data.ops import OPS_VERSION, table_sha256
from narbench.data.store import write_graphs

#: distribution names of the packages a row's `package` column names
DISTRIBUTIONS = {"pytorchcv": "pytorchcv", "vit-pytorch": "vit-pytorch", "monai": "monai",
                 "efficientnet-pytorch": "efficientnet_pytorch"}


def resolve(builder: str) -> Callable[..., Any]:
    """The callable named `module:attribute[.attribute]`."""
    module, _, attr = builder.partition(":")
    obj: Any = import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def import_module(name: str) -> Any:
    """`importlib.import_module(name)`; if the package's `__init__` fails on an unrelated dependency,
    the submodule without it.

    vit-pytorch's `__init__` imports its training wrappers, which import torchvision; a torchvision
    built for another torch (a CUDA wheel beside the CPU torch) raises RuntimeError on import, and
    a missing one ModuleNotFoundError. The
    model modules themselves do not use it, so the package is then stood in by an empty package of
    the same path and only the submodule is imported (its graph is the same).
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        # the module itself (or its package) missing is re-raised; a dependency of the package's
        # `__init__` that is missing (vit-pytorch without torchvision) is retried without it
        top = name.split(".")[0]
        if not exc.name or exc.name.split(".")[0] == top:
            raise
        module = _without_package_init(name)
    except Exception:  # noqa: BLE001 - retried without the package's __init__, re-raised if that fails too
        module = _without_package_init(name)
    if module is None:
        raise ImportError(f"{name}: its package's __init__ fails and it cannot be imported without it")
    return module


def _without_package_init(name: str) -> Any:
    """`name` imported with its top package stood in by an empty package of the same path (None if it has none)."""
    top = name.split(".")[0]
    spec = importlib.util.find_spec(top)
    if top == name or spec is None or not spec.submodule_search_locations:
        return None
    for key in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
        del sys.modules[key]
    stub = types.ModuleType(top)
    stub.__path__ = list(spec.submodule_search_locations)
    sys.modules[top] = stub
    return importlib.import_module(name)


def package_version(package: str) -> str:
    """The installed distribution's version; for a git checkout on the path that is no distribution (a set's GitHub
    repository, `narbench.zoo.wild_sources`), the commit checked out; another such folder says so."""
    try:
        return version(DISTRIBUTIONS.get(package, package))
    except PackageNotFoundError:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return "not installed"
        from narbench.zoo.wild_sources import checkout_commit

        folders = list(spec.submodule_search_locations or [])
        return (checkout_commit(Path(folders[0])) if folders else None) or "a folder, not a distribution"


#: how a row's model and inputs are made on a device: `make(row, device) -> (model, args, kwargs)`
Make = Callable[[Any, str], tuple[Any, tuple, dict[str, Any]]]


@dataclass(frozen=True)
class QuerySet:
    """What `build` writes a table's rows as: the set's name and version (the file `<name>-<version>.narg`), its
    table (hashed into the header), how a row's model and inputs are made (None: crossimpl's, its builder and a
    normal image), the share of `other` nodes above which a row fails the build (None: recorded, never failed),
    whether each graph's corpus twins are looked up, what a row adds to its graph's meta, and whether a model
    extracted on the meta device with square buffers there (perhaps causal masks, which have no values on meta) is
    extracted again on the CPU, as `narbench search` extracts a model (`read_masks`; crossimpl's queries, part of
    `real`, were not)."""

    name: str
    version: str
    table: Path
    make: Make | None = None
    max_other_share: float | None = MAX_OTHER_SHARE
    corpus_twins: bool = True
    row_meta: Callable[[Any], dict[str, Any]] | None = None
    read_masks: bool = False


def crossimpl_set(version: str = DEFAULT_VERSION) -> QuerySet:
    """The crossimpl queries built under canonical `version` (2.1: 2.1.1's table; later: the widened one)."""
    return QuerySet(NAME, VERSION if version == DEFAULT_VERSION else version, table_path(version))


def extract_row(row: Row, version: str = DEFAULT_VERSION, make: Make | None = None,
                read_masks: bool = False) -> tuple[ArchGraph, dict[str, Any]]:
    """The labelled canonical graph of one row under the canonical rules of `version`, and how it
    was extracted (device, parameters); from 2.2 on, extracted with design attributes (2.3: and custom
    functions traced through). `make` builds the
    row's model and inputs on a device (default: crossimpl's builder and a normal image of its input shape).
    `read_masks`: a graph extracted on meta with square buffers there is extracted again on the CPU (`QuerySet`)."""
    from narbench.data.coarse import coarse_label

    raw, info, renamed = extract_raw(row, version, make, read_masks)
    canon = raw.canonical(version)
    # from 2.2 on the coarse label is read off the raw graph, as the taxonomy labels `real` (per model, on
    # the raw record): 2.2's canonical graph writes 1x1 convolutions as `linear`, which would move RegNets
    # and PoolFormers out of `cnn` beside their `real` twins; 2.1.1 keeps the canonical graph's label
    coarse = coarse_label(raw.ops, raw.edges) if at_least(version, "2.2") else None
    meta = {"package": row.package, "model": row.model, "builder": row.builder, "kwargs": row.kwargs,
            "input": row.input, "package_version": package_version(row.package), "identity": row.identity,
            "zoo_model": row.zoo_model, **info}
    if renamed:
        meta["renamed_functions"] = dict(sorted(renamed.items()))
    if "unknown_ops" in canon.meta:
        meta["unknown_ops"] = canon.meta["unknown_ops"]
    graph = canon.to_arch_graph(list(canonical_vocabulary(version)), name=row.identity, family=row.family,
                                coarse=coarse, source=row.package, meta=meta)
    return graph, info


def extract_raw(row: Row, version: str = DEFAULT_VERSION, make: Make | None = None,
                read_masks: bool = False) -> tuple[Any, dict[str, Any], dict[str, int]]:
    """One row's raw graph as `extract_row` canonicalises it (`narbench.zoo.extract.RawGraph`, custom functions
    renamed by `crossimpl-functions.csv`), how it was extracted, and the functions renamed (name -> count): what a
    rule on raw names or marks (canonical 2.10's, 2.11's) reads, one extraction for any number of versions."""
    import torch

    from narbench.zoo.extract import extract_graph
    from narbench.zoo.devices import try_devices

    if make is None:
        build = resolve(row.builder)

        def image_model(row: Row, dev: str) -> tuple[Any, tuple, dict[str, Any]]:
            with torch.device(dev):
                model = build(**{k: _tuples(v) for k, v in row.kwargs.items()})
            return model, (torch.randn(*row.input_shape, device=dev),), {}

        make = image_model

    def run(dev: str):
        model, args, kwargs = make(row, dev)
        return (extract_graph(model, args, kwargs, attributes=at_least(version, "2.2"),
                              functions=at_least(version, "2.3")),
                {"params": int(sum(p.numel() for p in model.parameters()))})

    raw, info = try_devices(["meta", "cpu"], run)
    if read_masks and info["device"] == "meta" and raw.meta.get("unread_masks"):
        try:  # as `narbench search` does (`_target_run`): where the buffers have values; the meta graph if that fails
            raw, more = run("cpu")
            info = {"device": "cpu", **more, "masks_unread_on": "meta"}
        except Exception as exc:  # noqa: BLE001 - user code may raise anything; the meta graph stands
            info["masks_unread"] = f"[cpu] {type(exc).__name__}: {str(exc)[:200]}"
    functions = read_functions()
    renamed = {op: n for op, n in raw.op_counts().items() if op in functions}
    raw.ops = [functions.get(op, op) for op in raw.ops]
    return raw, info, renamed


def _tuples(value: Any) -> Any:
    """JSON lists as tuples (vit-pytorch asserts tuples for stage depths and head counts)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def mark_corpus_twins(queries: list[ArchGraph], corpus: tuple[str, list[ArchGraph]] | None = None, *,
                      progress: Callable[[str], None] | None = None) -> str:
    """Set each query's `meta["corpus_twins"]`: names of the corpus graphs isomorphic to it (sorted).

    `corpus` is (description, graphs); default the shipped `real` file. Returns the description.
    """
    from narbench.datasets.isomorphism import canonical_hash

    if corpus is None:
        from narbench.datasets import real
        from narbench.data.store import read_graphs

        graphs, _, _, digest = read_graphs(real.shipped_path(), real.RealDataset.expected_sha256)
        corpus = (f"{real.ARTIFACT} sha256 {digest}", graphs)
    name, corpus_graphs = corpus
    wanted: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        wanted.setdefault(canonical_hash(q), []).append(i)
    sizes = {q.num_nodes for q in queries}
    twins: dict[int, list[str]] = {i: [] for i in range(len(queries))}
    for j, g in enumerate(corpus_graphs):  # only graphs of a query's size can be isomorphic to it
        if g.num_nodes in sizes:
            for i in wanted.get(canonical_hash(g), ()):
                twins[i].append(g.name)
        if progress and j and j % 5000 == 0:
            progress(f"corpus twins: {j}/{len(corpus_graphs)} corpus graphs")
    for i, q in enumerate(queries):
        q.meta = {**(q.meta or {}), "corpus_twins": sorted(twins[i])}
    return name


def build(out: str | Path, rows: list[Row] | None = None, *, progress: Callable[[str], None] | None = None,
          corpus: tuple[str, list[ArchGraph]] | None = None, version: str = DEFAULT_VERSION,
          queries: QuerySet | None = None) -> dict[str, Any]:
    """Extract every row and write `<out>/crossimpl-2.1.1.narg` (under canonical 2.1; under a later
    `version`, `<out>/crossimpl-<version>.narg`); return a summary (`rows`: per row its nodes, `other`
    share, seconds and device).

    A row that fails, or whose share of `other` nodes exceeds `MAX_OTHER_SHARE`, stops the build.
    `corpus` is the real graphs the queries' `corpus_twins` are found among (default: the shipped
    `real` 2.1 file, `real-2.1`: another version needs its own `real` file as the corpus).
    `queries`: another table's rows written the same way (default `crossimpl_set(version)`; the wild set's).
    """
    import hashlib

    import torch

    check_version(version)
    qs = crossimpl_set(version) if queries is None else queries
    if qs.corpus_twins and version != DEFAULT_VERSION and corpus is None:
        raise ValueError(f"crossimpl under canonical {version} needs the real graphs of that version as the corpus "
                         f"(the default corpus is the shipped real {DEFAULT_VERSION} file)")
    rows = read_table(qs.table) if rows is None else rows
    vocab = list(canonical_vocabulary(version))
    graphs, records = [], []
    for i, row in enumerate(rows, start=1):
        start = time.perf_counter()
        try:
            graph, info = extract_row(row, version, qs.make, read_masks=qs.read_masks)
        except Exception as exc:  # noqa: BLE001 - named and re-raised
            raise RuntimeError(f"{row.identity} ({row.builder}): {type(exc).__name__}: {str(exc)[:500]}") from exc
        share = other_share(graph, vocab)
        if qs.max_other_share is not None and share > qs.max_other_share:
            raise RuntimeError(f"{row.identity}: {share:.1%} of its {graph.num_nodes} nodes are `other` (more than "
                               f"{qs.max_other_share:.0%}): raw ops no table maps: {graph.meta.get('unknown_ops')}; "
                               f"map each custom autograd function by what it computes in {functions_path()}")
        if qs.row_meta is not None:
            graph.meta = {**graph.meta, **qs.row_meta(row)}
        graphs.append(graph)
        records.append({"name": graph.name, "nodes": graph.num_nodes, "other_share": share,
                        "seconds": time.perf_counter() - start, "device": info["device"],
                        "unknown_ops": graph.meta.get("unknown_ops", {})})
        if progress:
            progress(f"[{i}/{len(rows)}] {row.identity}: {graph.num_nodes} nodes, family {graph.family}, "
                     f"coarse {graph.coarse}, {info['device']}"
                     + (f", other {share:.1%} {graph.meta.get('unknown_ops')}" if share else ""))
    corpus_name = mark_corpus_twins(graphs, corpus, progress=progress) if qs.corpus_twins else None
    packages = sorted({r.package for r in rows})
    header = {"name": qs.name, "version": qs.version,
              "generator": "narbench.zoo.crossimpl",
              "versions": {"torch": torch.__version__.split("+")[0], **{p: package_version(p) for p in packages}},
              "ops": ({"version": OPS_VERSION, "table_sha256": table_sha256()} if version == DEFAULT_VERSION else
                      {"version": version, "table_sha256": table_sha256(), "rules_sha256": rules_sha256(version)}),
              "table_sha256": hashlib.sha256(qs.table.read_bytes()).hexdigest(),
              "functions_sha256": hashlib.sha256(functions_path().read_bytes()).hexdigest(),
              "max_other_share": qs.max_other_share, "corpus": corpus_name}
    if not qs.corpus_twins:
        del header["corpus"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{qs.name}-{qs.version}.narg"
    digest = write_graphs(path, graphs, vocab, header)
    exact = [g.name for g in graphs if g.meta.get("corpus_twins")]
    return {"path": str(path), "sha256": digest, "graphs": len(graphs), "versions": header["versions"],
            "exact": exact, "renamed": {g.name: g.meta["renamed_functions"] for g in graphs if "renamed_functions" in g.meta},
            "rows": records}


def run_cli(out: Path, version: str = DEFAULT_VERSION, corpus_file: Path | None = None) -> int:
    """What `narbench build-crossimpl` runs: `build` into `out` (progress on stderr, `corpus_file` the real
    graphs of `version` for the corpus twins), then its summary on stdout; 0."""
    corpus = None
    if corpus_file is not None:
        from narbench.data.store import read_graphs

        graphs, _, _, digest = read_graphs(corpus_file)
        corpus = (f"{corpus_file.name} sha256 {digest}", graphs)
    summary = build(out, progress=lambda s: print(s, file=sys.stderr, flush=True), corpus=corpus, version=version)
    print(f"wrote {summary['path']}: {summary['graphs']} graphs, sha256 {summary['sha256']}")
    print(f"custom autograd functions renamed in {len(summary['renamed'])} queries; "
          f"{len(summary['exact'])} queries isomorphic to a corpus graph (subset `exact`)")
    return 0
