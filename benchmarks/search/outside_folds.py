"""`graf-lda`'s `outside` scatter measured with each validation set read by an index that never saw it (issue 59).

    python -m benchmarks.search.outside_folds --weight 8 --weight 64 --out DIR      # resumable: one file a fold

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


def fold_index(ds, weight: float, fitted_on: tuple[str, ...]):
    """The shipped index's build with `outside=weight`, its scatter from `fitted_on`'s fitting models."""
    from narbench.search_engine.index_build import DEFAULT_PARAMS, IndexConfig, build_index, scatter_index
    from narbench.search_engine.outside_fit import attach

    cfg = IndexConfig(params={**DEFAULT_PARAMS["graf-lda"], "outside": float(weight)}, progress=False)
    index = scatter_index(cfg, ds, fitted_on)
    attach(cfg, ds, index, build_index, scatter_index)
    return index


def main(argv=None) -> int:
    from benchmarks.search.pooled import pool
    from narbench.data.dataset import load_dataset
    from narbench.datasets.wild import VALIDATIONS
    from narbench.search_engine.index_build import newest_corpus
    from narbench.search_engine.index_file import load_index

    parser = argparse.ArgumentParser(prog="python -m benchmarks.search.outside_folds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--weight", type=float, action="append", required=True, metavar="W")
    parser.add_argument("--out", required=True, help="a folder: one JSON file per (weight, fold), kept across runs")
    parser.add_argument("--sets", nargs="+", default=list(VALIDATIONS), metavar="SET")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = tuple(args.sets)
    folds = fold_sets(sets)
    shipped = load_index(None, None)
    base = pool(shipped, sets)
    print(f"shipped ({shipped.sha256[:12]}), {len(sets)} sets: {base.line()}", flush=True)
    ds = None
    for weight in args.weight:
        parts = []
        for f, held in enumerate(folds):
            path = out / f"w{weight:g}-fold{f}.json"
            if not path.is_file():
                if ds is None:
                    ds = newest_corpus(load_dataset("real"))
                t = time.perf_counter()
                index = fold_index(ds, weight, tuple(s for s in sets if s not in held))
                p = pool(index, held)
                path.write_text(json.dumps({
                    "weight": weight, "fold": f, "held": list(held), "sha256": index.sha256,
                    "seconds": round(time.perf_counter() - t, 1),
                    "fits": p.fits.tolist(), "top1": p.top1.tolist(), "p10": p.p10.tolist(),
                    "flagged": p.flagged.tolist(), "sets": p.sets}))
            parts.append(json.loads(path.read_text()))
            d = parts[-1]
            fits = np.array(d["fits"])
            print(f"  w {weight:g} fold {f} ({d['seconds']} s, {d['sha256'][:12]}): top-1 "
                  f"{int(np.array(d['top1'])[fits].sum())}/{int(fits.sum())}  "
                  + " ".join(f"{n}:{k}/{t}" for n, _, k, t in d["sets"]), flush=True)
        fits = np.concatenate([np.array(d["fits"]) for d in parts])
        top1 = np.concatenate([np.array(d["top1"]) for d in parts])
        p10 = np.concatenate([np.array(d["p10"]) for d in parts])
        flagged = np.concatenate([np.array(d["flagged"]) for d in parts])
        print(f"outside={weight:g}, each fold read by an index fitted on the others: top-1 {top1[fits].mean():.4f} "
              f"({int(top1[fits].sum())}/{int(fits.sum())}) P@10 {p10[fits].mean():.4f} none flagged "
              f"{int(flagged[~fits].sum())}/{int((~fits).sum())} fit flagged {int(flagged[fits].sum())}/{int(fits.sum())}"
              "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
