"""The validation sets of outside models searched in one index and pooled: what a candidate rule is decided on.

    python -m benchmarks.search.pooled                          # every validation set, the shipped index
    python -m benchmarks.search.pooled --index OLD.nari --index NEW.nari --matched 31
    python -m benchmarks.search.pooled --sets wildval22 wildval23 wildval24
    python -m benchmarks.search.pooled --kinds 0 --kinds 0.35      # hits ordered with op kinds at these weights

Each set is read from its newest shipped file the index's rules allow (`narbench.datasets.wild.readable`: a rule on
raw names reaches a set only through a file re-extracted under it) and searched as `benchmarks.search.wild` searches
it (`measure`). Per set: its fitting models found first (k/n); pooled: top-1, family P@10, `none` flagged and fitting
flagged, and with `--matched J` the most `none` models a threshold on the same out-of-family score flags while it
flags at most J fitting ones (the comparison "Deciding the next candidate" in docs/canonical-graphs.md makes at the
shipped index's fitting-flag count). These are sets chosen on: figures of sets read many times, never first reads
(docs/wildval.md). Replaces the scratch pool scripts of benchmarks/results (index-edit-nuisance-2026-12-02,
canonical-2.16-2026-12-03).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Pooled:
    """Pooled figures of an index over sets: per model whether it fits, top-1, P@10, flagged and score, and per set
    its name, the rules of the file read and its fitting models found first / fitting models."""

    fits: np.ndarray
    top1: np.ndarray
    p10: np.ndarray
    flagged: np.ndarray
    score: np.ndarray
    sets: list[tuple[str, str, int, int]] = field(default_factory=list)

    def line(self) -> str:
        f, n = self.fits, ~self.fits
        return (f"top-1 {self.top1[f].mean():.4f} ({int(self.top1[f].sum())}/{int(f.sum())}) "
                f"P@10 {self.p10[f].mean():.4f} none flagged {int(self.flagged[n].sum())}/{int(n.sum())} "
                f"fit flagged {int(self.flagged[f].sum())}/{int(f.sum())}")


def matched(fit_scores, none_scores, j: int) -> tuple[int, int]:
    """The most `none` models a threshold on the score flags while it flags at most `j` fitting models (flagged: a
    score above the threshold, taken just above the (j+1)-th highest fitting score), and the fitting models it flags
    (fewer than `j` where scores tie). Every model is flagged when there are at most `j` fitting ones."""
    fit, none = np.asarray(fit_scores, dtype=np.float64), np.asarray(none_scores, dtype=np.float64)
    if j < 0:
        raise ValueError(f"j must be >= 0, not {j}")
    if j >= len(fit):
        return int(len(none)), int(len(fit))
    t = np.sort(fit)[::-1][j]
    return int((none > t).sum()), int((fit > t).sum())


def pool(index, names) -> Pooled:
    """`names`' models searched in `index`, each set from its newest file the index reads (ValueError naming a set
    that has none in the index's vocabulary)."""
    from benchmarks.search.wild import measure
    from narbench.datasets.wild import read_newest

    parts, sets = [], []
    for name in names:
        w = read_newest(name, index.canonical_version, index.vocab)
        m = measure(index, w.graphs, w.families, w.vocab)
        fits = np.array([bool(f) for f in w.families])
        parts.append((fits, m["top1"], m["p10"], m["flagged"], m["score"]))
        sets.append((name, w.header["ops"]["version"], int(m["top1"][fits].sum()), int(fits.sum())))
    cols = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    return Pooled(*cols, sets=sets)


def main(argv=None) -> int:
    from narbench.datasets.wild import VALIDATIONS
    from narbench.search_engine.index_file import load_index

    parser = argparse.ArgumentParser(prog="python -m benchmarks.search.pooled", description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", action="append", metavar="FILE",
                        help="an index file (repeat to compare; default: the shipped index)")
    parser.add_argument("--sets", nargs="+", choices=list(VALIDATIONS), default=list(VALIDATIONS), metavar="SET",
                        help="validation sets to pool (default: every one)")
    parser.add_argument("--kinds", type=float, action="append", metavar="W",
                        help="the weight of the op-kind overlap in the hits' order (narbench.search_engine.order.KINDS; "
                             "repeat to compare; default: search's)")
    parser.add_argument("--matched", type=int, action="append", metavar="J", default=[],
                        help="also the most `none` flagged with at most J fitting flagged (repeatable)")
    args = parser.parse_args(argv)
    from narbench.search_engine import order as orders

    default = orders.KINDS
    for path, kinds in [(p, w) for p in args.index or [None] for w in args.kinds or [default]]:
        index = load_index(None, path)
        orders.KINDS = kinds  # read by every search (`engine.run_search`)
        try:
            p = pool(index, args.sets)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        finally:
            orders.KINDS = default
        print(f"{path or 'shipped'} ({index.describe()}, sha256 {index.sha256[:12]}, canonical {index.canonical_version}"
              f"{'' if kinds == default else f', op kinds at {kinds}'}): {len(args.sets)} sets, {p.line()}")
        print("   ", " ".join(f"{n}@{c}:{k}/{t}" for n, c, k, t in p.sets))
        for j in args.matched:
            none, fit = matched(p.score[p.fits], p.score[~p.fits], j)
            print(f"    at most {j} fitting flagged ({fit}): none flagged {none}/{int((~p.fits).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
