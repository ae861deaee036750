"""Significance and confidence intervals of the leaderboard's cells, from the per-query sidecars.

A row of the leaderboard is a configuration run with several seeds; each run scores every query.
Its mean therefore varies with the queries (another query sample) *and* with training (another
seed). The default test, `bootstrap`, respects both: a two-level (hierarchical) paired bootstrap
that resamples the queries with replacement, the same resampled queries for both rows (paired),
and, independently per row, the row's seeds with replacement; a row's score on one resample is the
mean over its resampled seeds of the mean over the resampled queries. `B` resamples drawn from
`np.random.default_rng(BOOT_SEED)`; the two-sided p of the mean difference is
2 min(P(d <= 0), P(d >= 0)), capped at 1. The same resamples give each row's 95% percentile
confidence interval of its mean (`row_ci`).

ranx's paired tests (`student`, `fisher`) stay available; they test per-query means over each
row's seeds (one value per query), which accounts for query variance only. `student-pooled`, the
test of earlier leaderboards (seed-matched per-query scores of all seeds concatenated, one query
counted once per seed as if independent), is kept to measure what changed; it is never a default.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np

from narbench.leaderboard.records import Record

ALPHA = 0.05
SIG_MARK = "†"
#: bootstrap resamples, and the numpy seed they are drawn from
B = 10_000
BOOT_SEED = 0
CI_LEVEL = 0.95
DEFAULT_TEST = "bootstrap"
#: the tests the tables' † may come from, as the tables' note names them
TESTS = {
    "bootstrap": f"two-level paired bootstrap over queries and seeds, {B:,} resamples, numpy seed {BOOT_SEED}",
    "student": "two-sided paired Student's t-test on per-query means over each row's seeds, "
               "ranx `paired_student_t_test`",
    "fisher": "Fisher's randomization test on per-query means over each row's seeds, ranx "
              "`fisher_randomization_test`, 10,000 permutations, seed 0",
    "student-pooled": "paired Student's t-test on seed-matched per-query scores pooled over seeds (the test of "
                      "earlier leaderboards; it counts a query once per seed and ignores training variance)",
}
#: resamples are processed in chunks of this many (bounds the memory of one step)
_CHUNK = 1_000


def seed_matrix(runs: dict[int, Record], metric: str) -> np.ndarray | None:
    """A row's per-query scores of `metric`, one line per seed (seeds sorted): shape (seeds, queries).

    None when a seed lacks the metric's per-query scores or the seeds scored different numbers of
    queries (they are not the same queries).
    """
    xs = [runs[s].per_query.get(metric) for s in sorted(runs)]
    if not xs or any(x is None for x in xs) or len({len(x) for x in xs}) != 1:
        return None
    return np.asarray(np.stack(xs), dtype=np.float64)


def paired_scores(a: dict[int, Record], b: dict[int, Record], metric: str):
    """Seed-matched per-query scores of two rows (seed -> record each), pooled over the seeds both have
    (the `student-pooled` test only).

    Returns (scores_a, scores_b, seeds used); a seed whose two runs scored different numbers of
    queries is left out (they are not the same queries).
    """
    xs, ys, used = [], [], []
    for seed in sorted(set(a) & set(b)):
        sa, sb = a[seed].per_query.get(metric), b[seed].per_query.get(metric)
        if sa is None or sb is None or len(sa) != len(sb):
            continue
        xs.append(sa)
        ys.append(sb)
        used.append(seed)
    if not used:
        return np.empty(0), np.empty(0), []
    return np.concatenate(xs), np.concatenate(ys), used


def paired_test(control: np.ndarray, treatment: np.ndarray, stat_test: str = "student") -> float:
    """p-value of ranx's paired test of two per-query score vectors (`student`: paired t-test;
    `fisher`: randomization, seed 0). Identical score vectors give p = 1.
    """
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    if len(control) < 2 or np.array_equal(control, treatment):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if stat_test in ("student", "student-pooled"):
            p, _ = paired_student_t_test(control, treatment, ALPHA)
        elif stat_test == "fisher":
            p, _ = fisher_randomization_test(control, treatment, 10000, ALPHA, 0)
        else:
            raise ValueError(f"unknown statistical test {stat_test!r} (student, fisher)")
    p = float(p)
    return 1.0 if math.isnan(p) else p


def _streams(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """The two independent streams of numpy seed `seed`: the queries' draws, the seeds' draws."""
    queries, seeds = np.random.SeedSequence(seed).spawn(2)
    return queries, seeds


@lru_cache(maxsize=2)
def _query_counts(n_queries: int, n_boot: int, seed: int) -> np.ndarray:
    """How often each query is drawn in each of `n_boot` resamples of `n_queries` queries with
    replacement (n_boot x n_queries); the same for every row with that many queries (paired)."""
    rng = np.random.default_rng(_streams(seed)[0])
    dtype = np.uint16 if n_queries < 2**16 else np.uint32
    counts = np.empty((n_boot, n_queries), dtype=dtype)
    for lo in range(0, n_boot, _CHUNK):
        hi = min(lo + _CHUNK, n_boot)
        idx = rng.integers(0, n_queries, (hi - lo, n_queries)) + n_queries * np.arange(hi - lo)[:, None]
        counts[lo:hi] = np.bincount(idx.ravel(), minlength=(hi - lo) * n_queries).reshape(hi - lo, n_queries)
    counts.setflags(write=False)
    return counts


@lru_cache(maxsize=64)
def _seed_weights(n_seeds: tuple[int, ...], n_boot: int, seed: int) -> tuple[np.ndarray, ...]:
    """Per row of a comparison (`n_seeds`: each row's number of seeds, in order), how often each of
    its seeds is drawn in each resample, divided by its number of seeds (n_boot x seeds): rows draw
    independently of each other, and of the queries."""
    rng = np.random.default_rng(_streams(seed)[1])
    out = []
    for n in n_seeds:
        idx = rng.integers(0, n, (n_boot, n)) + n * np.arange(n_boot)[:, None]
        w = np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n) / n
        w.setflags(write=False)
        out.append(w)
    return tuple(out)


class Bootstrap:
    """The two-level bootstrap of one leaderboard: resampled queries shared by every row of a query
    count (paired), each row's query means computed once (`query_means`, cached by `name`).

    `prepare` computes many rows' query means in one pass over the resamples (one matrix product per
    query count): the cost is B x queries x (seeds x metrics) multiply-adds, whatever the comparisons.
    """

    def __init__(self, n_boot: int = B, seed: int = BOOT_SEED) -> None:
        self.n_boot, self.seed = n_boot, seed
        self._means: dict[object, np.ndarray] = {}
        self._ci: dict[tuple[object, float], tuple[float, float]] = {}

    def prepare(self, matrices: dict[object, np.ndarray]) -> None:
        """Compute and cache the query means of every seed matrix of `matrices` (name -> matrix) not
        cached yet, one batched product per query count."""
        todo: dict[int, list[tuple[object, np.ndarray]]] = {}
        for name, x in matrices.items():
            if x is not None and name not in self._means:
                todo.setdefault(x.shape[1], []).append((name, x))
        for n_queries, items in todo.items():
            counts = _query_counts(n_queries, self.n_boot, self.seed)
            xt = np.concatenate([x for _, x in items]).T / n_queries  # queries x (all seeds of all rows)
            outs = [np.empty((self.n_boot, len(x)), dtype=np.float32) for _, x in items]
            edges = np.cumsum([0] + [len(x) for _, x in items])
            for lo in range(0, self.n_boot, _CHUNK):
                block = counts[lo:lo + _CHUNK].astype(np.float64) @ xt
                for out, e0, e1 in zip(outs, edges[:-1], edges[1:]):
                    out[lo:lo + _CHUNK] = block[:, e0:e1]
            for (name, _), out in zip(items, outs):
                out.setflags(write=False)
                self._means[name] = out

    def query_means(self, x: np.ndarray, name: object = None) -> np.ndarray:
        """Mean over the resampled queries, per resample and seed: (n_boot, seeds) (float32), for a
        row's `seed_matrix` x; cached under `name` when one is given."""
        if name is None:
            name = ("", id(x))
            self.prepare({name: x})
            return self._means.pop(name)
        self.prepare({name: x})
        return self._means[name]

    def _scores(self, means: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """One score per resample: the mean over resampled seeds (their weights) of the query means."""
        return np.einsum("bs,bs->b", means, weights, dtype=np.float64) if means.shape[1] > 1 \
            else means[:, 0].astype(np.float64)

    def scores(self, x: np.ndarray, name: object = None) -> np.ndarray:
        """A row's resampled means (n_boot,): the distribution its confidence interval is read from."""
        (w,) = _seed_weights((len(x),), self.n_boot, self.seed)
        return self._scores(self.query_means(x, name), w)

    def ci(self, x: np.ndarray, name: object = None, level: float = CI_LEVEL) -> tuple[float, float]:
        """Percentile confidence interval of a row's mean (over its queries and seeds); cached under `name`."""
        if name is not None and (name, level) in self._ci:
            return self._ci[(name, level)]
        lo, hi = np.percentile(self.scores(x, name), [50 * (1 - level), 50 * (1 + level)])
        if name is not None:
            self._ci[(name, level)] = (float(lo), float(hi))
        return float(lo), float(hi)

    def test(self, a: np.ndarray, b: np.ndarray, name_a: object = None, name_b: object = None) -> float:
        """Two-sided p of the difference of two rows' means (seed matrices on the same queries).

        Queries are resampled together (paired), seeds independently per row (a's seeds first).
        """
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"the rows scored different numbers of queries ({a.shape[1]}, {b.shape[1]})")
        if np.array_equal(a, b):
            return 1.0
        wa, wb = _seed_weights((len(a), len(b)), self.n_boot, self.seed)
        d = self._scores(self.query_means(a, name_a), wa) - self._scores(self.query_means(b, name_b), wb)
        d = np.round(d, 12)  # the arithmetic's last bits never decide a sign (a row of identical seeds)
        p = 2 * min(float((d <= 0).mean()), float((d >= 0).mean()))
        return min(1.0, p)


def bootstrap_test(a: np.ndarray, b: np.ndarray, n_boot: int = B, seed: int = BOOT_SEED) -> float:
    """Two-sided p of the two-level paired bootstrap (`Bootstrap.test`) of two seed matrices
    (seeds x queries, the same queries in the same order)."""
    return Bootstrap(n_boot, seed).test(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def bootstrap_ci(x: np.ndarray, n_boot: int = B, seed: int = BOOT_SEED, level: float = CI_LEVEL) -> tuple[float, float]:
    """95% percentile interval of a row's mean from its seed matrix (`Bootstrap.ci`)."""
    return Bootstrap(n_boot, seed).ci(np.asarray(x, dtype=np.float64), level=level)
