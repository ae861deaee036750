"""The out-of-family score: how likely it is that no family of the index fits a query, read from its hits.

A search always returns hits; what tells a model of a new design from a new model of a known one is
the shape of its hit list. Per query, from its first `K` hits (`features`): the first hit's cosine
(`top1`), its fall to the K-th (`gap`), the mean of the K (`mean`), the share of them in the first
hit's family (`agree`), the number of families among them (`families`), the first hit's lead over
the first hit of another family (`margin`), how far the query's size is from the first hit's
(`size`, |log| of the node-count ratio), and, against how close each hit itself comes to its own
nearest graph of another model (`nearest`, an index array: a tight family's graphs sit at cosine
0.99 from each other, a loose one's at 0.6), the first hit's cosine less its own (`lead`) and the
mean of that over the K (`lead_mean`); and, from outside models searched when the index was built
(`FamilyPrior`), the share of them that fit no family among those whose first hit is of the query's first
hit's family (`prior`): some families' graphs are what many designs the corpus lacks land on (a plain CNN
on VGG, an LSTM on Sequencer, a 3-D CNN on the video ResNets); and the share of the first hit's op kinds the query
has none of (`miss_kinds`: a text LSTM has no patch convolution, norm or GELU of the Sequencer it lands on).

The score is a logistic regression on some of them, fitted on validation families when the index
is built (`narbench.search_engine.outside_fit`); its output is the probability, at even odds, that
no family fits, and the flag fires from the index's `threshold`. What the header stores
(`OutsideScore`: names and numbers, JSON, no pickle) and the `nearest` array are read at search
time (`judge`): ten lookups and a dot product.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: hits the features are read from (a search computes at least this many, whatever its k)
K = 10
#: the features read from a query's hits alone
HITS = ("top1", "gap", "mean", "agree", "families", "margin", "size", "lead", "lead_mean")
FEATURES = HITS + ("prior", "miss_kinds")
#: the features that read the index's `NEAREST` array
RELATIVE = ("lead", "lead_mean")
#: the header key, and the index array of each graph's cosine to its nearest graph of another model
KEY = "out_of_family"
NEAREST = "nearest_other"


def features(sims: Sequence[float], families: Sequence[Any], query_nodes: int, hit_nodes: int,
             nearest: Sequence[float] | None = None, prior: FamilyPrior | None = None,
             kinds: tuple[Any, Any] | None = None) -> dict[str, float]:
    """The features of one query from its first hits' cosines (best first), families and `nearest` values (the
    index's `NEAREST` of each; zeros when None), its node count and the first hit's; `prior` of the first hit's
    family (0 without one); `kinds`, (the query's op kinds, the first hit's), for `miss_kinds` (0 without them).
    Cosines are taken as a hit shows them (clipped to [-1, 1], 4 decimals)."""
    s = np.round(np.clip(np.asarray(sims, dtype=np.float64), -1.0, 1.0), 4)
    if not len(s):
        return dict.fromkeys(FEATURES, 0.0)
    near = np.zeros(len(s)) if nearest is None else np.asarray(nearest, dtype=np.float64)[: len(s)]
    fam = list(families)
    other = next((x for x, f in zip(s, fam) if f != fam[0]), s[-1])
    return {"top1": float(s[0]), "gap": float(s[0] - s[-1]), "mean": float(s.mean()),
            "agree": sum(f == fam[0] for f in fam) / len(fam), "families": float(len(set(fam))),
            "margin": float(s[0] - other), "size": abs(math.log((query_nodes + 1) / (hit_nodes + 1))),
            "lead": float(s[0] - near[0]), "lead_mean": float((s - near).mean()),
            "prior": 0.0 if prior is None else prior(fam[0]), "miss_kinds": missing_kinds(*(kinds or ((), ())))}


def missing_kinds(query: Any, hit: Any) -> float:
    """The share of the op kinds of `hit` (names; any iterable, a dict's keys) that `query` has none of; 0 for a hit
    of no ops."""
    h = set(hit)
    return len(h - set(query)) / len(h) if h else 0.0


@dataclasses.dataclass(frozen=True)
class FamilyPrior:
    """Per family, of the outside models (validation sets, docs/wildval.md) whose first hit is of that family: how
    many fit no family of the index, and how many there are (`counts`); a family's value is that share pulled
    toward the share over all of them by `strength` models' weight (`default`, every family no such model hit)."""

    counts: dict[str, tuple[int, int]]
    strength: float

    @property
    def default(self) -> float:
        return _share(*(sum(c[i] for c in self.counts.values()) for i in (0, 1)))

    def __call__(self, family: Any) -> float:
        return self._value(*self.counts.get(str(family), (0, 0)), self.default)

    def _value(self, none: int, total: int, default: float) -> float:
        return (none + self.strength * default) / (total + self.strength)

    @classmethod
    def counted(cls, first: Sequence[Any], none: Sequence[bool], strength: float) -> FamilyPrior:
        """The prior of models whose first hits' families are `first`, `none` true where no family fits."""
        counts: dict[str, list[int]] = {}
        for family, positive in zip(first, none):
            c = counts.setdefault(str(family), [0, 0])
            c[0] += int(bool(positive))
            c[1] += 1
        return cls({f: (c[0], c[1]) for f, c in sorted(counts.items())}, float(strength))

    def left_out(self, first: Sequence[Any], none: Sequence[bool]) -> np.ndarray:
        """Each of the models it was counted from (`counted`'s arguments), valued by the others alone: what a
        regression is fitted on, so no model reads its own label."""
        all_none, all_total = (sum(c[i] for c in self.counts.values()) for i in (0, 1))
        out = []
        for family, positive in zip(first, none):
            n, t = self.counts.get(str(family), (0, 0))
            y = int(bool(positive))
            out.append(self._value(n - y, t - 1, _share(all_none - y, all_total - 1)))
        return np.asarray(out, dtype=np.float64)

    def to_header(self) -> dict[str, Any]:
        return {"counts": {f: list(c) for f, c in self.counts.items()}, "strength": self.strength}

    @classmethod
    def from_header(cls, entry: Any) -> FamilyPrior:
        """`ValueError` naming what is malformed."""
        counts = entry.get("counts") if isinstance(entry, dict) else None
        strength = entry.get("strength") if isinstance(entry, dict) else None
        if not isinstance(counts, dict) or not _finite(strength) or strength < 0:
            raise ValueError(f"its {KEY!r} entry's 'prior' needs 'counts' (an object) and a 'strength' >= 0")
        for family, c in counts.items():
            if not (isinstance(c, list) and len(c) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                 for v in c) and 0 <= c[0] <= c[1] and c[1] > 0):
                raise ValueError(f"its {KEY!r} entry's prior counts of {family!r} are not [none, total] with "
                                 "0 <= none <= total and total > 0")
        return cls({str(f): (int(c[0]), int(c[1])) for f, c in counts.items()}, float(strength))


@dataclasses.dataclass(frozen=True)
class OutsideScore:
    """A fitted score: standardised features -> logistic regression; flagged from `threshold`."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    k: int = K
    validation: dict[str, Any] = dataclasses.field(default_factory=dict)  # what it was chosen and fitted on
    prior: FamilyPrior | None = None  # the `prior` feature's counts, when the score reads it

    def __call__(self, feats: dict[str, float]) -> float:
        z = self.intercept + sum(c * (feats[f] - m) / s for f, m, s, c in zip(self.features, self.mean, self.scale,
                                                                           self.coef))
        return 1.0 / (1.0 + math.exp(-max(min(z, 60.0), -60.0)))

    def scores(self, x: np.ndarray) -> np.ndarray:
        """[n] scores of the rows of `x`, [n, len(FEATURES)] as `outside_fit.query_features` returns them (each row
        scored as a search scores its query, so a row and a search flag alike at the threshold)."""
        return np.array([self(dict(zip(FEATURES, row))) for row in np.asarray(x, dtype=np.float64)], dtype=np.float64)

    def to_header(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "prior"}
        out = {key: list(v) if isinstance(v, tuple) else v for key, v in out.items()}
        return out if self.prior is None else out | {"prior": self.prior.to_header()}

    @classmethod
    def from_header(cls, entry: Any) -> OutsideScore:
        """The score an index header records; `ValueError` naming what is malformed (a damaged or hand-edited file)."""
        if not isinstance(entry, dict):
            raise ValueError(f"its {KEY!r} entry is {type(entry).__name__}, not an object")
        names = entry.get("features")
        if not isinstance(names, list) or not names or any(n not in FEATURES for n in names):
            raise ValueError(f"its {KEY!r} entry names features {names!r}; known: {', '.join(FEATURES)}")
        vectors = {key: entry.get(key) for key in ("mean", "scale", "coef")}
        for key, vec in vectors.items():
            if not isinstance(vec, list) or len(vec) != len(names) or not all(_finite(v) for v in vec):
                raise ValueError(f"its {KEY!r} entry's {key!r} is not {len(names)} finite numbers")
        if any(v <= 0 for v in vectors["scale"]):
            raise ValueError(f"its {KEY!r} entry's 'scale' holds a value <= 0")
        k = entry.get("k")
        if not (_finite(entry.get("intercept")) and _finite(entry.get("threshold")) and isinstance(k, int) and k > 0):
            raise ValueError(f"its {KEY!r} entry needs a finite 'intercept' and 'threshold' and a positive 'k'")
        if "prior" in names and entry.get("prior") is None:
            raise ValueError(f"its {KEY!r} entry reads the feature 'prior' but holds no 'prior' counts")
        prior = None if entry.get("prior") is None else FamilyPrior.from_header(entry["prior"])
        return cls(tuple(names), *(tuple(float(v) for v in vectors[key]) for key in ("mean", "scale", "coef")),
                   float(entry["intercept"]), float(entry["threshold"]), k, dict(entry.get("validation") or {}), prior)


def _share(none: int, total: int) -> float:
    """`none` of `total`; 0.5 (no evidence either way) of none."""
    return none / total if total else 0.5


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """`ValueError` when an index's score entry is malformed (`OutsideScore.from_header`) or reads a `NEAREST`
    array the index lacks or has the wrong length of."""
    if header.get(KEY) is None:
        return
    score = OutsideScore.from_header(header[KEY])
    if set(score.features) & set(RELATIVE) and len(arrays.get(NEAREST, ())) != len(header["names"]):
        raise ValueError(f"its {KEY!r} score reads the array {NEAREST!r}, which does not hold one value per graph")


def stored(index) -> OutsideScore | None:
    """The index's score (read once), or None when its header has none (an index built before, or of a
    dataset with no `novel` split)."""
    if KEY not in index._cache:
        from narbench.search_engine.index import IndexFileError

        entry = index.header.get(KEY)
        try:
            check(index.header, index.arrays)
            index._cache[KEY] = None if entry is None else OutsideScore.from_header(entry)
        except ValueError as exc:
            raise IndexFileError(f"index {index.path or '(in memory)'}: {exc}; rebuild it with "
                                 "`narbench index build`") from exc
    return index._cache[KEY]


def judge(index, hits: Sequence[Any], query_nodes: int, query_ops: Any = ()) -> tuple[float | None, bool]:
    """(score, flag) of a search's hits (`Hit`s, best first, at least the score's `k` when the index has
    them), of a query of `query_ops` (op names: its kinds); (None, False) when the index has no score or there are
    no hits."""
    score = stored(index)
    if score is None or not hits:
        return None, False
    top = hits[: score.k]
    near = index.arrays.get(NEAREST)
    nearest = None if near is None else [float(near[index.row_of(h.name)]) for h in top]
    kinds = (query_ops, index.op_counts(index.row_of(top[0].name))) if "miss_kinds" in score.features else None
    p = score(features([h.similarity for h in top], [h.family for h in top], query_nodes, top[0].num_nodes,
                       nearest, score.prior, kinds))
    return round(p, 4), p >= score.threshold
