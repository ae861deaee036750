"""Significance: ranx's paired tests on seed-matched per-query scores from the sidecars."""

from __future__ import annotations

import gzip
import json
import math
import warnings

import numpy as np

from narbench.leaderboard.records import Record

ALPHA = 0.05
SIG_MARK = "†"


def load_sidecar(rec: Record, cache: dict) -> dict[str, np.ndarray] | None:
    path = rec.sidecar
    if path not in cache:
        if not path.is_file():
            cache[path] = None
        else:
            try:
                raw = json.loads(gzip.decompress(path.read_bytes()))
            except (OSError, ValueError) as exc:
                raise ValueError(f"{path}: not a valid per-query sidecar ({exc})") from exc
            cache[path] = {k: np.asarray(v, dtype=np.float64) for k, v in raw.items()}
    return cache[path]


def paired_scores(a: dict[int, Record], b: dict[int, Record], metric: str, cache: dict | None = None):
    """Seed-matched per-query scores of two rows, pooled over the seeds both have.

    Returns (scores_a, scores_b, seeds used); seeds whose sidecars are missing or whose query
    counts differ are left out.
    """
    cache = {} if cache is None else cache
    xs, ys, used = [], [], []
    for seed in sorted(set(a) & set(b)):
        sa, sb = load_sidecar(a[seed], cache), load_sidecar(b[seed], cache)
        if sa is None or sb is None or metric not in sa or metric not in sb or len(sa[metric]) != len(sb[metric]):
            continue
        xs.append(sa[metric])
        ys.append(sb[metric])
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
