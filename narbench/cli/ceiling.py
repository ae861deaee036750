"""`python -m narbench.cli.ceiling`: the ceiling tables (`leaderboard/ceiling.csv`, `ceiling-families.csv`).

The oracle itself is `narbench.eval.ceiling` (pure: labels and structure classes in, metrics
out); the tables' rows, the committed results they name and their writer are
`narbench.leaderboard.ceiling`. This face computes the structure classes of a dataset's graphs
(`iso`: isomorphism by `narbench.datasets.taxonomy.canonical_hash`; `nd`: near-duplicate
components), loads each split as `narbench run` does (`narbench.harness.runner.select`) and writes
the tables. It sits with the CLI because it needs datasets and the harness, which the eval and
leaderboard layers may not import.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from narbench.eval.ceiling import CEILING_CSV, DRAWS, FAMILIES_CSV, RESOLUTIONS, RESULTS_DIR, SEED, SPLITS, SUBSETS, \
    VARIANTS, _renumber, ceiling
from narbench.leaderboard.ceiling import (CEILING_COLUMNS, CEILING_KEY, FAMILY_COLUMNS, SplitReport, ceiling_rows,
                                          committed, family_rows, write_csv)

# ----------------------------------------------------------------------------- structure classes


def iso_keys(graphs: Sequence) -> list[str]:
    """An isomorphism-invariant key per graph: equal keys <=> equal `canonical_hash` (isomorphic graphs).

    A graph alone in its invariant bucket (`taxonomy._invariant_key`: sizes, op counts, WL-3 colours)
    is isomorphic to no other graph of `graphs` and keeps the bucket key; the others get their canonical hash.
    """
    from narbench.datasets.isomorphism import _invariant_key, canonical_hash

    inv = [_invariant_key(g) for g in graphs]
    counts = Counter(inv)
    return [f"inv:{k}" if counts[k] == 1 else f"iso:{canonical_hash(g)}" for g, k in zip(graphs, inv)]


def structure_classes(graphs: Sequence, resolution: str = "iso", *, iso: Sequence[str] | None = None) -> np.ndarray:
    """Class id per graph (int64, numbered by first appearance) at `resolution` (`iso` or `nd`).

    `iso`: isomorphism classes (`iso_keys`). `nd`: components of the pairs at WL cosine >= 0.999
    joined with the isomorphism classes. `iso` may pass precomputed `iso_keys(graphs)`.
    """
    if resolution not in RESOLUTIONS:
        raise ValueError(f"unknown resolution {resolution!r}; known: {', '.join(RESOLUTIONS)}")
    keys = list(iso) if iso is not None else iso_keys(graphs)
    _, first, iso_ids = np.unique(np.asarray(keys, dtype=object), return_index=True, return_inverse=True)
    iso_ids = iso_ids.reshape(-1)
    if resolution == "iso":
        return _renumber(iso_ids)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from narbench.datasets.near_duplicates import near_duplicate_pairs, wl_counts

    n = len(graphs)
    pairs = near_duplicate_pairs(wl_counts(list(graphs))) if n > 1 else np.zeros((0, 2), np.int64)
    rep = first[iso_ids]  # isomorphic graphs joined to their class's first member
    src = np.concatenate([pairs[:, 0], np.arange(n)])
    dst = np.concatenate([pairs[:, 1], rep])
    adj = coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    return _renumber(connected_components(adj, directed=False)[1])


# ----------------------------------------------------------------------------- datasets and splits


def load(name: str, split: str):
    """The dataset as `narbench run` loads it. `real`'s standard and unseen need only the real graphs:
    when the crossimpl file cannot be loaded (being rebuilt), they are loaded without it."""
    from narbench.data.dataset import GraphDataset, load_dataset
    from narbench.data.store import CorruptFileError

    try:
        return load_dataset(name)
    except (FileNotFoundError, CorruptFileError, ValueError) as exc:
        from narbench.core import registry
        from narbench.datasets.real import RealDataset

        provider_cls = registry.load("dataset", name)
        if not issubclass(provider_cls, RealDataset) or split == "crossimpl":
            raise
        print(f"{name}: loading without the crossimpl queries ({exc})", file=sys.stderr)
        provider = provider_cls()
        graphs, vocab, header, digest = provider._read()
        splits = provider.splits(graphs)
        return GraphDataset(provider.name, provider.version, list(vocab), graphs, digest, splits["standard"],
                            meta=header, splits=splits)


def known_splits() -> list[tuple[str, str]]:
    """The (dataset, split) pairs the tool computes, in order: `SPLITS`, then each of `SPLITS`' real
    splits under every version registered beside the current one (`real-2.1`), as registered."""
    from narbench.core import registry

    out = list(SPLITS)
    for name in sorted(registry.names("dataset")):
        base = name.split("-", 1)[0]
        if name != base:
            out += [(name, s) for d, s in SPLITS if d == base]
    return out


def select(dataset, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(corpus, queries) graph indices of `split` as `narbench run` takes them (profile `quick`: the whole split)."""
    from narbench.harness.runner import select as run_select
    from narbench.train.profiles import get_profile

    _, corpus, queries = run_select(dataset, get_profile("quick"), 0, split)
    return corpus, queries


def content(dataset, split: str) -> dict[str, Any]:
    """What result files on this split must record: version, sha256 and (crossimpl) the parts' digests."""
    desc = dataset.describe(split)
    out = {"version": desc["version"], "sha256": desc["sha256"]}
    if split == "crossimpl" and "parts" in desc:
        out["parts"] = desc["parts"]
    return out


def run_split(dataset, split: str, classes: dict[str, np.ndarray], *, draws: int = DRAWS, seed: int = SEED,
              results_dir: Path = RESULTS_DIR, uncommitted: bool = False) -> SplitReport:
    """The oracle's ceilings of `split` at each resolution of `classes`, and the committed results on it."""
    from narbench.eval.relevance import relevance_labels

    corpus, queries = select(dataset, split)
    fam = relevance_labels(dataset.graphs)  # each graph's family, or its families where one has several
    ceilings = {}
    for res, rule in VARIANTS:
        if res in classes and (rule == "label" or dataset.name != "nas"):
            cls = classes[res]
            ceilings[res, rule] = ceiling(fam[queries], cls[queries], fam[corpus], cls[corpus], draws=draws, seed=seed,
                                          rule=rule)
    want = content(dataset, split)
    configs = committed(dataset.name, split, want, len(queries), len(corpus), results_dir, uncommitted=uncommitted)
    test = dataset.get_split(split).test
    subsets = {name: np.flatnonzero(np.isin(queries, test[pos]))
               for name, pos in getattr(dataset.get_split(split), "subsets", {}).items() if name in SUBSETS}
    return SplitReport(dataset.name, split, want, corpus, queries, ceilings, classes, configs, subsets)


def neighbours(dataset, family: str, split: str = "unseen", *, wl: np.ndarray | None = None,
               nd: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Where the graphs of `family` sit, per model (`meta['model']`): for the doubtful memberships.

    Per model: its graphs, its side of `split` (query / corpus), the best WL cosine (the `wl` floor's
    features, exact counts) to a graph of another model of its own family and to a graph of another
    family (with that family), and the other families in its near-duplicate components (`nd`).
    """
    from narbench.datasets.near_duplicates import wl_counts

    graphs = dataset.core_graphs
    fam = np.array([g.family for g in graphs], dtype=object)
    model = np.array([str(g.meta.get("model", g.name)) for g in graphs], dtype=object)
    counts = (wl if wl is not None else wl_counts(graphs)).astype(np.float64)
    unit = counts / np.maximum(np.linalg.norm(counts, axis=1, keepdims=True), 1e-12)
    test = np.zeros(len(graphs), dtype=bool)
    test[dataset.get_split(split).test] = True
    out = []
    for m in sorted(set(model[fam == family].tolist())):
        idx = np.flatnonzero((fam == family) & (model == m))
        cos = unit[idx] @ unit.T
        own = (fam == family) & (model != m)
        other = fam != family
        best_other = int(np.argmax(np.where(other, cos, -1).max(axis=0)))
        row = {"family": family, "model": m, "graphs": len(idx),
               "side": "query" if test[idx].all() else "corpus" if not test[idx].any() else "both",
               "own family cosine": float(cos[:, own].max()) if own.any() else float("nan"),
               "other family cosine": float(cos[:, best_other].max()), "nearest other family": fam[best_other]}
        if nd is not None:
            near = np.flatnonzero(np.isin(nd[:len(graphs)], nd[idx]) & other)
            row["nd other families"] = dict(Counter(fam[near].tolist()).most_common(4))
        out.append(row)
    return out


def _iso_cache(dataset) -> list[str]:
    """`iso_keys` of the dataset's graphs, cached on disk by the dataset's content (minutes on `nas`)."""
    from narbench.core.cache import cache_dir

    digest = hashlib.sha256("\n".join(g.content_hash() for g in dataset.graphs).encode()).hexdigest()[:16]
    path = cache_dir() / f"ceiling-iso-{dataset.name}-{digest}.txt"
    if path.is_file():
        keys = path.read_text().split("\n")
        if len(keys) == len(dataset.graphs):
            return keys
    keys = iso_keys(dataset.graphs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(keys))
    return keys


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m narbench.cli.ceiling`."""
    parser = argparse.ArgumentParser(prog="python -m narbench.cli.ceiling", description=__doc__.split("\n")[0])
    parser.add_argument("--splits", nargs="+", default=[f"{d}:{s}" for d, s in SPLITS],
                        help="dataset:split pairs (default: all four; crossimpl last); a version registered "
                             "beside the current one by its name, e.g. real-2.1:unseen")
    parser.add_argument("--draws", type=int, default=DRAWS, help="random tie orders averaged")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of committed result files")
    parser.add_argument("--uncommitted", action="store_true",
                        help="also count result files git does not track (default: tracked files only)")
    parser.add_argument("--out", type=Path, default=CEILING_CSV)
    parser.add_argument("--families-out", type=Path, default=FAMILIES_CSV)
    parser.add_argument("--neighbours", nargs="+", metavar="FAMILY",
                        help="print where these `real` families' graphs sit per model (nearest families by WL "
                             "cosine, near-duplicate components), and nothing else")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the `--neighbours` of families, or compute the `--splits`' ceilings and write both tables."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.neighbours:
        print_neighbours(args.neighbours)
        return 0
    wanted = [tuple(s.split(":", 1)) for s in args.splits]
    known = known_splits()
    unknown = [":".join(w) for w in wanted if w not in known]
    if unknown:
        parser.error(f"unknown splits {', '.join(unknown)}; known: {', '.join(f'{d}:{s}' for d, s in known)}")
    wanted.sort(key=known.index)
    write_tables(wanted, args.out, args.families_out, draws=args.draws, results_dir=args.results,
                 uncommitted=args.uncommitted)
    return 0


def print_neighbours(families: Sequence[str]) -> None:
    """Where the graphs of these `real` families sit per model (`neighbours`), one line per model."""
    dataset = load("real", "unseen")
    nd = structure_classes(dataset.core_graphs, "nd")
    for f in families:
        for row in neighbours(dataset, f, nd=nd):
            print(f"{row['family']} {row['model']}: {row['graphs']} graphs, {row['side']} in unseen; best WL cosine "
                  f"to its own family {row['own family cosine']:.4f}, to another {row['other family cosine']:.4f} "
                  f"({row['nearest other family']}); near-duplicates in {row['nd other families'] or 'no other family'}")


def write_tables(wanted: Sequence[tuple[str, str]], out: Path, families_out: Path, *, draws: int,
                 results_dir: Path, uncommitted: bool) -> None:
    """Compute each (dataset, split) of `wanted` in turn, print its rows and rewrite the tables after each
    (one dataset in memory at a time); `real` unseen also writes the per-family table."""
    loaded: dict[str, tuple[Any, dict[str, np.ndarray]]] = {}
    rows, done = [], []
    for name, split in wanted:
        key = name if split != "crossimpl" else f"{name}:{split}"
        if key not in loaded:
            dataset = load(name, split)
            iso = _iso_cache(dataset)
            classes = {"iso": structure_classes(dataset.graphs, "iso", iso=iso)}
            if dataset.name == "real":
                classes["nd"] = structure_classes(dataset.graphs, "nd", iso=iso)
            loaded = {key: (dataset, classes)}  # one dataset in memory at a time
        dataset, classes = loaded[key]
        rep = run_split(dataset, split, classes, draws=draws, results_dir=results_dir, uncommitted=uncommitted)
        families = np.array([g.family for g in dataset.graphs], dtype=object)
        new = ceiling_rows(rep, families)
        rows += new
        done += [tuple(r[k] for k in CEILING_KEY) for r in new]
        for r in new:
            print(f"{name} {r['split']} {r['resolution']}-{r['rule']}: ndcg@20 {r['ndcg@20']} mrr@20 {r['mrr@20']} "
                  f"mapc@20 {r['map_capped@20']} (exact gap {r['exact_gap']}); best committed ndcg@20 "
                  f"{r['best ndcg@20']} {r['best ndcg@20 method']}", flush=True)
        if (dataset.name, split) == ("real", "unseen"):
            fam_rows = [{"version": rep.content["version"], **r} for r in family_rows(rep, dataset)]
            write_csv(families_out, FAMILY_COLUMNS, fam_rows, replace=[(rep.content["version"],)], key=("version",))
        write_csv(out, CEILING_COLUMNS, rows, replace=done, key=CEILING_KEY)


if __name__ == "__main__":
    sys.exit(main())
