"""Motif sampling time per graph (median, max) for the `motif` splitter.

Graphs: the test-style ResNet-like stack scaled to ~500 nodes, a transformer-like graph of
~8,000 nodes (autograd-style view/transpose/dropout ops), and 200 NAS graphs from
`narbench.datasets.nas.generate` when that module exists. Times cover `split` (topological order,
eq. 2 encoding, segmentation, parts and macro edges) and `split_with_keys` (plus the part keys).

    python -m benchmarks.speed.bench_motif [--repeats 20] [--nas 200]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time

from benchmarks.timing import ROOT
from narbench.splitters.motif import MotifSplitter


def _builders():
    """The synthetic architecture builders of tests/splitters/synthetic.py (one definition)."""
    spec = importlib.util.spec_from_file_location("_splitter_tests", ROOT / "tests" / "splitters" / "synthetic.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _time(fn, graphs, repeats: int) -> list[float]:
    out = []
    for g in graphs:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(g)
            out.append(time.perf_counter() - t0)
    return out


def _row(name: str, graphs, repeats: int, sp: MotifSplitter) -> None:
    sp.split(graphs[0])  # warm-up (imports, numpy dispatch)
    t_split = _time(sp.split, graphs, repeats)
    t_keys = _time(sp.split_with_keys, graphs, repeats)
    parts = [sp.split(g).num_parts for g in graphs]
    nodes = [g.num_nodes for g in graphs]
    ms = lambda xs: f"{1e3 * statistics.median(xs):8.2f} {1e3 * max(xs):8.2f}"  # noqa: E731
    print(
        f"{name:<22} {len(graphs):>5} {min(nodes):>6}-{max(nodes):<6} "
        f"{ms(t_split)}   {ms(t_keys)}   {min(parts)}-{max(parts)}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20, help="timed runs per single graph")
    ap.add_argument("--nas", type=int, default=200, help="NAS graphs to time (0: skip)")
    ap.add_argument("--steps", type=int, default=MotifSplitter.Config.steps)
    args = ap.parse_args(argv)
    sp = MotifSplitter(steps=args.steps)
    b = _builders()
    print(f"motif splitter {sp.params()}")
    print(f"{'graph':<22} {'count':>5} {'nodes':>13} {'split ms (median, max)':>18}   "
          f"{'+keys ms (median, max)':>18}   parts")
    _row("resnet-like (50 blk)", [b.resnet_like(50)], args.repeats, sp)
    _row("resnet-like proj (48)", [b.resnet_like(48, projection_every=4)], args.repeats, sp)
    _row("transformer (210 blk)", [b.transformer_like(210, fine=True)], max(1, args.repeats // 4), sp)
    try:
        from narbench.datasets.nas import generate
    except ImportError:
        print("narbench.datasets.nas.generate not available: NAS row skipped")
    else:
        if args.nas > 0:
            per_class = max(1, -(-args.nas // 10))
            graphs = generate(seed=0, n_classes=10, per_class=per_class)[0][: args.nas]
            _row(f"nas ({len(graphs)} graphs)", graphs, 1, sp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
