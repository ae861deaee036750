"""Canonical 2.1 against 2.2 on the cross-implementation pairs: does a reimplementation find its zoo twin?

For every row of `narbench/data/crossimpl.csv` with a `zoo_model`, the reimplementation (the
query) and that zoo model are extracted with design attributes (`narbench.zoo.extract.
DesignAttributes`) and canonicalised under both rule sets. The corpus is the zoo models the rows
name (one spec each: the first of `real-1.0.narg` under that model, or its default classification
spec where 1.0 keeps its graph under another model's name), so this is a small retrieval,
not the benchmark: per rule set it prints how many queries are isomorphic to their twin, the
WL-feature cosine to the twin (3 rounds, counts, 2048 dims: the `wl` floor's features), and
top-1 family accuracy and MRR of the first same-family corpus graph, ranked by that cosine.
It measures the rules alone (no training). Needs the zoo and crossimpl extras (and torch 2.14.1
to match the shipped raw graphs):

    python -m benchmarks.search.bench_rules22 [--limit N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

from benchmarks.timing import ROOT, line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="only the first N rows")
    ap.add_argument("--changes", action="store_true", help="list the queries whose isomorphism or top-1 changed")
    args = ap.parse_args(argv)
    os.environ["NARBENCH_DESIGN_ATTRIBUTES"] = "1"

    import numpy as np
    import torch

    from narbench.baselines.floors import wl_features
    from narbench.data.canonical import canonical_vocabulary
    from narbench.data.store import read_graphs
    from narbench.datasets.crossimpl import read_functions, read_table
    from narbench.zoo.crossimpl import _tuples, resolve
    from narbench.zoo.extract import extract_graph
    from narbench.zoo.reextract import spec_of
    from narbench.zoo.devices import try_devices
    from narbench.zoo.spec import Spec
    from narbench.zoo.specgraph import extract_spec

    t0 = time.time()
    rows = [r for r in read_table() if r.zoo_model][: args.limit]
    raw1, _, _, _ = read_graphs(ROOT / "narbench" / "data" / "real-1.0.narg")
    by_model = {}
    for g in raw1:  # "<source>/<model>/<task>[/variant]" -> the model's first spec
        key = "/".join(g.name.split("/")[:2])
        by_model.setdefault(key, g)

    functions = read_functions()

    def query_raw(row):  # as the crossimpl build extracts it: custom functions renamed by what they compute
        build = resolve(row.builder)

        def run(dev):
            with torch.device(dev):
                model = build(**{k: _tuples(v) for k, v in row.kwargs.items()})
            return extract_graph(model, torch.randn(*row.input_shape, device=dev)), {}

        raw = try_devices(["meta", "cpu"], run)[0]
        raw.ops = [functions.get(op, op) for op in raw.ops]
        return raw

    def zoo_spec(zoo_model):  # 1.0 keeps a graph under its first spec: a model whose graph another had is built
        g = by_model.get(zoo_model)
        if g is not None:
            return spec_of(g.name, g.meta), g.family
        source, model = zoo_model.split("/", 1)
        return Spec(source, model, "classification", ()), None

    queries, corpus, failed = [], {}, []
    for row in rows:
        try:
            q = query_raw(row)
            if row.zoo_model not in corpus:
                spec, family = zoo_spec(row.zoo_model)
                corpus[row.zoo_model] = (extract_spec(spec)[0], family or row.family)
        except Exception as e:  # noqa: BLE001 - reported
            failed.append(f"{row.identity}: {type(e).__name__}: {str(e)[:120]}")
            continue
        queries.append((row, q))
    names = sorted(corpus)
    line("rules22", queries=len(queries), corpus=len(names), failed=len(failed), seconds=f"{time.time() - t0:.0f}")
    outcome: dict[str, dict[str, tuple]] = {}
    for version in ("2.1", "2.2"):
        vocab = list(canonical_vocabulary(version))
        def arch(raw, name, family):
            return raw.canonical(version).to_arch_graph(vocab, name=name, family=family)
        cg = [arch(corpus[n][0], n, corpus[n][1]) for n in names]
        qg = [arch(q, r.identity, r.family) for r, q in queries]
        feats = wl_features(cg + qg, iterations=3)
        feats = feats / np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
        c, q = feats[: len(cg)], feats[len(cg):]
        sims = q @ c.T
        per = defaultdict(lambda: {"n": 0, "iso": 0, "twin": 0.0, "top1": 0, "rr": 0.0})
        for i, (row, _) in enumerate(queries):
            fam = np.array([g.family == row.family for g in cg])
            order = np.argsort(-sims[i], kind="stable")
            first_hit = int(np.nonzero(fam[order])[0][0]) + 1 if fam.any() else None
            j = names.index(row.zoo_model)
            iso = qg[i].ops.tolist() == cg[j].ops.tolist() and np.array_equal(qg[i].edges, cg[j].edges)
            outcome.setdefault(row.identity, {})[version] = (iso, names[order[0]], round(float(sims[i, j]), 3))
            for key in (row.package, "all"):
                p = per[key]
                p["n"] += 1
                p["iso"] += int(iso)
                p["twin"] += float(sims[i, j])
                p["top1"] += int(first_hit == 1)
                p["rr"] += 1.0 / first_hit if first_hit else 0.0
        for key in sorted(per, key=lambda k: (k == "all", k)):
            p = per[key]
            print(f"  {version} {key:22s} n={p['n']:3d} isomorphic={p['iso']:3d} cos_to_twin={p['twin'] / p['n']:.3f} "
                  f"top1_family={p['top1'] / p['n']:.3f} mrr={p['rr'] / p['n']:.3f}")
    if args.changes:
        for ident, o in outcome.items():
            if o["2.1"][:2] != o["2.2"][:2]:
                print(f"  changed {ident}: 2.1 (isomorphic, top-1, cos to twin) {o['2.1']} -> 2.2 {o['2.2']}")
    for failure in failed:
        print("  failed:", failure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
