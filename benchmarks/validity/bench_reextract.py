"""Re-extract a sample of shipped `real` graphs with the installed torch and zoos; count differences.

`real` 1.0 holds the raw graphs as torch 2.14.1 recorded them; `real` 2.0 their canonical graphs.
Under another torch, raw graphs may differ (2.15 names the view after an n-d Linear
`UnsafeViewBackward0`); canonical graphs should not. Needs the zoo extra (timm, torchvision,
transformers) in the running environment:

    python -m benchmarks.validity.bench_reextract --per-source 40
    reextract torch=2.14.1 sampled=120 raw_differ=5 canonical_differ=5 failed=0 seconds=62

Prints one summary line, then one line per differing or failed graph. The 5 are graphs with an
in-place op on a view, which 1.0 stored as `CopySlices` and a fresh extraction records as the op
(below): a `real` 2.1 re-extraction closes that, a torch version does not open it.

`--copyslices` samples only graphs whose 1.0 raw graph holds a `CopySlices` (an in-place op on a
view, which the extraction now records as the op: `narbench.zoo.inplace.InPlaceOnViews`); their
canonical graphs are expected to differ from 2.0 where the op shows, and the per-graph seconds
estimate the cost of re-extracting them all (docs/canonical-graphs.md, "In-place ops on views").

`--save FILE` writes each sampled graph's canonical signature (sha256) to FILE; `--against FILE`
counts the sampled graphs whose canonical graph differs from the one saved there: fresh
extractions under two torch versions compared with each other, not with the shipped 2.0
(which keeps what 1.0 recorded):

    torch-2.14/bin/python -m benchmarks.validity.bench_reextract --save /tmp/sig-2.14.json
    torch-2.15/bin/python -m benchmarks.validity.bench_reextract --against /tmp/sig-2.14.json
    reextract torch=2.15.0 sampled=120 raw_differ=36 canonical_differ=5 failed=0 seconds=62 against_differ=0
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import time
from pathlib import Path

from benchmarks.timing import ROOT


def _key(name: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-source", type=int, default=40, help="graphs sampled per installed zoo")
    ap.add_argument("--seed", type=int, default=0, help="sample seed (a hash order of graph names)")
    ap.add_argument("--copyslices", action="store_true",
                    help="sample only graphs whose 1.0 raw graph holds a CopySlices node")
    ap.add_argument("--save", metavar="FILE", help="write the sampled canonical signatures (JSON) here")
    ap.add_argument("--against", metavar="FILE", help="count canonical differences from the signatures saved in FILE")
    args = ap.parse_args(argv)

    import json

    import numpy as np
    import torch

    from narbench.data.canonical import canonical_vocabulary
    from narbench.data.store import read_graphs
    from narbench.datasets.real import ARTIFACT
    from narbench.zoo.derive import apply_patch
    from narbench.zoo.reextract import spec_of
    from narbench.zoo.specgraph import extract_spec

    data = ROOT / "narbench" / "data"
    v2, vocab2, _, _ = read_graphs(data / ARTIFACT)
    v1, vocab1, _, _ = read_graphs(data / "real-1.0.narg")
    copyslices = list(vocab1).index("CopySlices")
    held_copyslices = {g.name for g in v1 if copyslices in g.ops}
    # the raw graphs 2.1 derives from: 1.0's, with its re-extracted graphs (narbench.zoo.reextract)
    raw_by_name = {g.name: w for g, w in zip(v1, apply_patch(v1, vocab1, data / "real-1.0-reextracted.narg")[0])}
    index2 = {op: i for i, op in enumerate(canonical_vocabulary())}
    assert list(vocab2) == list(canonical_vocabulary()), f"{ARTIFACT} was built with another op table"

    sampled = raw_differ = canon_differ = failed = 0
    lines = []
    saved = json.loads(Path(args.against).read_text())["signatures"] if args.against else None
    signatures: dict[str, str] = {}
    t0 = time.perf_counter()
    for source in ("timm", "torchvision", "transformers"):
        if importlib.util.find_spec(source) is None:
            print(f"# {source} not installed: skipped", file=sys.stderr)
            continue
        pool = sorted((g for g in v2 if g.source == source and (not args.copyslices or g.name in held_copyslices)),
                      key=lambda g: _key(g.name, args.seed))
        for g in pool[: args.per_source]:
            sampled += 1
            try:
                raw, _ = extract_spec(spec_of(g.name, g.meta))
            except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
                failed += 1
                lines.append(f"failed {g.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")
                continue
            old_ops, old_edges = raw_by_name[g.name]
            if raw.ops != old_ops or not np.array_equal(raw.edges, old_edges):
                raw_differ += 1
            c = raw.canonical()
            signatures[g.name] = c.signature()
            if saved is not None and saved.get(g.name) != signatures[g.name]:
                lines.append(f"differs from --against {g.name}" + ("" if g.name in saved else " (not saved there)"))
            ops = np.array([index2.get(op, index2["other"]) for op in c.ops], dtype=np.int64)
            if not (np.array_equal(ops, g.ops) and np.array_equal(c.edges, g.edges)):
                canon_differ += 1
                lines.append(f"canonical differs {g.name}: {len(c.ops)} vs {g.num_nodes} nodes")
    print(f"reextract torch={torch.__version__.split('+')[0]} sampled={sampled} raw_differ={raw_differ} "
          f"canonical_differ={canon_differ} failed={failed} seconds={time.perf_counter() - t0:.0f}"
          f"{' (copyslices sample)' if args.copyslices else ''}"
          + (f" against_differ={sum(1 for n, sig in signatures.items() if saved.get(n) != sig)}" if saved is not None else ""))
    if args.save:
        Path(args.save).write_text(json.dumps({"torch": torch.__version__, "signatures": signatures}, indent=0) + "\n")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
