"""Does a family's prior (`narbench.search_engine.outside.FamilyPrior`) make the out-of-family score carry to a set
it was not fitted on? Each validation set left out in turn.

    python -m benchmarks.search.outside_prior [--index F] [--sets S ...] [--strength 1 3 10 30 100]  # ~1 min

Every validation set of outside models (docs/wildval.md) is searched in the index as its build searches them
(`outside_fit.query_features`, each set's newest file the index reads). Then, for each candidate (`top1, gap`, the
score shipped before session 82; `top1, gap, prior` at each `--strength`; the same with `agree, margin, size`), one
set at a time is left out: the regression (`outside_fit._fitted`, as the build fits it) is fitted on the other
sets' models, `prior` counted from them (each of their models valued by the others alone, `FamilyPrior.left_out`),
the threshold the lowest score flagging at most `OUTSIDE_FALSE_FLAG` of their fitting models (`lowest_within`), and the left-out
set's models scored and flagged. Printed per candidate, pooled over the sets left out: AUROC (`none` against
fitting), fitting flagged, `none` flagged; and with `--per-set` each set's. These are figures of sets chosen on
(validation only; no test set is read): what a set built later reads is the test of the choice.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np


@dataclass
class Searched:
    """The models of the sets searched in one index: features ([n, len(FEATURES)]), first hits' families, whether
    each fits no family, and its set."""

    x: np.ndarray
    first: list
    none: np.ndarray
    sets: np.ndarray


def searched(index, names) -> Searched:
    """`names`' models searched in `index` (each set's newest file it reads), as the index build searches them."""
    from narbench.datasets.wild import read_newest
    from narbench.search_engine.outside_fit import query_features
    from narbench.search_engine.outside_models import as_queries

    xs, first, none, sets = [], [], [], []
    for name in names:
        w = read_newest(name, index.canonical_version, index.vocab)
        xs.append(query_features(index, as_queries(w.graphs, w.vocab, index.vocab, index.canonical_version),
                                 prior=None, first=first))
        none += [not f for f in w.families]
        sets += [name] * len(w.graphs)
    return Searched(np.concatenate(xs), first, np.array(none, dtype=bool), np.array(sets, dtype=object))


def left_out(s: Searched, names: tuple[str, ...], strength: float | None, bound: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """Each model's score and flag with its set left out of the fit (module docstring); `strength` None: no prior."""
    from narbench.search_engine.outside import FEATURES, FamilyPrior
    from narbench.search_engine.outside_fit import _fitted, lowest_within

    p, flag = np.zeros(len(s.none)), np.zeros(len(s.none), dtype=bool)
    first = np.array(s.first, dtype=object)
    for held in dict.fromkeys(s.sets.tolist()):
        train, test = s.sets != held, s.sets == held
        x = s.x.copy()
        if strength is not None:
            prior = FamilyPrior.counted(first[train], s.none[train], strength)
            x[train, FEATURES.index("prior")] = prior.left_out(first[train], s.none[train])
            x[test, FEATURES.index("prior")] = [prior(f) for f in first[test]]
        score = _fitted(x[train], s.none[train].astype(np.int64), names)
        t = lowest_within(score.scores(x[train]), ~s.none[train], bound)
        p[test] = score.scores(x[test])
        flag[test] = p[test] >= t
    return p, flag


def main(argv=None) -> int:
    from sklearn.metrics import roc_auc_score

    from narbench.datasets.wild import VALIDATIONS
    from narbench.search_engine.index_file import load_index
    from narbench.search_engine.outside_fit import OUTSIDE_FALSE_FLAG

    parser = argparse.ArgumentParser(prog="python -m benchmarks.search.outside_prior",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", metavar="FILE", help="an index file (default: the shipped index)")
    parser.add_argument("--sets", nargs="+", choices=list(VALIDATIONS), default=list(VALIDATIONS), metavar="SET")
    parser.add_argument("--strength", nargs="+", type=float, default=[1.0, 3.0, 10.0, 30.0, 100.0])
    parser.add_argument("--per-set", action="store_true", help="also each set's flags")
    args = parser.parse_args(argv)
    index = load_index(None, args.index)
    s = searched(index, args.sets)
    fit, none = ~s.none, s.none
    print(f"index sha256 {index.sha256[:12]} (canonical {index.canonical_version}); {len(args.sets)} sets, "
          f"{int(fit.sum())} fitting, {int(none.sum())} none; each set left out, threshold at most "
          f"{OUTSIDE_FALSE_FLAG:g} of the others' fitting models")
    candidates = [(("top1", "gap"), None)] + [(("top1", "gap", "prior"), a) for a in args.strength]
    candidates += [(("top1", "gap", "agree", "margin", "size"), None)]
    candidates += [(("top1", "gap", "agree", "margin", "size", "prior"), a) for a in args.strength]
    for names, strength in candidates:
        p, flag = left_out(s, names, strength, OUTSIDE_FALSE_FLAG)
        label = "+".join(names) + ("" if strength is None else f" (strength {strength:g})")
        print(f"{label:<46} AUROC {roc_auc_score(none, p):.4f}  fitting flagged {int(flag[fit].sum())}/"
              f"{int(fit.sum())}  none flagged {int(flag[none].sum())}/{int(none.sum())}")
        if args.per_set:
            print("    " + " ".join(f"{n}:{int(flag[(s.sets == n) & fit].sum())}/{int(flag[(s.sets == n) & none].sum())}"
                                    for n in args.sets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
