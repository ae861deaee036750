"""Significance: ranx's paired tests on seed-matched per-query scores from the sidecars."""

from __future__ import annotations

import math
import warnings

import numpy as np

from narbench.leaderboard.records import Record

ALPHA = 0.05
SIG_MARK = "†"
#: the paired tests narbench runs (both ranx's), as the tables' note names them
TESTS = {"student": "two-sided paired Student's t-test, ranx `paired_student_t_test`",
         "fisher": "Fisher's randomization test, ranx `fisher_randomization_test`, 10,000 permutations, seed 0"}


def paired_scores(a: dict[int, Record], b: dict[int, Record], metric: str):
    """Seed-matched per-query scores of two rows (seed -> record each), pooled over the seeds both have.

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
    """p-value of ranx's paired test (`student`: paired t-test; `fisher`: randomization, seed 0).

    Identical score vectors give p = 1.
    """
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    if len(control) < 2 or np.array_equal(control, treatment):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if stat_test == "student":
            p, _ = paired_student_t_test(control, treatment, ALPHA)
        elif stat_test == "fisher":
            p, _ = fisher_randomization_test(control, treatment, 10000, ALPHA, 0)
        else:
            raise ValueError(f"unknown statistical test {stat_test!r} (student, fisher)")
    p = float(p)
    return 1.0 if math.isnan(p) else p
