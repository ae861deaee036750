"""Would an out-of-family score fitted on the outside validation models themselves flag better than the shipped one?

    python -m benchmarks.search.outside_refit [--fit wildval wildval2 wildval3 wildval4] [--carry wildval5]  # ~1 min

The shipped score (`narbench.search_engine.outside_fit`) is a logistic regression fitted on the corpus' own
hold-outs (held-out families, models and sources), its feature set and threshold then chosen on `wildval`. This
study fits the same kind of model (scikit-learn, balanced classes, standardised features from
`narbench.search_engine.outside.features`, the first 10 hits by cosine) on the `--fit` sets' models directly
(`none` rows positive), for each candidate feature set of `outside_fit.CANDIDATES` that needs no index array, and
prints: the AUROC with one `--fit` set left out at a time (mean), the AUROC on the `--carry` set (a set no choice was
made on), and the flags at two thresholds chosen on the `--fit` sets (Youden's J; the lowest score flagging at most 1
in 10 fitting models) on both. The shipped score's figures first. Validation sets only: no test set is read.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

#: issue 59's target for fitting models flagged
FIT_FLAGGED = 0.1


def rows_of(index, names: list[str]) -> list[dict]:
    """Per model of the named sets: its set, whether it fits no family, the shipped score and flag, and its features
    (its first 10 hits by cosine, searched as `wild.measure` searches it)."""
    from benchmarks.search.wild import measure
    from narbench.datasets.wild import read_newest
    from narbench.search_engine.outside import features

    out = []
    for name in names:
        wild = read_newest(name, index.canonical_version, index.vocab)
        for g, want, r in zip(wild.graphs, wild.families,
                              measure(index, wild.graphs, wild.families, wild.vocab, order="cosine")["results"]):
            top = r.hits[:10]
            f = features([h.similarity for h in top], [h.family for h in top], g.num_nodes, top[0].num_nodes, None)
            out.append({"set": name, "none": not want, "score": r.out_of_family, "flag": bool(r.no_family_fits), **f})
    return out


def _xy(rows: list[dict], names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([[r[f] for f in names] for r in rows]), np.array([r["none"] for r in rows])


def _fit(rows: list[dict], names: tuple[str, ...]):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = _xy(rows, names)
    return make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced")).fit(x, y)


def _flags(p: np.ndarray, y: np.ndarray, t: float) -> str:
    return f"fit {int((p[~y] >= t).sum())}/{int((~y).sum())}, none {int((p[y] >= t).sum())}/{int(y.sum())}"


def study(rows: list[dict], fit: list[str], carry: list[str]) -> list[str]:
    """The printed lines (module docstring)."""
    from sklearn.metrics import roc_auc_score

    from narbench.search_engine.outside import RELATIVE
    from narbench.search_engine.outside_fit import CANDIDATES

    train = [r for r in rows if r["set"] in fit]
    test = [r for r in rows if r["set"] in carry]
    lines = []
    for label, part in (("fit sets", train), ("carry sets", test)):
        y = np.array([r["none"] for r in part])
        s = np.array([r["score"] for r in part])
        f = np.array([r["flag"] for r in part])
        lines.append(f"shipped score on the {label}: AUROC {roc_auc_score(y, s):.3f}; flags {_flags(f.astype(float), y, 0.5)}")
    for names in [c for c in CANDIDATES if not set(c) & set(RELATIVE)]:
        left_out = []
        for hold in fit:
            model = _fit([r for r in train if r["set"] != hold], names)
            x, y = _xy([r for r in train if r["set"] == hold], names)
            left_out.append(roc_auc_score(y, model.predict_proba(x)[:, 1]))
        model = _fit(train, names)
        (xa, ya), (xb, yb) = _xy(train, names), _xy(test, names)
        pa, pb = model.predict_proba(xa)[:, 1], model.predict_proba(xb)[:, 1]
        ts = np.unique(pa)
        youden = max(ts, key=lambda t: ((pa[ya] >= t).mean() - (pa[~ya] >= t).mean(), t))
        bounded = min([t for t in ts if (pa[~ya] >= t).mean() <= FIT_FLAGGED], default=1.0)
        lines.append(f"{'+'.join(names)}: AUROC one fit set left out {np.mean(left_out):.3f}, carry "
                     f"{roc_auc_score(yb, pb):.3f} | Youden: fit sets {_flags(pa, ya, youden)}; carry "
                     f"{_flags(pb, yb, youden)} | <= 1 in 10 fitting: fit sets {_flags(pa, ya, bounded)}; carry "
                     f"{_flags(pb, yb, bounded)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", nargs="+", default=["wildval", "wildval2", "wildval3", "wildval4"])
    parser.add_argument("--carry", nargs="+", default=["wildval5"])
    args = parser.parse_args(argv)
    from narbench.search_engine.index_file import load_index

    index = load_index(None, None)
    print(f"index sha256 {index.sha256[:12]}; fit on {', '.join(args.fit)}; carry {', '.join(args.carry)}")
    for line in study(rows_of(index, args.fit + args.carry), args.fit, args.carry):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
