"""`graf-lda`'s `outside` scatter measured with each validation set read by an index that never saw it (issue 59).

    python -m benchmarks.search.outside_folds --weight 8 --weight 64 --out DIR      # resumable: one file a fold
    python -m benchmarks.search.outside_folds --weight 64 --read 1 --read 2 --hits-only --sets ... --out DIR

The `outside` candidate (`baselines/graf_lda.py`) fits the index's discriminant with the validation sets' fitting
models as nuisance, so a set it was fitted with cannot measure it. Here the validation sets are dealt into FOLDS
folds (set i into fold i mod FOLDS, oldest first); for each fold and weight an index is built as `narbench index
build` builds the shipped one (`index_build.DEFAULT_PARAMS` plus `outside=W`), its scatter from the other folds'
sets only, and the fold's sets are searched in it (`benchmarks.search.pooled.pool`). Pooled over the folds: top-1
and family P@10 of code the discriminant never saw, against the shipped index's on the same sets (`outside` 0
reads no set). The out-of-family score of each fold's index is fitted as the build fits it (on `REFIT_SETS`, the
fold's sets among them; since `outside_fit.cross_fitted`, each of its models searched in a further index whose
scatter did not read it, about five fits a fold). The hits do not depend on the score. The runs of 2026-12-04
(benchmarks/results/outside-nuisance-2026-12-04/) predate `cross_fitted`: their flags are in-sample, their hits not.

`--read K` (a learning curve: does the scatter gain from more validation sets?): each fold's index reads the K folds
after it (fold f: folds f+1 .. f+K mod FOLDS) instead of all the others (K = FOLDS - 1, the default). `--hits-only`
builds no out-of-family score (one fit a fold instead of about five): top-1 and P@10 as with it, `flagged` then
the first hit's `weak` mark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

FOLDS = 4


def fold_sets(sets: tuple[str, ...], folds: int = FOLDS) -> list[tuple[str, ...]]:
    """The sets dealt into `folds` folds, set i into fold i mod `folds`."""
    return [tuple(sets[f::folds]) for f in range(folds)]


def scatter_of(sets: tuple[str, ...], folds: list[tuple[str, ...]], f: int, k: int) -> tuple[str, ...]:
    """The sets fold `f`'s index reads: those of the `k` folds after it (cyclically), in `sets`' order."""
    if not 1 <= k < len(folds):
        raise ValueError(f"a fold's index reads 1 to {len(folds) - 1} other folds, not {k}")
    read = {s for j in range(1, k + 1) for s in folds[(f + j) % len(folds)]}
    return tuple(s for s in sets if s in read)


def fold_index(ds, weight: float, fitted_on: tuple[str, ...], score: bool = True):
    """The shipped index's build with `outside=weight`, its scatter from `fitted_on`'s fitting models (and,
    `score`, its out-of-family score as the build fits it)."""
    from narbench.search_engine.index_build import DEFAULT_PARAMS, IndexConfig, build_index, scatter_index
    from narbench.search_engine.outside_fit import attach

    cfg = IndexConfig(params={**DEFAULT_PARAMS["graf-lda"], "outside": float(weight)}, progress=False)
    index = scatter_index(cfg, ds, fitted_on)
    if score:
        attach(cfg, ds, index, build_index, scatter_index)
    return index


def main(argv=None) -> int:
    from benchmarks.search.pooled import pool
    from narbench.data.dataset import load_dataset
    from narbench.datasets.wild import VALIDATIONS
    from narbench.search_engine.index_build import newest_corpus
    from narbench.search_engine.index_file import load_index
    from narbench.search_engine.outside_models import scatter_sets

    parser = argparse.ArgumentParser(prog="python -m benchmarks.search.outside_folds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--weight", type=float, action="append", required=True, metavar="W")
    parser.add_argument("--out", required=True, help="a folder: one JSON file per (weight, fold), kept across runs")
    parser.add_argument("--sets", nargs="+", default=list(VALIDATIONS), metavar="SET")
    parser.add_argument("--read", type=int, action="append", metavar="K",
                        help=f"each fold's scatter from the K folds after it (repeatable; default {FOLDS - 1}: all others)")
    parser.add_argument("--hits-only", action="store_true", help="no out-of-family score (flags: the weak mark)")
    args = parser.parse_args(argv)
    reads = args.read or [FOLDS - 1]
    if any(not 1 <= k <= FOLDS - 1 for k in reads):
        parser.error(f"--read takes 1 to {FOLDS - 1} folds, got {reads}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = tuple(args.sets)
    folds = fold_sets(sets)
    shipped = load_index(None, None)
    base = pool(shipped, sets)
    print(f"shipped ({shipped.sha256[:12]}), {len(sets)} sets: {base.line()}"
          + (" (in-sample: its scatter read them)" if set(sets) & set(scatter_sets(shipped)) else ""), flush=True)
    ds = None
    for weight, k in [(w, k) for w in args.weight for k in reads]:
        parts = []
        tag = ("" if k == FOLDS - 1 else f"-read{k}") + ("-hits" if args.hits_only else "")
        for f, held in enumerate(folds):
            path = out / f"w{weight:g}{tag}-fold{f}.json"
            if not path.is_file():
                if ds is None:
                    ds = newest_corpus(load_dataset("real"))
                t = time.perf_counter()
                index = fold_index(ds, weight, scatter_of(sets, folds, f, k), score=not args.hits_only)
                p = pool(index, held)
                path.write_text(json.dumps({
                    "weight": weight, "read": k, "fold": f, "held": list(held), "sha256": index.sha256,
                    "seconds": round(time.perf_counter() - t, 1),
                    "fits": p.fits.tolist(), "top1": p.top1.tolist(), "p10": p.p10.tolist(),
                    "flagged": p.flagged.tolist(), "sets": p.sets}))
            parts.append(json.loads(path.read_text()))
            d = parts[-1]
            fits = np.array(d["fits"])
            print(f"  w {weight:g} read {k} fold {f} ({d['seconds']} s, {d['sha256'][:12]}): top-1 "
                  f"{int(np.array(d['top1'])[fits].sum())}/{int(fits.sum())}  "
                  + " ".join(f"{n}:{got}/{total}" for n, _, got, total in d["sets"]), flush=True)
        fits = np.concatenate([np.array(d["fits"]) for d in parts])
        top1 = np.concatenate([np.array(d["top1"]) for d in parts])
        p10 = np.concatenate([np.array(d["p10"]) for d in parts])
        flagged = np.concatenate([np.array(d["flagged"]) for d in parts])
        print(f"outside={weight:g}, each fold read by an index fitted on {k} other fold(s): "
              f"top-1 {top1[fits].mean():.4f} "
              f"({int(top1[fits].sum())}/{int(fits.sum())}) P@10 {p10[fits].mean():.4f} none flagged "
              f"{int(flagged[~fits].sum())}/{int((~fits).sum())} fit flagged {int(flagged[fits].sum())}/{int(fits.sum())}"
              "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
