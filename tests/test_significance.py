"""The test behind the tables' † (`narbench.leaderboard.significance`): it must count seed variance.

Simulated rows: every row scores the same queries (a per-query base shared by all rows), each seed
shifts a row's scores by a seed offset (training noise) and adds per-query noise. Two rows that
differ only by such noise must not be marked; a real per-query difference must be; the test of
earlier leaderboards (per-query scores pooled over seeds) marks the noise.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.leaderboard.significance import (
    ALPHA,
    Bootstrap,
    SeedMatrix,
    bootstrap_ci,
    bootstrap_test,
    paired_test,
    seed_matrix,
    with_clusters,
)
from tests.handmade import write_result

N_QUERIES = 150


#: the simulated queries are independent draws: resampled one by one (clustered queries: the tests further down)
_test = partial(bootstrap_test, unit="query")
_ci = partial(bootstrap_ci, unit="query")


def _rows(draw: int, *, delta: float = 0.0, seed_sd: float = 0.03, query_sd: float = 0.05, seeds: int = 3):
    """Two rows (seeds x queries) on one per-query base; the second lower by `delta` on every query."""
    rng = np.random.default_rng(draw)
    base = rng.uniform(0.3, 0.9, N_QUERIES)
    return [np.clip(base - d + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, query_sd, (seeds, N_QUERIES)), 0, 1)
            for d in (0.0, delta)]


def _ordered(a, b):
    return (a, b) if a.mean() >= b.mean() else (b, a)


def test_seed_noise_alone_is_rarely_significant_where_the_pooled_test_marks_it_almost_always():
    """200 pairs that differ by seed noise alone: at alpha 0.05 a valid test marks about 5% of them
    (this one, slightly conservative, ~2%); the pooled t-test counts each query three times as
    independent and ignores training variance: it marks most of them."""
    boot = pooled = seedmean = 0
    n = 200
    for draw in range(1000, 1000 + n):
        a, b = _ordered(*_rows(draw))
        boot += _test(a, b) < ALPHA
        pooled += paired_test(a.ravel(), b.ravel(), "student") < ALPHA
        seedmean += paired_test(a.mean(axis=0), b.mean(axis=0), "student") < ALPHA
    assert boot / n <= ALPHA
    assert pooled / n >= 0.5 and seedmean / n >= 0.5  # query variance only: seed noise looks significant


def test_a_real_per_query_difference_is_significant():
    for draw in range(5):
        a, b = _rows(draw, delta=0.1, seed_sd=0.01)
        assert _test(a, b) < 0.01
    # a deterministic encoder against another: no seed variance, the queries decide
    rng = np.random.default_rng(0)
    q = rng.uniform(0.3, 0.9, N_QUERIES)
    worse = np.clip(q - 0.02 + rng.normal(0, 0.02, N_QUERIES), 0, 1)
    assert _test(np.tile(q, (3, 1)), np.tile(worse, (3, 1))) < 0.01


def test_training_free_row_against_itself_is_p_one_and_has_no_seed_spread():
    q = np.random.default_rng(3).uniform(0, 1, N_QUERIES)
    same = np.tile(q, (3, 1))  # identical seeds: a deterministic training-free encoder
    assert _test(same, same) == 1.0
    assert _test(same, same[:2]) == 1.0  # fewer seeds of it: still the same scores
    lo, hi = _ci(same)
    assert (lo, hi) == pytest.approx(_ci(q[None]), rel=1e-12)  # its interval is the queries' alone
    assert lo < q.mean() < hi


def test_same_inputs_give_the_same_p_and_interval():
    a, b = _rows(7, delta=0.02)
    assert _test(a, b) == _test(a.copy(), b.copy())
    assert _ci(a) == _ci(a.copy())
    boot = Bootstrap(unit="query")
    boot.prepare({"a": a, "b": b})  # batched with other rows: the same numbers as alone
    assert boot.test(a, b, "a", "b") == _test(a, b)
    assert boot.ci(a, "a") == pytest.approx(_ci(a), rel=1e-12)  # the product's last bits aside


def test_interval_widens_with_seed_variance():
    quiet, _ = _rows(11, seed_sd=0.001)
    noisy, _ = _rows(11, seed_sd=0.05)
    (ql, qh), (nl, nh) = _ci(quiet), _ci(noisy)
    assert nh - nl > 2 * (qh - ql) and ql < quiet.mean() < qh and nl < noisy.mean() < nh


def _block(tables):
    t1 = next(t for t in tables if t.number == 1)
    return {r.label: r for r in next(b for b in t1.blocks if b.rows).rows}, next(b for b in t1.blocks if b.rows)


def test_tables_mark_real_differences_not_seed_noise(tmp_path):
    """gcn and gat differ by seed noise alone, gin is 0.1 below gcn on every query, wl (training-free,
    identical seeds) 0.2 lower, gps (trained) and ophist (training-free) 0.2 lower with one seed. The draws: the first five from 1010 on
    whose seed noise the pooled t-test calls significant (the reviewer's case)."""
    pooled_marks = [d for d in range(1010, 1100)
                    if paired_test(*(x.ravel() for x in _ordered(*_rows(d))), "student") < ALPHA][:5]
    for draw in pooled_marks:
        out = tmp_path / str(draw)
        a, b = _rows(draw)
        gin = a - 0.1 + np.random.default_rng(draw).normal(0, 0.005, (3, 1))  # gcn's queries, 0.1 lower
        base = np.random.default_rng(draw).uniform(0.3, 0.9, N_QUERIES)
        for s in range(3):
            write_result(out, "gcn", "none", s, a[s])
            write_result(out, "gat", "none", s, b[s])
            write_result(out, "gin", "none", s, np.clip(gin[s] - 0.1, 0, 1))
            write_result(out, "wl", "none", s, np.clip(base - 0.2, 0, 1))
        write_result(out, "gps", "none", 0, np.clip(base - 0.2, 0, 1))
        write_result(out, "ophist", "none", 0, np.clip(base - 0.2, 0, 1))  # training-free, one seed: tested
        records = lb.collect([out])
        rows, block = _block(lb.build_tables(records))
        best, other = ("gcn", "gat") if "ndcg@20" in rows["gcn"].bold else ("gat", "gcn")
        assert rows[other].marks == {} and rows[other].p["ndcg@20"] >= ALPHA
        assert rows["gin"].marks.get("ndcg@20") == lb.SIG_MARK and rows["wl (floor)"].marks.get("ndcg@20") == lb.SIG_MARK
        assert rows["gps"].marks == {} and "ndcg@20" not in rows["gps"].p  # one seed: not tested
        assert any(n.startswith("gps: one seed") for n in block.notes)
        assert rows["ophist (floor)"].marks.get("ndcg@20") == lb.SIG_MARK
        for r in rows.values():  # every cell has its interval around its mean
            lo, hi = r.ci["ndcg@20"]
            assert lo <= r.mean["ndcg@20"] <= hi
        # the earlier leaderboards' test marks the seed noise, and the single seed
        old, _ = _block(lb.build_tables(records, stat_test="student-pooled"))
        assert old[other].marks.get("ndcg@20") == lb.SIG_MARK and old["gps"].marks.get("ndcg@20") == lb.SIG_MARK
        md = lb.tables_markdown(lb.build_tables(records))
        line = next(ln for ln in md.splitlines() if ln.startswith("| gin |"))
        assert line.count("<br><sub>[") == 3  # intervals under NDCG@20, MRR@20, MAPc@20 only
        assert "95% confidence interval of the mean" in md


def test_seed_matrix_refuses_seeds_on_other_queries(tmp_path):
    write_result(tmp_path, "gcn", "none", 0, np.full(10, 0.5))
    write_result(tmp_path, "gcn", "none", 1, np.full(12, 0.5))
    runs = next(iter(lb.select_runs(lb.collect([tmp_path])).values()))
    assert seed_matrix(runs, "ndcg@20") is None and seed_matrix({0: runs[0]}, "ndcg@20").shape == (1, 10)


def test_the_cli_offers_every_test_with_the_default_first():
    from narbench.cli.leaderboard import LEADERBOARD_TESTS
    from narbench.leaderboard.significance import DEFAULT_TEST, TESTS

    assert set(LEADERBOARD_TESTS) == set(TESTS) and LEADERBOARD_TESTS[0] == DEFAULT_TEST


# ----------------------------------------------------------------------------- clusters of dependent queries

N_CLUSTERS, PER_CLUSTER = 15, 10


def _clustered_rows(draw: int, delta: float = 0.03):
    """Two rows whose queries come in clusters of PER_CLUSTER perfectly correlated queries (one model's
    variants, scored alike): per cluster one score, repeated; the second row lower by `delta` on average
    with a per-cluster spread. Returns (a, b, cluster labels, a's and b's cluster-level scores)."""
    rng = np.random.default_rng(draw)
    base = rng.uniform(0.3, 0.9, N_CLUSTERS)
    other = np.clip(base - delta + rng.normal(0, 0.08, N_CLUSTERS), 0, 1)
    seeds = rng.normal(0, 0.01, (3, 1))
    a, b = np.tile(base, (3, 1)) + seeds, np.tile(other, (3, 1)) + seeds[::-1]
    labels = np.repeat([f"model-{c}" for c in range(N_CLUSTERS)], PER_CLUSTER)
    return np.repeat(a, PER_CLUSTER, axis=1), np.repeat(b, PER_CLUSTER, axis=1), labels, a, b


def test_clusters_of_correlated_queries_give_a_larger_p_than_single_queries():
    for draw in range(5):
        a, b, labels, ca, cb = _clustered_rows(draw)
        per_query, clustered = _test(a, b), bootstrap_test(a, b, clusters=labels)
        assert clustered > per_query
        # perfectly correlated clusters of one size carry what their cluster-level scores carry: the clustered
        # test of the queries is the single-query test of the clusters (the same draws, the same means)
        assert clustered == _test(ca, cb)
    a, b, labels, _, _ = _clustered_rows(0)
    (ql, qh), (cl, ch) = _ci(a), bootstrap_ci(a, clusters=labels)
    assert ch - cl > 2 * (qh - ql)  # 15 independent units, not 150: the interval widens about sqrt(10)-fold


def test_one_query_per_cluster_is_the_single_query_test():
    a, b = _rows(3, delta=0.01)
    shuffled = [f"q{i}" for i in np.random.default_rng(0).permutation(N_QUERIES)]  # any names, all different
    assert bootstrap_test(a, b, clusters=shuffled) == _test(a, b)
    assert bootstrap_ci(a, clusters=np.arange(N_QUERIES)) == _ci(a)
    boot = Bootstrap()
    assert boot.test(with_clusters(a, shuffled), with_clusters(b, shuffled)) == _test(a, b)


def test_the_default_unit_is_the_cluster_and_scores_without_clusters_are_refused():
    from narbench.leaderboard.significance import DEFAULT_TEST, DEFAULT_UNIT, TEST_UNIT

    assert DEFAULT_UNIT == "cluster" and Bootstrap().unit == "cluster" and TEST_UNIT[DEFAULT_TEST] == "cluster"
    a, b = _rows(4)
    with pytest.raises(ValueError, match="carry no cluster of their queries"):
        bootstrap_test(a, b)
    labels = np.repeat(np.arange(N_QUERIES // 2), 2)
    with pytest.raises(ValueError, match="different clusters"):  # paired only on the same queries
        Bootstrap().test(with_clusters(a, labels), with_clusters(b, np.arange(N_QUERIES)))
    with pytest.raises(ValueError, match="unknown bootstrap unit"):
        Bootstrap(unit="family")


def test_tables_resample_clusters_a_difference_on_one_model_is_no_dagger(tmp_path, monkeypatch):
    """gat scores like gcn but lower on every query of one of six models: single queries call that
    significant (20 of 120 queries lower in nearly every resample); whole models do not (a third of
    the resamples draw no query of that model)."""
    from narbench.leaderboard import clusters
    from tests.conftest import HAND_MADE_SHA256

    labels = [f"model-{i // 20}" for i in range(120)]
    monkeypatch.setitem(clusters.DECLARED, ("nas", "1.0", HAND_MADE_SHA256),
                        lambda split, n: clusters.QueryGroups("source model", tuple(labels), tuple(labels)))
    ranks = np.repeat([1, 2, 1, 3, 1, 2], 20)
    for s in range(3):
        write_result(tmp_path, "gcn", "none", s, 1.0 / ranks)
        worse = ranks.copy()
        worse[:20] = 4
        write_result(tmp_path, "gat", "none", s, 1.0 / worse)
    records = lb.collect([tmp_path])
    rows, _ = _block(lb.build_tables(records))
    assert rows["gat"].marks == {} and rows["gat"].p["ndcg@20"] > 0.5
    old, _ = _block(lb.build_tables(records, stat_test="bootstrap-query"))
    assert old["gat"].marks.get("ndcg@20") == lb.SIG_MARK and old["gat"].p["ndcg@20"] < 1e-3
    (lo, hi), (qlo, qhi) = rows["gcn"].ci["ndcg@20"], old["gcn"].ci["ndcg@20"]
    assert hi - lo > qhi - qlo  # six models: a wider interval than 120 independent queries


def test_seed_matrix_knows_its_record_so_the_test_finds_its_clusters(tmp_path):
    write_result(tmp_path, "gcn", "none", 0, np.full(10, 0.5))
    runs = next(iter(lb.select_runs(lb.collect([tmp_path])).values()))
    x = seed_matrix(runs, "ndcg@20")
    assert isinstance(x, SeedMatrix) and x.record is runs[0]
    assert bootstrap_test(x, x) == 1.0  # its clusters (one query each, declared for hand-made files) were found
