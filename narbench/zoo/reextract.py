"""Re-extract the 1.0 graphs that hold given raw ops: the patch a new `real` version derives with.

`real-1.0.narg` keeps each distinct graph as torch 2.14.1 recorded it, under the name of its
first spec and with that spec's `model`, `task` and `variant` in its meta, so a spec can be run
again from the file alone. Where extraction itself changes (2.1: in-place ops on views are
recorded as the op, `narbench.zoo.inplace.InPlaceOnViews`), only the graphs holding the raw op
the change concerns (`CopySlices`) can differ, and only those are re-extracted: with the build's
own workers (`narbench.zoo.build.build_real`: timeouts, memory limit, resumable per-spec files
under `<out>/results`), into one raw graph file `<out>/real-1.0-reextracted.narg` with the 1.0
names and metas. `narbench.zoo.derive.derive(..., patch=...)` replaces those graphs by name.

What this does not see: 1.0 kept one spec per distinct raw graph and stored only the count of
the others (`meta["duplicates"]`), so a spec whose raw graph equalled a re-extracted one is
assumed to equal it again (the same code recorded the same nodes).

    narbench build-real --from narbench/data/real-1.0.narg --reextract CopySlices --out build/real21 --jobs 2

`real` 2.2 re-extracts every graph (`--reextract '*'`) with design attributes recorded
(`--attributes`: `narbench.zoo.attributes.DesignAttributes`, which canonical 2.2 reads):

    narbench build-real --from narbench/data/real-1.0.narg --reextract '*' --attributes \
        --canonical-version 2.2 --out build/real22 --jobs 2
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.data.store import read_graphs, write_graphs
from narbench.zoo.assemble import _zoo_versions
from narbench.zoo.results import FAILED, OK, read_result
from narbench.zoo.spec import Spec

PATCH_FILE = "real-1.0-reextracted.narg"
#: `ops` that selects every graph (2.2: every graph is re-extracted with design attributes).
ALL = "*"


def spec_of(name: str, meta: dict[str, Any]) -> Spec:
    """The build spec a 1.0 graph was extracted from (its name is the spec's key; checked)."""
    variant = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (meta.get("variant") or {}).items()))
    spec = Spec(name.split("/", 1)[0], str(meta["model"]), str(meta["task"]), variant)
    if spec.key != name:
        raise ValueError(f"graph {name!r}: its meta gives spec {spec.key!r}, not its own name")
    return spec


def select(source: str | os.PathLike, ops: Sequence[str]) -> list[tuple[Any, Spec]]:
    """(1.0 graph, its spec) for every graph of the file `source` holding one of the raw `ops`, in file order."""
    graphs, vocab, _, _ = read_graphs(source)
    return _select(graphs, vocab, ops, source)


def _select(graphs: list, vocab: list[str], ops: Sequence[str], source: Any) -> list[tuple[Any, Spec]]:
    if list(ops) == [ALL]:
        return [(g, spec_of(g.name, g.meta)) for g in graphs]
    missing = [op for op in ops if op not in vocab]
    if missing:
        raise ValueError(f"{source}: no graph holds {', '.join(missing)} (its vocabulary has {len(vocab)} ops)")
    wanted = {list(vocab).index(op) for op in ops}
    return [(g, spec_of(g.name, g.meta)) for g in graphs if wanted.intersection(g.ops.tolist())]


def reextract(source: str | os.PathLike, out: str | os.PathLike, ops: Sequence[str], *, jobs: int = 1,
              timeout: float = 180.0, mem_limit_gb: float | None = 8.0, quiet: bool = False,
              retry_failed: bool = False) -> dict[str, Any]:
    """Re-extract every graph of `source` holding one of `ops`; write the patch file; return a summary.

    A spec that fails now (it extracted for 1.0) is reported and left out of the patch, so its
    1.0 graph stays; the summary counts them (`failed`). Done specs are skipped (the build is resumable);
    `retry_failed` runs the failed ones again (2.3's re-extraction: 201 of 12,286 failed in long-lived
    workers with oneDNN's "could not create a primitive" and all extracted on a retry; a task head or
    variant whose default failed needs a second retry, after its default)."""
    import torch

    from narbench.zoo.build import build_real
    from narbench.zoo.extract import RawGraph

    out = Path(out)
    graphs_1, vocab_1, header_1, _ = read_graphs(source)
    chosen = _select(graphs_1, vocab_1, ops, source)
    build_real(out, jobs=jobs, specs=[s for _, s in chosen], assemble=False, timeout=timeout,
               mem_limit_gb=mem_limit_gb, quiet=quiet, retry_failed=retry_failed)
    patched, failed, changed = [], Counter(), 0
    for g, spec in chosen:
        res = read_result(out, spec)
        if res is None or res.get("status") != OK:
            failed["missing" if res is None else res.get("reason") if res.get("status") == FAILED else res["status"]] += 1
            continue
        raw = RawGraph.from_json(res["graph"])
        changed += raw.ops != [vocab_1[i] for i in g.ops.tolist()] or not np.array_equal(raw.edges, g.edges)
        meta = {**g.meta, "reextracted": {"torch": torch.__version__.split("+")[0], "seconds": res.get("seconds")}}
        patched.append((g, raw, meta))
    vocab = sorted({op for _, raw, _ in patched for op in raw.ops})
    index = {op: i for i, op in enumerate(vocab)}
    arch = [ArchGraph(ops=[index[o] for o in raw.ops], edges=raw.edges, name=g.name, family=g.family, coarse=g.coarse,
                      source=g.source, meta=meta) for g, raw, meta in patched]
    from narbench.zoo.attributes import ATTRIBUTES_ENV
    from narbench.zoo.functions import FUNCTIONS_ENV

    header = {"name": "real-reextracted", "version": header_1.get("version"), "generator": "narbench.zoo.reextract",
              "reextracted_ops": list(ops), "versions": _zoo_versions(), "selected": len(chosen), "patched": len(patched),
              "design_attributes": os.environ.get(ATTRIBUTES_ENV, "") == "1",
              "through_functions": os.environ.get(FUNCTIONS_ENV, "") == "1"}
    sha = write_graphs(out / PATCH_FILE, arch, vocab, header)
    return {"path": str(out / PATCH_FILE), "sha256": sha, "selected": len(chosen), "patched": len(patched),
            "raw_changed": int(changed), "failed": dict(failed)}


def overlay(base: str | os.PathLike, top: str | os.PathLike, out: str | os.PathLike) -> dict[str, Any]:
    """One patch file from two: the graphs of `base` (a full re-extraction, e.g. 2.2's) with those of `top`
    (a re-extraction of some of them, e.g. 2.3's graphs holding a convolution) replacing the same names,
    in `base`'s order and with `top`'s metas; `top`'s header, plus what each side gave. A name of `top`
    that `base` lacks is an error (both patch the same 1.0 graphs)."""
    gb, vb, hb, db = read_graphs(base)
    gt, vt, ht, dt = read_graphs(top)
    upper = {g.name: g for g in gt}
    unknown = sorted(set(upper) - {g.name for g in gb})
    if unknown:
        raise ValueError(f"{top}: {len(unknown)} graph(s) not in {base}, e.g. {unknown[0]!r}")
    raws = [([vt[o] for o in upper[g.name].ops.tolist()], upper[g.name]) if g.name in upper
            else ([vb[o] for o in g.ops.tolist()], g) for g in gb]
    vocab = sorted({op for ops, _ in raws for op in ops})
    index = {op: i for i, op in enumerate(vocab)}
    arch = [ArchGraph(ops=[index[o] for o in ops], edges=g.edges, name=g.name, family=g.family, coarse=g.coarse,
                      source=g.source, meta=g.meta) for ops, g in raws]
    header = {**ht, "overlay": {"base": {"sha256": db, "graphs": len(gb), "header": hb},
                                "top": {"sha256": dt, "graphs": len(gt)}}}
    sha = write_graphs(out, arch, vocab, header)
    return {"path": str(out), "sha256": sha, "graphs": len(arch), "from_top": len(upper), "from_base": len(gb) - len(upper)}
