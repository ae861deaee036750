"""Out-of-family detection: does search say "no family in the index fits" when none does (issue 59 item 5)?

    python -m benchmarks.search.novel --validation    # choose: validation figures only, no test query read
    python -m benchmarks.search.novel --out DIR       # report: the test figures (once, after every choice)

The index is built as `narbench index build` builds one (its defaults, or `--encoder`/`--param`) on `real`'s
`unseen` corpus less every graph of the `novel` split's test families, so the build fits its out-of-family
score (`narbench.search_engine.outside_fit.attach`) on the `novel` validation families and on in-family models
and sources held out of that corpus, never on a test query. The test queries, searched as `narbench search` searches a saved
graph (warm, in process): every graph of a `novel` test family (positives: no family of the index fits them)
and `unseen`'s test queries of the other families (in-family: their family is in the index, their model not).

Reported: AUROC of the score, the share of positives flagged and of in-family queries flagged (target <= 1 in
10), each with a 95% percentile interval from `--boot` bootstrap resamples clustered by family (positives) and
by model (in-family queries), drawn within each side; the rule before it (the first hit weak, below the
index's `weak_below`) on the same queries; and the positives split by whether their family has a near-duplicate
partner listed in `narbench/data/taxonomy-near-duplicates.csv` (a family whose design another family shares).

`--validation` prints what the build chose on validation (the candidate feature sets' grouped cross-validated
AUROC, the threshold, the validation rates); with `--unknown`, also the unknown-op study that
`narbench.search_engine.unknown`'s threshold is chosen on: the in-family validation queries with a share of their nodes made unknown (the
`other` op), searched in the validation copy of the index, top-1 family per share.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.timing import line

SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)


def held_out_world(ds):
    """(the index's dataset: `unseen` corpus less the novel test families, with the novel validation families
    as its own `novel` split, and the dataset's sets of outside models, so the out-of-family score is fitted as the
    shipped index's is, on `REFIT_SETS` (passed since 2026-12-02; before, `wildval` alone, `choose_on`); the test
    families)."""
    from narbench.data.dataset import GraphDataset, Split
    from narbench.datasets.novel import families_of

    novel, unseen = ds.get_split("novel"), ds.get_split("unseen")
    test, validation = set(families_of(ds.graphs, novel, "test")), set(families_of(ds.graphs, novel, "validation"))
    # real 2.3: a corpus graph that keeps a test family among its others leaves too (that family would fit it)
    graphs = [ds.graphs[i] for i in unseen.train.tolist() if not set(ds.graphs[i].families) & test]
    held = np.array([i for i, g in enumerate(graphs) if g.family in validation], dtype=np.int64)
    n = len(graphs)
    split = Split(train=np.setdiff1d(np.arange(n), held), test=held, seed=novel.seed, test_size=0.0, name="novel",
                  subsets={"validation": np.arange(len(held), dtype=np.int64)})
    standard = Split(train=np.arange(n, dtype=np.int64), test=np.zeros(0, dtype=np.int64), seed=0, test_size=0.0)
    return GraphDataset(ds.name, ds.version, list(ds.vocab), graphs, ds.sha256, standard, meta=ds.meta,
                        splits={"novel": split}, outside=ds.outside, outside_sets=ds.outside_sets), sorted(test)


def report_queries(ds, world, test: list[str]):
    """(graphs, labels 1/0, clusters): every graph of a test family, then unseen's in-family test queries; `world`
    is the index's dataset (`held_out_world`)."""
    from narbench.datasets.real import model_group

    core = ds.core_graphs
    present = {f for g in world.graphs for f in g.families}  # the index's families
    # real 2.3: a test-family graph that also keeps a family of the index has a family that fits: not a positive
    pos = [g for g in core if g.family in set(test) and not set(g.families) & present]
    neg = [ds.graphs[i] for i in ds.get_split("unseen").test.tolist() if not set(ds.graphs[i].families) & set(test)]
    clusters = [f"family:{g.family}" for g in pos] + [f"model:{model_group(g)}" for g in neg]
    return pos + neg, np.array([1] * len(pos) + [0] * len(neg)), clusters


def bootstrap(p: np.ndarray, y: np.ndarray, flag: np.ndarray, clusters: list[str], boot: int, seed: int) -> dict:
    """95% percentile intervals of AUROC, flagged and false-flagged over resamples of whole clusters, drawn
    within each side (positives, in-family)."""
    from sklearn.metrics import roc_auc_score

    members: dict[str, list[int]] = {}
    for i, c in enumerate(clusters):
        members.setdefault(c, []).append(i)
    sides = [[np.asarray(m) for c, m in members.items() if y[m[0]] == side] for side in (1, 0)]
    rng = np.random.default_rng(seed)
    draws = {"auroc": [], "flagged": [], "false_flagged": []}
    for _ in range(boot):
        pos, neg = (np.concatenate([s[j] for j in rng.integers(0, len(s), len(s))]) for s in sides)
        idx = np.concatenate([pos, neg])
        draws["auroc"].append(roc_auc_score(y[idx], p[idx]))
        draws["flagged"].append(flag[pos].mean())
        draws["false_flagged"].append(flag[neg].mean())
    return {k: [round(float(np.quantile(v, 0.025)), 4), round(float(np.quantile(v, 0.975)), 4)] if v else None
            for k, v in draws.items()}


def figures(p, y, flag, clusters, boot, seed) -> dict:
    from sklearn.metrics import roc_auc_score

    out = {"positives": int(y.sum()), "in_family": int((y == 0).sum()),
           "auroc": round(float(roc_auc_score(y, p)), 4) if 0 < y.sum() < len(y) else None,
           "flagged": _rate(flag[y == 1]), "false_flagged": _rate(flag[y == 0])}
    if boot and out["auroc"] is not None:
        out["interval"] = bootstrap(p, y, flag, clusters, boot, seed)
    return out


def _rate(flags: np.ndarray) -> float | None:
    return round(float(flags.mean()), 4) if len(flags) else None


def twin_families() -> set[str]:
    """Families with a near-duplicate partner listed in the taxonomy (reporting only)."""
    from narbench.datasets.taxonomy import data_path

    with data_path("taxonomy-near-duplicates.csv").open(newline="") as fh:
        return {f for row in csv.DictReader(fh) for f in (row["family_a"], row["family_b"])}


def report(index, ds, world, test: list[str], boot: int, seed: int) -> dict:
    """The test figures (read once)."""
    from narbench.search_engine.outside import FEATURES, stored
    from narbench.search_engine.outside_fit import query_features

    graphs, y, clusters = report_queries(ds, world, test)
    x = query_features(index, graphs)
    score = stored(index)
    p = score.scores(x)
    flag = p >= score.threshold
    top1 = x[:, FEATURES.index("top1")]
    weak = top1 < index.weak_below
    twins = twin_families()
    is_twin = np.array([g.family in twins for g in graphs])
    keep = {"twin": (y == 0) | is_twin, "no twin": (y == 0) | ~is_twin}
    return {"score": figures(p, y, flag, clusters, boot, seed),
            "first hit weak (before; AUROC of the first hit's cosine)": figures(-top1, y, weak, clusters, boot, seed),
            **{f"positives whose family has {k} partner": figures(p[m], y[m], flag[m], [clusters[i] for i in
                                                                                       np.flatnonzero(m)], boot, seed)
               for k, m in keep.items()},
            "test_families": len(test), "twin_test_families": sum(f in twins for f in test)}


def unknown_study(cfg, ds, seed: int) -> list[dict]:
    """Top-1 family of the held-out-model validation queries with a share of their nodes' ops made `other`."""
    from narbench.data.graph import ArchGraph
    from narbench.data.ops import UNKNOWN_OP
    from narbench.search_engine.backends import ExactBackend
    from narbench.search_engine.index_build import build_index
    from narbench.search_engine.outside_validation import validation_queries

    sides = validation_queries(ds, ds.core_graphs, seed=cfg.seed)
    index = build_index(cfg, dataset=sides.corpus)
    queries = [g for g, k in zip(sides.queries, sides.kinds) if k == "model"]  # held-out models, as it was chosen on
    other, backend = list(ds.vocab).index(UNKNOWN_OP), ExactBackend(index.arrays["embeddings"])
    fam = [index.header["families"][i] for i in index.arrays["family"].tolist()]
    rng, rows = np.random.default_rng(seed), []
    for share in SHARES:
        edited = []
        for g in queries:
            ops = g.ops.copy()
            ops[rng.choice(len(ops), int(round(share * len(ops))), replace=False)] = other
            edited.append(ArchGraph(ops=ops, edges=g.edges, name=g.name, family=g.family, coarse=g.coarse))
        hits, _ = backend.search(index.embed(edited), 1)
        right = np.mean([fam[h[0]] == g.family for h, g in zip(hits.tolist(), queries)])
        rows.append({"share": share, "queries": len(queries), "top1_family": round(float(right), 4)})
        line("novel-unknown", share=share, queries=len(queries), top1_family=float(right))
    return rows


def _param(text: str):
    from narbench.cli.args import parse_param

    return parse_param(text)


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--validation", action="store_true", help="validation figures only (what chooses)")
    parser.add_argument("--unknown", action="store_true", help="with --validation: the unknown-op study too")
    parser.add_argument("--encoder", default=None, help="the index's encoder (default: the shipped one's)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V", type=_param,
                        help="an encoder parameter, as `narbench index build --param`")
    parser.add_argument("--dataset", default="real", help="a registered `real` with a `novel` split (default real)")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the unknown study")
    parser.add_argument("--out", type=Path, help="write results.json and README.md into this folder")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_build import IndexConfig, build_index, newest_corpus

    t0 = time.perf_counter()
    params = dict(args.param) or None
    cfg = IndexConfig(progress=False, params=params, **({"encoder": args.encoder} if args.encoder else {}))
    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it
    world, test = held_out_world(ds)
    index = build_index(cfg, dataset=world)
    validation = index.header["out_of_family"]
    print(f"index: {index.describe()}; validation: {json.dumps(validation['validation'])}; features "
          f"{validation['features']}, threshold {validation['threshold']:.4f}", flush=True)
    out = {"dataset": f"{ds.name} {ds.version}", "index": index.describe(), "out_of_family": validation}
    if args.validation:
        if args.unknown:
            out["unknown"] = unknown_study(cfg, world, args.seed)
    else:
        out["test"] = report(index, ds, world, test, args.boot, args.seed)
        print(json.dumps(out["test"], indent=1))
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    line("novel-time", wall_s=out["wall_s"])
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / ("validation.json" if args.validation else "results.json")).write_text(
            json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
