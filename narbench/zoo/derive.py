"""`real` 2.0 from the raw graphs of the 1.0 extraction: canonical graphs, taxonomy labels, dedup.

`real-1.0.narg` keeps every graph as torch recorded it (raw autograd names, normalised only by
`narbench.zoo.extract`). Labels come from the taxonomy table (`narbench.datasets.taxonomy`: family per
paper, coarse label, model identity). Canonicalisation (`narbench.data.canonical`) reads nothing but op names and
edges, so the canonical graph of a 1.0 graph is the canonical graph a fresh extraction of the same
spec gives (`benchmarks/validity/bench_reextract.py` checks that under other torch versions); deriving 2.0
from 1.0 therefore equals `narbench build-real` with canonical assembly, without hours of
re-extraction. Except for the 1,227 graphs of 1.0 that hold a `CopySlices`: a fresh extraction
records the in-place op it wraps (`narbench.zoo.inplace.InPlaceOnViews`), which 1.0 did not keep;
their new form needs a re-extraction (docs/canonical-graphs.md, "`real` 2.1"). The 1.0 file lists graphs in spec order (the first spec of each graph), so keeping
the first of each canonical duplicate keeps the first spec, as assembly does.

    narbench build-real --from narbench/data/real-1.0.narg --out build/real2
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

from narbench.data.canonical import DEFAULT_VERSION, canonical_vocabulary, check_version
from narbench.data.canonical_rules import rules_sha256
from narbench.data.ops import OPS_VERSION, table_sha256
from narbench.data.store import read_graphs, write_graphs
from narbench.zoo.assemble import DATASET_NAME, DATASET_VERSION, dedup_graphs, taxonomy_labels

#: canonical versions whose `real` keeps one family per graph (the first spec's): 2.1 and 2.2, pinned as shipped
SINGLE_FAMILY_VERSIONS = ("2.1", "2.2")
#: what a file derived with `keep_families` says in its header (`families`)
FAMILIES_RULE = ("a graph keeps every family and model identity of the specs whose canonical graph it is "
                 "(meta families / identities, the first spec's first: its family, the primary one); isomorphic "
                 "graphs share their families")

#: (name, family, source, meta) -> (family, meta): the labels of a graph (the taxonomy)
Relabel = Callable[[str, str, str, dict[str, Any]], tuple[str, dict[str, Any]]]


def _canonical(args: tuple[list[str], Any] | tuple[list[str], Any, str]):
    """The canonical graph of (raw op names, edges[, canonical version: default 2.1])."""
    from narbench.zoo.extract import RawGraph

    ops, edges, *version = args
    return RawGraph(ops=ops, edges=edges).canonical(*version)


def derive(source: str | os.PathLike, out: str | os.PathLike, *, relabel: Relabel | None = None,
           patch: str | os.PathLike | None = None, jobs: int = 1,
           progress: Callable[[int, int], None] | None = None,
           canonical_version: str = DEFAULT_VERSION, keep_families: bool | None = None) -> dict[str, Any]:
    """Write `<out>/real-<version>.narg` from the 1.0 graph file `source`; return a summary.

    `patch`: a raw graph file of re-extracted graphs (`narbench.zoo.reextract`) that replace the
    graphs of `source` with their names (every name must be in `source`). `canonical_version`:
    the canonical rules (`narbench.data.canonical.VERSIONS`), which is also the dataset's version
    (2.1: the shipped dataset; 2.2: design-level rules, read from a patch with attributes).
    `keep_families` (default: from real 2.3 on, canonical versions after 2.2): a graph that specs of several
    families share keeps all of them (`meta["families"]`, `meta["identities"]`; `assemble.dedup_graphs`)
    and the header says so (`FAMILIES_RULE`); off, the file is what 2.1 and 2.2 were (the first spec's
    family only)."""
    check_version(canonical_version)
    if keep_families is None:
        keep_families = canonical_version not in SINGLE_FAMILY_VERSIONS
    graphs, work, header, digest, patched = raw_work(source, patch)
    work = [(ops, edges, canonical_version) for ops, edges in work]
    canon = []
    with ProcessPoolExecutor(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        for i, c in enumerate(pool.map(_canonical, work, chunksize=64) if pool else map(_canonical, work)):
            canon.append(c)
            if progress and (i + 1) % 1000 == 0:
                progress(i + 1, len(work))
    items = []
    relabel = relabel or _by_taxonomy
    for g, c in zip(graphs, canon):
        family, meta = relabel(g.name, g.family, g.source, dict(g.meta))
        items.append((g.name, c, family, g.source, meta))
    new_vocab = list(canonical_vocabulary(canonical_version))
    version = DATASET_VERSION if canonical_version == DEFAULT_VERSION else canonical_version
    kept, _, cross = dedup_graphs(items, new_vocab, keep_families=keep_families)
    united = _unite_isomorphic(kept) if keep_families else 0
    new_header = {
        "name": DATASET_NAME, "version": version, "generator": "narbench.zoo.derive",
        "versions": header.get("versions", {}), "num_specs": header.get("num_specs"),
        "num_extracted": header.get("num_extracted"),
        "ops": ({"version": OPS_VERSION, "table_sha256": table_sha256()} if canonical_version == DEFAULT_VERSION else
                {"version": canonical_version, "table_sha256": table_sha256(), "rules_sha256": rules_sha256(canonical_version)}),
        "taxonomy_sha256": _taxonomy_sha256(),
        "derived_from": {"name": header.get("name"), "version": header.get("version"), "sha256": digest,
                         "graphs": len(graphs)},
    }
    if patched is not None:
        new_header["patched_with"] = patched
    if keep_families:
        new_header["families"] = FAMILIES_RULE
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{DATASET_NAME}-{version}.narg"
    sha = write_graphs(path, kept, new_vocab, new_header)
    unknown: Counter = Counter()
    for g in kept:
        unknown.update(g.meta.get("unknown_ops", {}))
    return {"path": str(path), "sha256": sha, "source_graphs": len(graphs), "distinct": len(kept),
            "duplicates_merged": len(graphs) - len(kept),
            "cross_family_duplicates": dict(cross.most_common()), "unknown_ops": dict(unknown),
            **({"multi_family": sum(len(g.families) > 1 for g in kept), "families_from_isomorphic": united}
               if keep_families else {}),
            "nodes_before": int(sum(g.num_nodes for g in graphs)), "nodes_after": int(sum(g.num_nodes for g in kept)),
            **({"patched": patched["graphs"]} if patched else {})}


def raw_work(source: str | os.PathLike, patch: str | os.PathLike | None = None):
    """(graphs of `source`, per graph its (raw op names, edges) with `patch` applied, header, sha256,
    {"sha256", "graphs"} of the patch or None): what `derive` canonicalises."""
    graphs, vocab, header, digest = read_graphs(source)
    work, patched = apply_patch(graphs, vocab, patch)
    return graphs, work, header, digest, patched


def apply_patch(graphs: list, vocab: list[str], patch: str | os.PathLike | None):
    """(per graph of `graphs` its (raw op names, edges), the graphs of the raw file `patch` replacing
    those of the same name; {"sha256", "graphs"} of the patch or None). Every patch name must be
    one of `graphs`."""
    work = [([vocab[o] for o in g.ops.tolist()], g.edges) for g in graphs]
    if patch is None:
        return work, None
    pgraphs, pvocab, _, pdigest = read_graphs(patch)
    where = {g.name: i for i, g in enumerate(graphs)}
    unknown = [g.name for g in pgraphs if g.name not in where]
    if unknown:
        raise ValueError(f"{patch}: {len(unknown)} graph(s) not in the graphs it patches, e.g. {unknown[0]!r}")
    for g in pgraphs:
        work[where[g.name]] = ([pvocab[o] for o in g.ops.tolist()], g.edges)
    return work, {"sha256": pdigest, "graphs": len(pgraphs)}


def _unite_isomorphic(graphs: list) -> int:
    """Isomorphic kept graphs share their families (`narbench.datasets.isomorphism.unite_families`)."""
    from narbench.datasets.isomorphism import unite_families

    return unite_families(graphs)


def _taxonomy_sha256() -> str:
    from narbench.datasets import taxonomy

    return taxonomy.table_sha256()


def _by_taxonomy(name: str, family: str, source: str, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return taxonomy_labels(source, str(meta.get("model") or name.split("/")[1]), family, meta)
