"""Significance and confidence intervals of the leaderboard's cells, from the per-query sidecars.

A row of the leaderboard is a configuration run with a few seeds; each run scores every query.
Its mean varies with the queries (another sample of queries) *and* with training (another seed).
The default test, `bootstrap`, respects both, on two levels:

- queries: the per-query scores averaged over each row's seeds are resampled with replacement, in
  whole clusters of queries that depend on each other (`unit="cluster"`: the source model on `real`
  standard and unseen, package x family on crossimpl, the edit-distance class on nas;
  `narbench.leaderboard.clusters`), the same resampled clusters for both rows (paired), `B` times;
  a resample's mean is its queries' mean (sum over the drawn clusters / their query count).
  `unit="query"` (the test `bootstrap-query`) resamples single queries, as the leaderboard did
  before issue 58; with one query per cluster the two give the same p;
- seeds: each row's seed-to-seed spread adds, independently per row, its standard error over
  seeds times a Student t draw (S - 1 degrees of freedom for one row; Welch-Satterthwaite's for
  the difference of two). A row whose seeds scored identically (a deterministic training-free
  encoder such as `wl`) adds nothing; a single seed has no spread to measure (the tables test a
  single seed only of a training-free encoder, whose seeds vary little or not at all).

Why not resample the seeds too: with S = 3 seeds a resample of seeds has 10 distinct outcomes and
its spread is (S - 1) / S of the seeds' own, so such a bootstrap marks two rows that differ by
seed noise alone about 1 time in 6 at alpha 0.05 (measured on simulated rows; see docs/protocol.md).

The two-sided p of the mean difference d is 2 min(P(d <= 0), P(d >= 0)), capped at 1; the same
construction gives each row's 95% percentile confidence interval of its mean (`Bootstrap.ci`).
Every draw comes from numpy seed `BOOT_SEED` (`np.random.SeedSequence(0)`, one child stream for
the queries, one for the t draws), so the same inputs give the same p and interval.

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

from narbench.leaderboard.clusters import describe_units, first_appearance_ids, layout_key, query_groups
from narbench.leaderboard.records import Record

ALPHA = 0.05
SIG_MARK = "†"
#: bootstrap resamples, and the numpy seed they are drawn from
B = 10_000
BOOT_SEED = 0
CI_LEVEL = 0.95
DEFAULT_TEST = "bootstrap"
#: the bootstrap's resampling units: clusters of dependent queries (the default), or single queries
UNITS = ("cluster", "query")
DEFAULT_UNIT = "cluster"
#: the tests the tables' † may come from, as the tables' note names them
TESTS = {
    "bootstrap": f"two-level paired cluster bootstrap: whole clusters of dependent queries resampled, by "
                 f"{describe_units()}; seed-to-seed spread as Student t, {B:,} resamples, numpy seed {BOOT_SEED}",
    "bootstrap-query": f"two-level paired bootstrap: single queries resampled as if independent (the test before "
                       f"issue 58), seed-to-seed spread as Student t, {B:,} resamples, numpy seed {BOOT_SEED}",
    "student": "two-sided paired Student's t-test on per-query means over each row's seeds, "
               "ranx `paired_student_t_test`",
    "fisher": "Fisher's randomization test on per-query means over each row's seeds, ranx "
              "`fisher_randomization_test`, 10,000 permutations, seed 0",
    "student-pooled": "paired Student's t-test on seed-matched per-query scores pooled over seeds (the test of "
                      "earlier leaderboards; it counts a query once per seed and ignores training variance)",
}
#: the bootstrap unit of each bootstrap test (the others' intervals resample single queries, as they always did)
TEST_UNIT = {"bootstrap": "cluster", "bootstrap-query": "query"}
#: resamples are processed in chunks of this many (bounds the memory of one step)
_CHUNK = 1_000


class SeedMatrix(np.ndarray):
    """A row's per-query scores, seeds x queries, that knows where its queries come from: `record` (one of
    the runs; `clusters.query_groups` finds each query's cluster from its dataset, when first asked) or
    `labels` (a cluster label per query, given: `with_clusters`)."""

    record: Record | None = None
    labels: np.ndarray | None = None

    def __array_finalize__(self, obj) -> None:
        self.record, self.labels = getattr(obj, "record", None), getattr(obj, "labels", None)


def with_clusters(x, clusters) -> SeedMatrix:
    """Seed matrix `x` (seeds x queries; one row of queries is one seed) with a cluster label per query."""
    out = np.atleast_2d(np.asarray(x, dtype=np.float64)).view(SeedMatrix)
    labels = np.asarray(clusters)
    if labels.shape != (out.shape[1],):
        raise ValueError(f"{labels.shape[0] if labels.ndim else 0} cluster labels for {out.shape[1]} queries")
    out.labels = labels
    return out


def _layout(x: np.ndarray, unit: str) -> tuple[tuple, np.ndarray | None]:
    """(key, cluster ids) of the queries of seed matrix `x` under `unit`: ids None for single queries (also
    when every cluster holds one query, numbered in query order: the same draws, the same p)."""
    n = x.shape[1]
    if unit == "query":
        return ("query", n), None
    if unit != "cluster":
        raise ValueError(f"unknown bootstrap unit {unit!r} ({', '.join(UNITS)})")
    labels = getattr(x, "labels", None)
    if labels is not None:
        ids = first_appearance_ids(labels.tolist())
        key = ("cluster", n, layout_key(ids))
    elif getattr(x, "record", None) is not None:
        groups = query_groups(x.record)
        ids, key = groups.ids, ("cluster", n, groups.key)
    else:
        raise ValueError("the per-query scores carry no cluster of their queries: give them (`with_clusters`) or "
                         "resample single queries (unit='query')")
    if len(ids) != n:
        raise ValueError(f"{len(ids)} cluster ids for {n} queries")
    if n == 0 or int(ids.max()) == n - 1:  # one query per cluster (numbered by first appearance: in order)
        return ("query", n), None
    return key, ids


def seed_matrix(runs: dict[int, Record], metric: str) -> SeedMatrix | None:
    """A row's per-query scores of `metric`, one line per seed (seeds sorted): shape (seeds, queries), a
    `SeedMatrix` that knows its records (their queries' clusters).

    None when a seed lacks the metric's per-query scores or the seeds scored different numbers of
    queries (they are not the same queries).
    """
    xs = [runs[s].per_query.get(metric) for s in sorted(runs)]
    if not xs or any(x is None for x in xs) or len({len(x) for x in xs}) != 1:
        return None
    out = np.asarray(np.stack(xs), dtype=np.float64).view(SeedMatrix)
    out.record = runs[min(runs)]  # the queries' clusters are found from it when a clustered test asks
    return out


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

    control, treatment = np.asarray(control), np.asarray(treatment)  # plain arrays for ranx's numba kernels
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
    """The two independent streams of numpy seed `seed`: the queries' draws, the t draws."""
    queries, spread = np.random.SeedSequence(seed).spawn(2)
    return queries, spread


@lru_cache(maxsize=4)
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


@lru_cache(maxsize=256)
def _t_draws(df: float, n_boot: int, seed: int) -> np.ndarray:
    """`n_boot` Student t draws with `df` degrees of freedom (the same for the same df)."""
    out = np.random.default_rng(_streams(seed)[1]).standard_t(df, n_boot)
    out.setflags(write=False)
    return out


def seed_se(x: np.ndarray) -> float:
    """Standard error over seeds of a row's mean: the sample std of its seeds' means / sqrt(seeds);
    0 for identical seeds, NaN for a single seed (unknown)."""
    if len(x) < 2:
        return math.nan
    m = x.mean(axis=1)
    return 0.0 if (m == m[0]).all() else float(m.std(ddof=1) / math.sqrt(len(x)))


def welch_df(a: np.ndarray, b: np.ndarray) -> float:
    """Welch-Satterthwaite degrees of freedom of the difference of two rows' seed means (seed
    matrices); a row with zero (or unknown: one seed) spread contributes none. NaN when neither spreads."""
    parts = [(seed_se(x) ** 2, len(x) - 1) for x in (a, b) if len(x) > 1 and seed_se(x) > 0]
    if not parts:
        return math.nan
    return sum(v for v, _ in parts) ** 2 / sum(v * v / k for v, k in parts)


class Bootstrap:
    """The two-level bootstrap of one leaderboard: resampled clusters (or queries, `unit`) shared by every
    row of one query layout (paired), each row's resampled query means computed once (cached by `name`).

    `prepare` computes many rows' resampled means in one pass over the resamples (one matrix product
    per layout): B x clusters x rows multiply-adds, whatever the number of comparisons.
    """

    def __init__(self, n_boot: int = B, seed: int = BOOT_SEED, unit: str = DEFAULT_UNIT) -> None:
        if unit not in UNITS:
            raise ValueError(f"unknown bootstrap unit {unit!r} ({', '.join(UNITS)})")
        self.n_boot, self.seed, self.unit = n_boot, seed, unit
        self._means: dict[object, np.ndarray] = {}
        self._ci: dict[tuple[object, float], tuple[float, float]] = {}

    def prepare(self, matrices: dict[object, np.ndarray | None]) -> None:
        """Compute and cache the resampled query means of every seed matrix of `matrices`
        (name -> matrix; None is skipped) not cached yet, one batched product per layout.

        Under unit `cluster` a matrix must know its queries' clusters (`SeedMatrix`); `ClusterError`
        (from `clusters.query_groups`) or ValueError when it does not."""
        todo: dict[tuple, tuple[np.ndarray | None, list[tuple[object, np.ndarray]]]] = {}
        for name, x in matrices.items():
            if x is not None and name not in self._means:
                key, ids = _layout(x, self.unit)
                todo.setdefault(key, (ids, []))[1].append((name, x))
        for key, (ids, items) in todo.items():
            xt = np.stack([np.asarray(x).mean(axis=0) for _, x in items], axis=1)  # queries x rows
            n_queries = xt.shape[0]
            if ids is None:  # single queries: the mean of n draws
                counts = _query_counts(n_queries, self.n_boot, self.seed)
                xt, sizes = xt / n_queries, None
            else:  # whole clusters: the drawn clusters' sum over their number of queries
                n_clusters = int(ids.max()) + 1
                counts = _query_counts(n_clusters, self.n_boot, self.seed)
                sums = np.zeros((n_clusters, xt.shape[1]))
                np.add.at(sums, ids, xt)
                xt, sizes = sums, np.bincount(ids, minlength=n_clusters).astype(np.float64)
            out = np.empty((self.n_boot, len(items)))
            for lo in range(0, self.n_boot, _CHUNK):
                c = counts[lo:lo + _CHUNK].astype(np.float64)
                out[lo:lo + _CHUNK] = c @ xt if sizes is None else (c @ xt) / (c @ sizes)[:, None]
            for j, (name, _) in enumerate(items):
                col = np.ascontiguousarray(out[:, j])
                col.setflags(write=False)
                self._means[name] = col

    def query_means(self, x: np.ndarray, name: object = None) -> np.ndarray:
        """The mean over resampled queries of a row's per-query seed means (n_boot,), for its
        `seed_matrix` x; cached under `name` when one is given."""
        if name is None:
            name = ("", id(x))
            self.prepare({name: x})
            return self._means.pop(name)
        self.prepare({name: x})
        return self._means[name]

    def scores(self, x: np.ndarray, name: object = None) -> np.ndarray:
        """A row's resampled means (n_boot,), queries and seeds: the distribution its confidence
        interval is read from (a single seed: queries only)."""
        q, se = self.query_means(x, name), seed_se(x)
        if math.isnan(se) or se == 0:
            return q
        return q + se * _t_draws(float(len(x) - 1), self.n_boot, self.seed)

    def ci(self, x: np.ndarray, name: object = None, level: float = CI_LEVEL) -> tuple[float, float]:
        """Percentile confidence interval of a row's mean (over its queries and seeds); cached under `name`."""
        if name is not None and (name, level) in self._ci:
            return self._ci[(name, level)]
        lo, hi = np.percentile(self.scores(x, name), [50 * (1 - level), 50 * (1 + level)])
        if name is not None:
            self._ci[(name, level)] = (float(lo), float(hi))
        return float(lo), float(hi)

    def test(self, a: np.ndarray, b: np.ndarray, name_a: object = None, name_b: object = None) -> float:
        """Two-sided p of the difference of two rows' means (seed matrices on the same queries, in
        the same order): queries resampled together (paired), plus the rows' seed spread as a
        Student t (Welch-Satterthwaite). A single-seed row adds no seed spread: whether it may be
        tested at all is the caller's call (the tables test it only for a training-free encoder)."""
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"the rows scored different numbers of queries ({a.shape[1]}, {b.shape[1]})")
        if _layout(a, self.unit)[0] != _layout(b, self.unit)[0]:
            raise ValueError("the rows' queries fall into different clusters: they are not the same queries")
        if np.array_equal(a, b):
            return 1.0
        d = self.query_means(a, name_a) - self.query_means(b, name_b)
        var = sum(seed_se(x) ** 2 for x in (a, b) if len(x) > 1)
        if var > 0:
            d = d + math.sqrt(var) * _t_draws(welch_df(a, b), self.n_boot, self.seed)
        d = np.round(d, 12)  # the arithmetic's last bits never decide a sign
        p = 2 * min(float((d <= 0).mean()), float((d >= 0).mean()))
        return min(1.0, p)


def bootstrap_test(a: np.ndarray, b: np.ndarray, n_boot: int = B, seed: int = BOOT_SEED, *, clusters=None,
                   unit: str = DEFAULT_UNIT) -> float:
    """Two-sided p of the two-level paired bootstrap (`Bootstrap.test`) of two seed matrices (seeds x
    queries, the same queries in the same order). Unit `cluster` (the default) takes the queries' clusters
    from `clusters` (a label per query) or from the matrices (`seed_matrix`); `query` resamples single queries."""
    a, b = _matrix(a, clusters), _matrix(b, clusters)
    return Bootstrap(n_boot, seed, unit).test(a, b)


def bootstrap_ci(x: np.ndarray, n_boot: int = B, seed: int = BOOT_SEED, level: float = CI_LEVEL, *, clusters=None,
                 unit: str = DEFAULT_UNIT) -> tuple[float, float]:
    """95% percentile interval of a row's mean from its seed matrix (`Bootstrap.ci`; clusters as `bootstrap_test`)."""
    return Bootstrap(n_boot, seed, unit).ci(_matrix(x, clusters), level=level)


def _matrix(x, clusters) -> np.ndarray:
    """`x` as a float64 seed matrix, keeping what it knows of its clusters; with `clusters` given, those."""
    if clusters is not None:
        return with_clusters(x, clusters)
    return np.asanyarray(x, dtype=np.float64)
