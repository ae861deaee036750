import math

import numpy as np
import pytest

from narbench.eval.metrics import METRICS, score_rankings


def test_nine_metric_names():
    assert METRICS == ("mrr@20", "mrr@50", "mrr@100", "map@20", "map@50", "map@100",
                       "ndcg@20", "ndcg@50", "ndcg@100")


def test_hand_made_ranking_known_values():
    # Corpus labels: 0:a 1:b 2:a 3:c 4:a.  Query 0 (label a) has relevant {0, 2, 4}; query 1 (b) has {1}.
    corpus = np.array(["a", "b", "a", "c", "a"])
    queries = np.array(["a", "b"])
    ranked = np.array([[1, 0, 3, 2, 4],   # a-hits at ranks 2, 4, 5
                       [3, 0, 1, 2, 4]])  # b-hit at rank 3
    means, per_query = score_rankings(queries, corpus, ranked, ks=(3, 5))
    # MRR: 1/2 and 1/3.
    assert per_query["mrr@5"].tolist() == pytest.approx([1 / 2, 1 / 3])
    # AP@5, ranx convention (divide by |R|): q0 (1/2 + 2/4 + 3/5) / 3, q1 (1/3) / 1.
    assert per_query["map@5"].tolist() == pytest.approx([(1 / 2 + 2 / 4 + 3 / 5) / 3, 1 / 3])
    # AP@3: q0 only the hit at rank 2 counts: (1/2) / 3; capped variant divides by min(3, 3) = 3 too.
    assert per_query["map@3"][0] == pytest.approx((1 / 2) / 3)
    # NDCG@5 with binary gains: DCG = sum 1/log2(rank+1), IDCG = the same with all hits on top.
    dcg0 = 1 / math.log2(3) + 1 / math.log2(5) + 1 / math.log2(6)
    idcg0 = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert per_query["ndcg@5"][0] == pytest.approx(dcg0 / idcg0)
    assert per_query["ndcg@5"][1] == pytest.approx((1 / math.log2(4)) / 1)
    assert means["mrr@5"] == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_capped_map_divides_by_min_k_and_relevant():
    corpus = np.array(["a"] * 10 + ["b"] * 2)
    ranked = np.array([[0, 1, 10, 2, 3]])  # hits at 1, 2, 4, 5; |R| = 10
    _, per_query = score_rankings(np.array(["a"]), corpus, ranked, ks=(5,))
    ap_sum = 1 + 1 + 3 / 4 + 4 / 5
    assert per_query["map@5"][0] == pytest.approx(ap_sum / 10)
    assert per_query["map_capped@5"][0] == pytest.approx(ap_sum / 5)


def test_per_query_scores_follow_query_order_beyond_ten_queries():
    # ranx sorts query ids as strings ("10" < "2"); results must still line up with our order.
    corpus = np.array(["a", "b"])
    queries = np.array(["a", "b"] * 7)
    ranked = np.array([[0, 1], [0, 1]] * 7)
    _, per_query = score_rankings(queries, corpus, ranked, ks=(2,))
    assert per_query["mrr@2"].tolist() == [1.0, 0.5] * 7


def test_query_without_relevant_item_is_an_error():
    with pytest.raises(ValueError, match="no relevant corpus item: z"):
        score_rankings(np.array(["z"]), np.array(["a", "b"]), np.array([[0, 1]]), ks=(2,))


def _score_with_ranx_evaluate(query_labels, corpus_labels, ranked, ks):
    """The reference: ranx.evaluate on Qrels/Run built from string-keyed dictionaries (the
    implementation `score_rankings` had before it called ranx's metric functions directly)."""
    import warnings
    from collections import defaultdict

    from ranx import Qrels, Run, evaluate

    members = defaultdict(list)
    for j, lab in enumerate(np.asarray(corpus_labels).tolist()):
        members[lab].append(str(j))
    judged = {lab: dict.fromkeys(docs, 1) for lab, docs in members.items()}
    qids = [str(i) for i in range(len(query_labels))]
    qrels = Qrels({q: judged[lab] for q, lab in zip(qids, np.asarray(query_labels).tolist())})
    depth = ranked.shape[1]
    rank_scores = [float(depth - r) for r in range(depth)]
    run = Run({q: dict(zip(map(str, row), rank_scores)) for q, row in zip(qids, ranked.tolist())})
    names = [f"{m}@{k}" for m in ("mrr", "map", "ndcg") for k in ks]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate(qrels, run, names, return_mean=False, make_comparable=False)
    return {name: np.array([run.scores[name][q] for q in qids], dtype=np.float64) for name in names}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_query_values_equal_ranx_evaluate_on_dictionaries(seed):
    rng = np.random.default_rng(seed)
    n_corpus, n_queries, depth = 300, 60, 40
    # labels of very different sizes, one with a single corpus item, string labels
    sizes = np.array([150, 80, 40, 20, 9, 1])
    corpus = np.repeat([f"fam{i}" for i in range(len(sizes))], sizes)
    rng.shuffle(corpus)
    queries = rng.choice(np.unique(corpus), size=n_queries)
    ranked = np.stack([rng.permutation(n_corpus)[:depth] for _ in range(n_queries)])
    # edge cases: a ranking with every relevant item on top, one with none in the top `depth`,
    # one listing an item twice (a Run dictionary keeps its last rank), ties in the hit pattern
    relevant0 = np.flatnonzero(corpus == queries[0])
    ranked[0, : min(depth, relevant0.size)] = relevant0[:depth]
    others = np.flatnonzero(corpus != queries[1])
    ranked[1] = rng.choice(others, size=depth, replace=False)
    ranked[2, 5] = ranked[2, 1]
    ranked[3, 10] = ranked[3, 0]
    ranked[3, 20] = ranked[3, 0]
    ranked[4] = ranked[5]
    queries[4] = queries[5]
    ks = (1, 5, 20, 40, 100)  # k above the ranking depth too
    ref = _score_with_ranx_evaluate(queries, corpus, ranked, ks)
    _, per_query = score_rankings(queries, corpus, ranked, ks=ks)
    for name, values in ref.items():
        np.testing.assert_allclose(per_query[name], values, rtol=0, atol=1e-12, err_msg=name)


def test_integer_labels_and_single_query():
    corpus = np.array([3, 1, 3, 2, 3, 1])
    ref = _score_with_ranx_evaluate(np.array([3]), corpus, np.array([[1, 0, 5, 2, 4]]), (2, 5))
    _, per_query = score_rankings(np.array([3]), corpus, np.array([[1, 0, 5, 2, 4]]), ks=(2, 5))
    for name, values in ref.items():
        np.testing.assert_allclose(per_query[name], values, rtol=0, atol=1e-12, err_msg=name)
