"""Assembly of the `real` dataset from the build's results: dedup, one graph file, the summary."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from narbench.data.canonical import canonical_vocabulary
from narbench.data.graph import ArchGraph
from narbench.data.store import atomic_write_bytes
from narbench.zoo.results import FAILED, NOT_APPLICABLE, OK, read_result
from narbench.zoo.spec import Spec

DATASET_NAME = "real"
DATASET_VERSION = "2.1"


#: Graphs above this many nodes are left out of the dataset (recurrent models unrolled over the
#: dummy sequence at 48 layers reach 10^5 nodes; no graph encoder of the benchmark handles them).
MAX_NODES = 50_000


def summarize(out: Path, selected: Sequence[Spec], *, assemble: bool = True,
              max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """Read the selected specs' results; dedup; write the dataset file; return the summary."""
    from narbench.zoo.extract import RawGraph

    status: Counter = Counter()
    failed: Counter = Counter()
    failed_detail: Counter = Counter()
    failed_kind: Counter = Counter()
    seconds: dict[str, list[float]] = defaultdict(list)
    devices: Counter = Counter()
    raws: list[tuple[Spec, RawGraph, dict[str, Any]]] = []
    failures = []
    for s in selected:
        res = read_result(out, s)
        if res is None:
            status["missing"] += 1
            continue
        status[res["status"]] += 1
        if res["status"] == OK and len(res["graph"]["ops"]) > max_nodes:
            status["too-large"] += 1
            continue
        if res["status"] == OK:
            raws.append((s, RawGraph.from_json(res["graph"]), res.get("info", {})))
            seconds[s.source].append(res.get("seconds", 0.0))
            devices[f"{s.source}:{res.get('info', {}).get('device', '?')}"] += 1
        elif res["status"] == FAILED:
            failed[res["reason"]] += 1
            failed_kind["variant" if s.variant else "default"] += 1
            err = res.get("error", "")
            failed_detail[f"{res['reason']}: {err.split(':')[0] if res['reason'] == 'exception' else ''}".rstrip(": ")] += 1
            failures.append((s.key, res["reason"], err.replace("\n", " ").replace("\t", " ")))
    atomic_write_bytes(out / "failures.tsv", "".join(f"{k}\t{r}\t{e}\n" for k, r, e in failures).encode())

    vocab = list(canonical_vocabulary())
    items = []
    untaxed: Counter = Counter()
    for s, raw, info in raws:
        meta = {"model": s.model, "task": s.task, "variant": {k: v for k, v in s.variant},
                "device": info.get("device"), "params": info.get("params"), "shrunk": bool(info.get("shrunk", False))}
        family, meta = taxonomy_labels(s.source, s.model, s.family, meta)
        if "identity" not in meta:
            untaxed[f"{s.source}/{s.model}"] += 1
        items.append((s.key, raw.canonical(), family, s.source, meta))
    graphs, dup_count, cross_family = dedup_graphs(items, vocab)

    def pct(vals: list[float], q: float) -> float:
        vals = sorted(vals)
        return round(vals[min(len(vals) - 1, int(q * len(vals)))], 3) if vals else 0.0

    sizes = sorted(g.num_nodes for g in graphs)
    summary: dict[str, Any] = {
        "selected": len(selected),
        "status": dict(status),
        "extracted": status[OK],
        "not_applicable": status[NOT_APPLICABLE],
        "too_large": status["too-large"],
        "failed": dict(failed),
        "failed_detail": dict(failed_detail.most_common()),
        "failed_default_vs_variant": dict(failed_kind),
        "distinct": len(graphs),
        "duplicates": dup_count,
        "cross_family_duplicates": dict(cross_family.most_common()),
        "not_in_taxonomy": dict(untaxed.most_common()),
        "num_ops": len(vocab),
        "families": dict(Counter(g.family for g in graphs).most_common()),
        "num_families": len({g.family for g in graphs}),
        "coarse": dict(Counter(g.coarse for g in graphs).most_common()),
        "per_source": dict(Counter(g.source for g in graphs)),
        "devices": dict(devices),
        "seconds": {src: {"n": len(v), "total": round(sum(v), 1), "median": pct(v, 0.5), "p90": pct(v, 0.9),
                          "max": pct(v, 1.0)} for src, v in seconds.items()},
        "nodes": {"median": sizes[len(sizes) // 2] if sizes else 0, "p90": sizes[int(0.9 * len(sizes))] if sizes else 0,
                  "max": sizes[-1] if sizes else 0},
    }
    if assemble and graphs:
        from narbench.data.store import write_graphs

        header = {"name": DATASET_NAME, "version": DATASET_VERSION, "generator": "narbench.zoo.build",
                  "versions": _zoo_versions(), "num_specs": len(selected), "num_extracted": status[OK]}
        path = out / f"{DATASET_NAME}-{DATASET_VERSION}.narg"
        summary["sha256"] = write_graphs(path, graphs, vocab, header)
        summary["path"] = str(path)
    return summary


def dedup_graphs(items: Iterable[tuple[str, Any, str, str, dict[str, Any]]],
                 vocab: Sequence[str], *, keep_families: bool = False) -> tuple[list[ArchGraph], int, Counter]:
    """Distinct graphs of `(name, canonical RawGraph, family, source, meta)` items, in their order.

    A `meta["coarse"]` (the taxonomy's) is the graph's coarse label; without one the label is
    derived from the graph (`coarse_label`).

    A graph identical to an earlier one (same content hash) is dropped and counted on the kept
    one (`meta["duplicates"]`: how many other specs gave it); pairs of families that met this way
    are counted in the third value. Canonical graphs carry their unknown raw names in
    `meta["unknown_ops"]`, kept on the graph.

    `keep_families` (real 2.3): the kept graph also records every family and model identity of the
    items merged into it (`meta["families"]`, `meta["identities"]`: the kept spec's first, then in item
    order, each once), so dedup never drops a family; its `family` stays the first item's (the primary
    family, what earlier versions kept)."""
    index = {op: i for i, op in enumerate(vocab)}
    graphs: list[ArchGraph] = []
    first_by_hash: dict[str, ArchGraph] = {}
    cross_family: Counter = Counter()
    dup_count = 0
    for name, raw, family, source, meta in items:
        meta = dict(meta)
        coarse = meta.pop("coarse", None)
        if raw.meta.get("unknown_ops"):
            meta["unknown_ops"] = raw.meta["unknown_ops"]
        extra = meta.pop("duplicates", 0)
        # the coarse rule walks the graph: compute it only for graphs that are kept
        g = raw.to_arch_graph(index, name=name, family=family, coarse="", source=source, meta=meta)
        h = g.content_hash()
        if h in first_by_hash:
            keep = first_by_hash[h]
            keep.meta["duplicates"] = keep.meta.get("duplicates", 0) + 1 + extra
            dup_count += 1 + extra
            if keep.family != g.family:
                cross_family[f"{keep.family}|{g.family}"] += 1
            if keep_families:
                _add_labels(keep.meta, g.family, meta.get("identity"))
            continue
        if extra:
            g.meta["duplicates"] = extra
        if keep_families:
            g.meta["families"], g.meta["identities"] = [], []
            _add_labels(g.meta, family, meta.get("identity"))
        g.coarse = coarse or raw.coarse()
        first_by_hash[h] = g
        graphs.append(g)
    return graphs, dup_count, cross_family


def _add_labels(meta: dict[str, Any], family: str, identity: str | None) -> None:
    """Append `family` and `identity` to a kept graph's `meta["families"]` / `meta["identities"]` unless there."""
    if family not in meta["families"]:
        meta["families"].append(family)
    if identity and identity not in meta["identities"]:
        meta["identities"].append(str(identity))


def taxonomy_labels(source: str, model: str, family: str, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(family, meta) of a spec by the taxonomy table (`narbench.datasets.taxonomy`): its family, coarse
    label (`meta["coarse"]`) and model identity (`meta["identity"]`). A model the table does not
    list keeps its zoo family and no identity (the build's summary lists it: add it to the table)."""
    from narbench.datasets import taxonomy

    try:
        row = taxonomy.lookup(source, model)
    except taxonomy.UnknownModelError:
        return family, meta
    return row.family, {**meta, "coarse": row.coarse, "identity": row.identity}


def _zoo_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "timm", "torchvision", "transformers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def print_summary(summary: dict[str, Any], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title="real dataset build", show_header=False)
    t.add_row("specs selected", str(summary["selected"]))
    t.add_row("extracted", str(summary["extracted"]))
    t.add_row("not applicable", str(summary["not_applicable"]))
    if summary.get("too_large"):
        t.add_row(f"too large (> {MAX_NODES} nodes)", str(summary["too_large"]))
    t.add_row("failed", ", ".join(f"{k}={v}" for k, v in summary["failed"].items()) or "0")
    if summary.get("failed_default_vs_variant"):
        t.add_row("failed specs", ", ".join(f"{k}={v}" for k, v in summary["failed_default_vs_variant"].items()))
    t.add_row("duplicates removed", str(summary["duplicates"]))
    t.add_row("distinct graphs", f"[bold]{summary['distinct']}[/]")
    t.add_row("op types", str(summary["num_ops"]))
    t.add_row("families", str(summary["num_families"]))
    t.add_row("coarse", ", ".join(f"{k}={v}" for k, v in summary["coarse"].items()))
    t.add_row("per source", ", ".join(f"{k}={v}" for k, v in summary["per_source"].items()))
    t.add_row("nodes", ", ".join(f"{k}={v}" for k, v in summary["nodes"].items()))
    for src, s in summary["seconds"].items():
        t.add_row(f"seconds {src}", ", ".join(f"{k}={v}" for k, v in s.items()))
    if summary.get("path"):
        t.add_row("written", f"{summary['path']} (sha256 {summary['sha256'][:16]}...)")
    console.print(t)
    if summary["failed_detail"]:
        ft = Table(title="failures by reason")
        ft.add_column("reason")
        ft.add_column("count", justify="right")
        for k, v in list(summary["failed_detail"].items())[:15]:
            ft.add_row(k, str(v))
        console.print(ft)
    fams = list(summary["families"].items())
    if fams:
        console.print("top families: " + ", ".join(f"{k}={v}" for k, v in fams[:20])
                      + (f" ... ({len(fams)} in all)" if len(fams) > 20 else ""))
