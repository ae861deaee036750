"""Compute `gps`' random-walk encodings of every graph of a dataset once, in JOBS processes, into narbench's
on-disk cache (`narbench.train.encodingcache`), before a lease's `gps` runs (issue 62).

A run computes the encodings it lacks in `--threads` processes (one, in a sweep of many runs side by side):
28 s for 1,024 real graphs on the lent H200's cores (2026-12-04), so nine `gps` runs would each spend minutes
computing the same 17,505 arrays. Run once before them, they all read the cache (the same float32 values). On this
2-core machine (2026-12-04): 326 s in 2 processes for real 2.3, a 141 MB cache (too large to carry to a lease: it is
made there, in about a minute on 16 cores by that rate).

    python benchmarks/gpu/warm_encodings.py --dataset real-2.3 [--jobs 16]
"""

from __future__ import annotations

import argparse
import os
import time

from narbench.core import registry
from narbench.data.dataset import load_dataset
from narbench.train.profiles import get_profile


def warm(ds, jobs: int) -> float:
    """Every graph's encoding of `ds` computed (or read) and kept in the cache; the seconds it took."""
    enc = registry.load("encoder", "gps")(len(ds.vocab), len(ds.families), get_profile("smoke"))
    t = time.perf_counter()
    enc.positional_encodings(ds.graphs, jobs=jobs)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="real")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    ds = load_dataset(args.dataset)
    seconds = warm(ds, args.jobs)
    print(f"gps encodings of {len(ds.graphs)} {args.dataset} graphs in the cache: {seconds:.1f} s, {args.jobs} processes",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
