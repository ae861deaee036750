"""`python -m narbench.cli_ceiling`: the ceiling tables (`leaderboard/ceiling.csv`, `ceiling-families.csv`).

The oracle itself is `narbench.eval.ceiling` (pure: labels and structure classes in, metrics
out). This face computes the structure classes of a dataset's graphs (`iso`: isomorphism by
`narbench.datasets.taxonomy.canonical_hash`; `nd`: near-duplicate components), loads each split
as `narbench run` does (`narbench.harness.runner.select`), compares with the committed results
and writes the tables. It sits with the CLI because it needs datasets, the harness and the
leaderboard's records, which the eval layer may not import.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from narbench.eval.ceiling import (BEST_METRICS, CEILING_CSV, DRAWS, FAMILIES_CSV, HOPELESS, KINDS, RESOLUTIONS,
                                   RESULTS_DIR, SEED, SPLITS, SUBSETS, TABLE_METRICS, VARIANTS, Ceiling, _renumber, ceiling)
from narbench.leaderboard.headline import version_key

# ----------------------------------------------------------------------------- structure classes


def iso_keys(graphs: Sequence) -> list[str]:
    """An isomorphism-invariant key per graph: equal keys <=> equal `canonical_hash` (isomorphic graphs).

    A graph alone in its invariant bucket (`taxonomy._invariant_key`: sizes, op counts, WL-3 colours)
    is isomorphic to no other graph of `graphs` and keeps the bucket key; the others get their canonical hash.
    """
    from narbench.datasets.taxonomy import _invariant_key, canonical_hash

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

    from narbench.datasets.taxonomy import near_duplicate_pairs, wl_counts

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


# ----------------------------------------------------------------------------- committed results


@dataclass
class Committed:
    """Per configuration (the leaderboard's row key), the per-query scores of each seed."""

    label: str
    runs: dict[int, dict[str, np.ndarray]]

    def mean(self, metric: str) -> np.ndarray:
        return np.mean([pq[metric] for pq in self.runs.values()], axis=0)


def method_label(key) -> str:
    """`encoder[+variant][/splitter] (protocol[, objective][, pretrained])` of a leaderboard key."""
    name = key.encoder + (f"+{key.variant}" if key.variant else "") + (f"/{key.splitter}" if key.splitter != "none" else "")
    extra = [key.protocol] + ([key.objective] if key.objective != "ce+cl" else []) + \
        (["pretrained"] if key.init != "scratch" else [])
    return f"{name} ({', '.join(extra)})"


def tracked(results_dir: Path) -> set[str] | None:
    """Names of the files under `results_dir` that git tracks (None: not in a git checkout)."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "-z", "."], cwd=results_dir, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {Path(p).name for p in out.stdout.decode().split("\0") if p}


def committed(name: str, split: str, want: dict[str, Any], num_queries: int, num_corpus: int,
              results_dir: Path = RESULTS_DIR, *, uncommitted: bool = False) -> dict[str, Committed]:
    """The committed results on exactly this content and split (all queries, whole corpus), by configuration.

    Committed: tracked by git where `results_dir` is in a checkout (every file with `uncommitted`).
    Of several runs of one configuration and seed, the latest counts (as the leaderboard's `select_runs`).
    """
    from narbench.eval.result import RunResult
    from narbench.eval.validation import read_sidecar, sidecar_path
    from narbench.leaderboard.records import Record, select_runs

    records = []
    known = None if uncommitted else tracked(Path(results_dir))
    for path in sorted(Path(results_dir).glob("*.json")):
        if known is not None and path.name not in known:
            continue
        try:
            res = RunResult.read(path)
        except ValueError:
            continue
        ds = res.dataset or {}
        if ds.get("name") != name or res.split != split or ds.get("version") != want["version"] \
                or ds.get("sha256") != want["sha256"] or ("parts" in want and ds.get("parts") != want["parts"]):
            continue
        if res.num_queries != num_queries or res.num_corpus != num_corpus or not sidecar_path(path).is_file():
            continue
        per_query = read_sidecar(sidecar_path(path))
        if any(len(v) != num_queries for v in per_query.values()):
            continue
        records.append(Record(path, res, per_query))
    out = {}
    for key, seeds in select_runs(records).items():
        label = method_label(key) + (f" [{key.profile}, {key.device}]" if (key.profile, key.device) != ("quick", "cpu") else "")
        out[label] = Committed(label, {seed: rec.per_query for seed, rec in seeds.items()})
    return out


def best_committed(configs: dict[str, Committed], metric: str, where: np.ndarray | None = None) -> tuple[float, str]:
    """(best seed-mean of `metric` over configurations, its label); over the queries `where` if given."""
    best, label = float("nan"), ""
    for lab, cfg in sorted(configs.items()):
        vals = cfg.mean(metric)
        score = float(vals[where].mean() if where is not None else vals.mean())
        if not best >= score:  # nan-safe: the first sets it
            best, label = score, lab
    return best, label


def max_single_run(configs: dict[str, Committed], metric: str, where: np.ndarray) -> float:
    """The highest mean of `metric` over the queries `where` that any one committed run reached."""
    return max((float(pq[metric][where].mean()) for c in configs.values() for pq in c.runs.values()), default=float("nan"))


# ----------------------------------------------------------------------------- tables


@dataclass
class SplitReport:
    """One split's oracle results at each resolution, and its committed results."""

    dataset: str
    split: str
    content: dict[str, Any]
    corpus: np.ndarray
    queries: np.ndarray
    ceilings: dict[tuple[str, str], Ceiling]  # (resolution, rule) -> the oracle's scores
    classes: dict[str, np.ndarray]  # resolution -> class id per graph of the dataset
    configs: dict[str, Committed]
    #: named query subsets reported apart (crossimpl's `exact` and `reimpl`): positions into `queries`
    subsets: dict[str, np.ndarray] = field(default_factory=dict)


def cross_family_classes(classes: np.ndarray, families: np.ndarray, idx: np.ndarray) -> int:
    """Classes of the graphs `idx` that hold two or more families."""
    fam_by_class: dict[int, set] = {}
    for c, f in zip(classes[idx].tolist(), families[idx].tolist()):
        fam_by_class.setdefault(c, set()).add(f)
    return sum(len(s) > 1 for s in fam_by_class.values())


def run_split(dataset, split: str, classes: dict[str, np.ndarray], *, draws: int = DRAWS, seed: int = SEED,
              results_dir: Path = RESULTS_DIR, uncommitted: bool = False) -> SplitReport:
    corpus, queries = select(dataset, split)
    fam = np.array([g.family for g in dataset.graphs], dtype=object)
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


#: a row of `ceiling.csv` is replaced by a re-run of the same content version, split and oracle
CEILING_KEY = ("dataset", "version", "split", "resolution", "rule")

CEILING_COLUMNS = ("dataset", "version", "content", "split", "resolution", "rule", "kind", "queries", "corpus",
                   "query_groups", "cross_family_classes", *TABLE_METRICS, "exact_gap", "draws", "configurations",
                   *(c for m in BEST_METRICS for c in (f"best {m}", f"best {m} method")))


def ceiling_rows(rep: SplitReport, families: np.ndarray) -> list[dict[str, Any]]:
    rows = []
    idx = np.concatenate([rep.corpus, rep.queries])
    sha = rep.content["sha256"][:8] + ("+" + rep.content["parts"].get("crossimpl", "")[:8] if "parts" in rep.content else "")
    parts = [(rep.split, np.arange(len(rep.queries)))] + \
        [(f"{rep.split}/{name}", pos) for name, pos in sorted(rep.subsets.items(), key=lambda kv: SUBSETS.index(kv[0]))]
    for split, where in parts:
        for (res, rule), c in rep.ceilings.items():
            means = {m: float(c.per_query[m][where].mean()) for m in TABLE_METRICS}
            gap = max(abs(means[m] - float(c.exact_per_query[m][where].mean())) for m in TABLE_METRICS)
            groups = len(set(rep.classes[res][rep.queries[where]].tolist()))
            row = {"dataset": rep.dataset, "version": rep.content["version"], "content": sha, "split": split,
                   "resolution": res, "rule": rule, "kind": KINDS[res], "queries": len(where), "corpus": len(rep.corpus),
                   "query_groups": groups, "cross_family_classes": cross_family_classes(rep.classes[res], families, idx),
                   **{m: f"{v:.4f}" for m, v in means.items()},
                   "exact_gap": f"{gap:.4f}", "draws": c.draws, "configurations": len(rep.configs)}
            for m in BEST_METRICS:
                best, label = best_committed(rep.configs, m, where) if rep.configs else (float("nan"), "")
                row[f"best {m}"] = "" if np.isnan(best) else f"{best:.4f}"
                row[f"best {m} method"] = label
            rows.append(row)
    return rows


FAMILY_COLUMNS = ("version", "family", "queries", *(f"iso-label {m}" for m in BEST_METRICS),
                  *(f"{r}-{u} ndcg@20" for r, u in VARIANTS[1:]),
                  "best ndcg@20", "best ndcg@20 method", "max run ndcg@20", "max run ndcg@100", "configurations at 0", "hopeless",
                  "queries with iso twin elsewhere", "queries with nd twins only elsewhere", "nd other families")


def family_rows(rep: SplitReport, dataset) -> list[dict[str, Any]]:
    """Per query family: the ceilings, the best committed score, and the near-duplicates in other families."""
    fam = np.array([g.family for g in dataset.graphs], dtype=object)
    q_fam = fam[rep.queries]
    corpus_by_class = {res: _members(cls[rep.corpus], rep.corpus) for res, cls in rep.classes.items()}
    rows = []
    for f in sorted(set(q_fam.tolist())):
        where = np.flatnonzero(q_fam == f)
        row: dict[str, Any] = {"family": f, "queries": len(where)}
        for (res, rule), c in rep.ceilings.items():
            for m in BEST_METRICS if (res, rule) == ("iso", "label") else ("ndcg@20",):
                row[f"{res}-{rule} {m}"] = f"{c.per_query[m][where].mean():.4f}"
        if rep.configs:
            best, label = best_committed(rep.configs, "ndcg@20", where)
            at_zero = sum(float(c.mean("ndcg@20")[where].mean()) == 0 for c in rep.configs.values())
            row.update({"best ndcg@20": f"{best:.4f}", "best ndcg@20 method": label if best > 0 else "",
                        "max run ndcg@20": f"{max_single_run(rep.configs, 'ndcg@20', where):.4f}",
                        "max run ndcg@100": f"{max_single_run(rep.configs, 'ndcg@100', where):.4f}",
                        "configurations at 0": f"{at_zero}/{len(rep.configs)}",
                        "hopeless": "yes" if best < HOPELESS else ""})
        iso_twin, nd_only, near_other = 0, 0, set()
        for q in rep.queries[where].tolist():
            twins = corpus_by_class["iso"].get(int(rep.classes["iso"][q]), np.zeros(0, np.int64))
            iso_twin += bool(len(twins)) and bool((fam[twins] != f).any())
            if "nd" in rep.classes:
                near = corpus_by_class["nd"].get(int(rep.classes["nd"][q]), np.zeros(0, np.int64))
                near_f = fam[near]
                nd_only += bool(len(near)) and not (near_f == f).any()
                near_other.update(near[near_f != f].tolist())
        row["queries with iso twin elsewhere"] = iso_twin
        row["queries with nd twins only elsewhere"] = nd_only if "nd" in rep.classes else ""
        others = Counter(fam[sorted(near_other)].tolist())
        row["nd other families"] = " ".join(f"{k}:{v}" for k, v in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
        rows.append(row)
    return rows


def _members(classes: np.ndarray, idx: np.ndarray) -> dict[int, np.ndarray]:
    out: dict[int, list[int]] = {}
    for c, i in zip(classes.tolist(), idx.tolist()):
        out.setdefault(c, []).append(i)
    return {c: np.asarray(v, dtype=np.int64) for c, v in out.items()}


def neighbours(dataset, family: str, split: str = "unseen", *, wl: np.ndarray | None = None,
               nd: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Where the graphs of `family` sit, per model (`meta['model']`): for the doubtful memberships.

    Per model: its graphs, its side of `split` (query / corpus), the best WL cosine (the `wl` floor's
    features, exact counts) to a graph of another model of its own family and to a graph of another
    family (with that family), and the other families in its near-duplicate components (`nd`).
    """
    from narbench.datasets.taxonomy import wl_counts

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


def write_csv(path: Path, columns: Sequence[str], rows: list[dict[str, Any]], *, replace: Iterable[tuple] = (),
              key: Sequence[str] = ()) -> None:
    """Write `rows`; with `key`, keep the existing file's rows whose key is not in `replace` (re-runs of some splits)."""
    replace = set(replace)
    kept = []
    if key and path.is_file():
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            if list(reader.fieldnames or ()) == list(columns):  # a file of another layout is not kept
                kept = [r for r in reader if tuple(r[k] for k in key) not in replace]
    order = {s: i for i, s in enumerate(SPLITS)}
    order.update({(d, f"{s}/{sub}"): i + (j + 1) / 10 for i, (d, s) in enumerate(SPLITS) for j, sub in enumerate(SUBSETS)})
    every = kept + [{c: str(r.get(c, "")) for c in columns} for r in rows]
    variants = {f"{res}-{rule}": i for i, (res, rule) in enumerate(VARIANTS)}
    if key and "dataset" in columns:
        every.sort(key=lambda r: (order.get((r["dataset"], r["split"]), len(order)), version_key(r.get("version", "")),
                                  variants.get(f"{r.get('resolution')}-{r.get('rule', 'label')}", len(variants))))
    elif key:
        every.sort(key=lambda r: tuple(version_key(r[k]) if k == "version" else r[k] for k in key))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
        w.writeheader()
        for r in every:
            w.writerow({c: r.get(c, "") for c in columns})


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m narbench.cli_ceiling", description=__doc__.split("\n")[0])
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
    args = parser.parse_args(argv)
    if args.neighbours:
        dataset = load("real", "unseen")
        nd = structure_classes(dataset.core_graphs, "nd")
        for f in args.neighbours:
            for row in neighbours(dataset, f, nd=nd):
                print(f"{row['family']} {row['model']}: {row['graphs']} graphs, {row['side']} in unseen; best WL cosine "
                      f"to its own family {row['own family cosine']:.4f}, to another {row['other family cosine']:.4f} "
                      f"({row['nearest other family']}); near-duplicates in {row['nd other families'] or 'no other family'}")
        return 0
    wanted = [tuple(s.split(":", 1)) for s in args.splits]
    known = known_splits()
    unknown = [":".join(w) for w in wanted if w not in known]
    if unknown:
        parser.error(f"unknown splits {', '.join(unknown)}; known: {', '.join(f'{d}:{s}' for d, s in known)}")
    wanted.sort(key=known.index)
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
        rep = run_split(dataset, split, classes, draws=args.draws, results_dir=args.results, uncommitted=args.uncommitted)
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
            write_csv(args.families_out, FAMILY_COLUMNS, fam_rows, replace=[(rep.content["version"],)], key=("version",))
        write_csv(args.out, CEILING_COLUMNS, rows, replace=done, key=CEILING_KEY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
