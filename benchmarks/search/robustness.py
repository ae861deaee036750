"""Search robustness: where a corpus graph ranks when it is searched after a small edit (issue 59 item 4).

    python -m benchmarks.search.robustness                         # 1,000 graphs per edit kind and size
    python -m benchmarks.search.robustness --quick                 # 50 graphs, 200 resamples: a smoke run
    python -m benchmarks.search.robustness --graphs 100 --out r.csv  # (or r.json) every figure to a file

Runs on the corpus only: the `real` graphs the index holds (validation-style data), never the wild set
(docs/wild.md) nor the `crossimpl` queries, so it may be used to choose an index. For each edit kind of
`narbench.data.edits` (remove nodes, insert nodes, drop a block, duplicate a block, swap activations) and size
(1-5 nodes) it edits `--graphs` corpus graphs (drawn in one seeded order; a graph that cannot take an edit, e.g.
one without a block of that size, is passed over), searches each edited graph in each index as `narbench search`
searches a saved graph, in process and warm (`narbench.search_engine.ranks`: the graph mapped onto the index's
vocabulary, embedded by the index's encoder, every index graph ranked by the search's cosine), and records the
rank of the original graph (by name). Indexes: the shipped one and a `wl` index built by `narbench index build`
(read from `--wl`, default `$NARBENCH_CACHE/index/index-real-wl.nari`, built and written there when missing).

One line per index, kind (`all`: every kind pooled) and size: n, the median and the 90th percentile of the
original's rank (numpy's linear quantile), each with its 95% bootstrap percentile interval (`--boot` resamples
of the edited graphs, seeded), the share ranked first, and the tail (99th percentile and worst rank, where a
cliff of the similarity shows). `--check N` first searches N edited graphs through
`narbench.search` itself (each saved to a graph file) and stops if a rank differs. `--edit-from standard`
(or `unseen`) edits only that split's validation graphs (`validation_side`: the graphs the index choice,
benchmarks/search/choose_index.py, edits), drawn in the same seeded order; the index searched is still the one given.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchmarks.timing import line

SIZES = (1, 2, 3, 4, 5)
#: the validation sides whose graphs `--edit-from` edits (and the index choice validates on)
SIDES = ("standard", "unseen")


@dataclass(frozen=True)
class Side:
    """A validation side: positions (into the corpus graphs) of the split's training side (what its index
    holds), of the pool (what encoders are fitted on and validation queries search) and of the queries."""

    name: str
    index: np.ndarray
    pool: np.ndarray
    val: np.ndarray

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """(pool, val) as positions into `index` (the rows of the side's own dataset, `side_dataset`)."""
        where = {int(p): i for i, p in enumerate(self.index)}
        return tuple(np.array([where[int(p)] for p in part], dtype=np.int64) for part in (self.pool, self.val))


@dataclass(frozen=True)
class Cell:
    """The figures of one index, edit kind (or `all`) and size."""

    index: str
    kind: str
    size: int
    n: int
    median: float
    median_lo: float
    median_hi: float
    p90: float
    p90_lo: float
    p90_hi: float
    first: float
    p99: float  # the tail, where a cliff shows (no interval: a few graphs decide it)
    worst: int


def edited_graphs(graphs, vocab, kind: str, size: int, count: int, seed: int,
                  among: np.ndarray | None = None) -> tuple[list, list[int]]:
    """(`count` edited graphs, the corpus position of each one's original): the corpus (`among`: those
    positions only) in one seeded order (the same for every kind and size), each graph edited once with a
    stream seeded by (seed, kind, size)."""
    from narbench.data.edits import EDIT_KINDS, EditSpec, random_edit

    spec = EditSpec(kind, size)
    rng = np.random.default_rng([seed, EDIT_KINDS.index(kind), size])
    out, origin = [], []
    positions = np.arange(len(graphs)) if among is None else np.sort(np.asarray(among, dtype=np.int64))
    for pos in positions[np.random.default_rng(seed).permutation(len(positions))].tolist():
        edited = random_edit(graphs[pos], spec, vocab, rng)
        if edited is not None:
            out.append(edited.validate(len(vocab)))
            origin.append(pos)
            if len(out) == count:
                break
    return out, origin


def validation_side(ds, name: str, seed: int = 0) -> Side:
    """The validation side `name` of `ds`: the split's `quick` training graphs (6,000, seed 0, as `narbench run`
    takes them) held out into a pool and validation queries, `standard` by family (as `narbench run --curve`),
    `unseen` by model (the `unseen` split's own rule: from real 2.3 on, models joined by a graph they share are one
    group, `narbench.datasets.families.identity_groups`, which is the model itself before); positions into
    `ds.core_graphs`."""
    from narbench.datasets.families import identity_groups, whole_group_split
    from narbench.harness.curve import hold_out
    from narbench.harness.runner import select
    from narbench.train.profiles import get_profile

    train = select(ds, get_profile("quick"), seed, name)[0]
    if name == "standard":
        held = hold_out(train, ds.family_ids())
        pool, val = held.pool, held.val
    elif name == "unseen":
        graphs = [ds.graphs[i] for i in train]
        sub = whole_group_split([g.family for g in graphs], identity_groups(graphs), test_size=0.1, seed=seed)
        pool, val = train[sub.train], train[sub.test]
    else:
        raise ValueError(f"unknown side {name!r}; the sides are {', '.join(SIDES)}")
    return Side(name, np.sort(ds.get_split(name).train), np.sort(pool), np.sort(val))


def search_ranks(index, vocab, edited: list, originals: list[str]) -> np.ndarray:
    """The rank of each original (by name) among the hits of its edited graph, searched in `index`."""
    from narbench.search_engine.ranks import query_graph, ranks_of

    queries = [query_graph(g, vocab, index) for g in edited]
    emb = np.concatenate([index.embed(queries[lo: lo + 512]) for lo in range(0, len(queries), 512)])
    targets = [index.row_of(name) for name in originals]
    return ranks_of(index, emb, targets, [q.content_hash() for q in queries])


def interval(ranks: np.ndarray, q: float, boot: int, seed: int) -> tuple[float, float, float]:
    """(the `q` quantile of `ranks`, its 95% bootstrap percentile interval over `boot` resamples of the graphs)."""
    from scipy.stats import bootstrap

    x = ranks.astype(np.float64)
    point = float(np.quantile(x, q))
    if len(x) < 2 or boot < 1 or np.all(x == x[0]):
        return point, point, point
    res = bootstrap((x,), lambda s, axis: np.quantile(s, q, axis=axis), n_resamples=boot, method="percentile",
                    vectorized=True, rng=np.random.default_rng(seed), batch=100)
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)


def cell(name: str, kind: str, size: int, ranks: np.ndarray, boot: int, seed: int) -> Cell:
    med, p90 = interval(ranks, 0.5, boot, seed), interval(ranks, 0.9, boot, seed)
    first = float((ranks == 1).mean()) if len(ranks) else float("nan")
    tail = (float(np.quantile(ranks, 0.99)), int(ranks.max())) if len(ranks) else (float("nan"), 0)
    return Cell(name, kind, size, len(ranks), *med, *p90, first, *tail)


def print_cell(c: Cell) -> None:
    r = lambda x: f"{round(x, 1):g}"  # noqa: E731 - a rank to one decimal (a quantile may fall between ranks)
    line("robustness", index=c.index, kind=c.kind, size=c.size, n=c.n, median=r(c.median),
         median_ci=f"{r(c.median_lo)}-{r(c.median_hi)}", p90=r(c.p90), p90_ci=f"{r(c.p90_lo)}-{r(c.p90_hi)}",
         first=f"{c.first:.3f}", p99=r(c.p99), worst=c.worst)


def wl_index(path: Path | None, ds):
    """The `wl` index at `path` (default: the cache's), built on `ds` and written there when missing."""
    from narbench.search_engine.index import cache_path
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import load_index, write_index

    path = path or cache_path("wl", ds.name)
    if not path.is_file():
        print(f"building the wl index into {path}", file=sys.stderr, flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_index(build_index(IndexConfig(encoder="wl", dataset=ds.name, progress=False), dataset=ds), path)
    return load_index(None, path)


def check(indexes: dict, vocab, edited: list, originals: list[str], ranks: dict[str, np.ndarray], k: int = 200) -> int:
    """How many of `edited` rank their original as `narbench.search` does (each saved to a graph file and searched
    with `k` hits): the same rank within `k`, or absent from the `k` hits beyond."""
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search

    agree = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (g, name) in enumerate(zip(edited, originals)):
            path = Path(tmp) / f"q{i}.narg"
            write_graphs(path, [g], list(vocab), {})
            for label, index in indexes.items():
                hits = [h.name for h in search(str(path), k, index=index, progress=False)]
                rank = int(ranks[label][i])
                ok = hits.index(name) + 1 == rank if name in hits else rank > k
                agree += ok
                if not ok:
                    print(f"check: {g.name} in {label}: search ranks {name} "
                          f"{hits.index(name) + 1 if name in hits else f'> {k}'}, the benchmark {rank}", file=sys.stderr)
    return agree


def write_out(path: Path, cells: list[Cell], meta: dict) -> None:
    rows = [asdict(c) for c in cells]
    if path.suffix == ".json":
        path.write_text(json.dumps({"meta": meta, "cells": rows}, indent=1) + "\n")
        return
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def parse(argv) -> argparse.Namespace:
    from narbench.data.edits import EDIT_KINDS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graphs", type=int, default=1000, help="edited graphs per edit kind and size (default 1000)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50 graphs, 200 resamples")
    parser.add_argument("--kinds", default=",".join(EDIT_KINDS), help="edit kinds, comma-separated (default: all)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="edit sizes in nodes (default 1,2,3,4,5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the graphs, the edits and the bootstrap")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--dataset", default="real", help="the corpus (default real, the shipped index's)")
    parser.add_argument("--index", type=Path, help="index file (default: the shipped index)")
    parser.add_argument("--wl", type=Path, help="the wl index file (default: the cache's; built when missing)")
    parser.add_argument("--check", type=int, default=10, help="edited graphs also searched by narbench.search")
    parser.add_argument("--edit-from", default="corpus", choices=("corpus", *SIDES),
                        help="which graphs are edited: every corpus graph (default), or only the validation graphs of "
                             "the standard or unseen split (`validation_side`)")
    parser.add_argument("--out", type=Path, help="write every cell to this .csv or .json file")
    args = parser.parse_args(argv)
    if args.quick:
        args.graphs, args.boot = min(args.graphs, 50), min(args.boot, 200)
    args.kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in args.kinds if k not in EDIT_KINDS]
    if unknown or not args.kinds:
        parser.error(f"--kinds: unknown edit {', '.join(unknown) or '(none given)'}; the edits are {', '.join(EDIT_KINDS)}")
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        parser.error(f"--sizes takes whole numbers of nodes, comma-separated, not {args.sizes!r}")
    if not args.sizes or min(args.sizes) < 1 or args.graphs < 1 or args.boot < 0:
        parser.error("--sizes and --graphs must be positive, --boot at least 0")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_file import load_index

    t0 = time.perf_counter()
    from narbench.search_engine.index_build import newest_corpus

    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    graphs, vocab = ds.core_graphs, list(ds.vocab)
    among = None if args.edit_from == "corpus" else validation_side(ds, args.edit_from).val
    indexes = {}
    for index in (load_index(None, args.index), wl_index(args.wl, ds)):
        if list(index.vocab) != vocab or index.header["dataset"]["sha256"] != ds.sha256:
            print(f"the index ({index.describe()}) was not built on {args.dataset} {ds.version}", file=sys.stderr)
            return 2
        fusion = index.header.get("fusion")  # a fused index is named for its fusion: graf-lda+wl@0.1
        label = index.encoder_name + (f"+{fusion['wl']}@{fusion['share']:g}" if fusion else "")
        indexes[label if label not in indexes else f"{label}-2"] = index
    print(f"corpus: {ds.name} {ds.version}, {len(graphs):,} graphs"
          + (f", {len(among):,} of them edited (the {args.edit_from} split's validation graphs)" if among is not None
             else "") + "; indexes: "
          + "; ".join(f"{i.describe()} (sha256 {i.sha256[:12]})" for i in indexes.values()), flush=True)
    ranks: dict[tuple[str, str, int], np.ndarray] = {}
    times = {"edit": 0.0, **{name: 0.0 for name in indexes}}
    checked, agree = [], 0
    for kind in args.kinds:
        for size in args.sizes:
            t = time.perf_counter()
            edited, origin = edited_graphs(graphs, vocab, kind, size, args.graphs, args.seed, among)
            times["edit"] += time.perf_counter() - t
            names = [graphs[p].name for p in origin]
            for name, index in indexes.items():
                t = time.perf_counter()
                ranks[name, kind, size] = search_ranks(index, vocab, edited, names)
                times[name] += time.perf_counter() - t
            if len(checked) < args.check and edited:
                checked.append(((edited[0], names[0]), {n: ranks[n, kind, size][:1] for n in indexes}))
    if checked:
        agree = sum(check(indexes, vocab, [e], [o], r) for (e, o), r in checked)
        line("robustness-check", searched=len(checked) * len(indexes), agree=agree)
        if agree != len(checked) * len(indexes):
            return 1
    cells = []
    for name in indexes:
        for kind in ["all", *args.kinds]:
            for size in args.sizes:
                r = np.concatenate([ranks[name, k, size] for k in args.kinds]) if kind == "all" else ranks[name, kind, size]
                cells.append(cell(name, kind, size, r, args.boot, args.seed))
                print_cell(cells[-1])
    line("robustness-time", wall_s=time.perf_counter() - t0, **{f"{k}_s": v for k, v in times.items()})
    if args.out:
        meta = {"dataset": f"{ds.name} {ds.version}", "graphs": args.graphs, "seed": args.seed, "boot": args.boot,
                "edit_from": args.edit_from,
                "indexes": {n: i.sha256 for n, i in indexes.items()}}
        write_out(args.out, cells, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
