"""The paper's metric convention (`ndcg_paper@k`, and which existing metric is each of the authors' MAPs)."""

import math

import numpy as np
import pytest

from narbench.eval.metrics import PAPER_CONVENTION, ideal_dcg, score_rankings, uncut_ideal_ratio


def _idcg(n: int) -> float:
    return sum(1 / math.log2(i + 1) for i in range(1, n + 1))


def test_ndcg_paper_by_hand_where_the_cut_ideal_and_the_full_ideal_differ():
    # Query 0 (label a): |R| = 4 relevant items {0, 2, 4, 5}; k = 3 < |R|. Hits at ranks 1 and 3.
    # Query 1 (label b): |R| = 1, item 1; hit at rank 2: |R| <= k, both ideals are the same.
    corpus = np.array(["a", "b", "a", "c", "a", "a"])
    ranked = np.array([[0, 3, 2, 1, 4, 5],
                       [3, 1, 0, 2, 4, 5]])
    _, pq = score_rankings(np.array(["a", "b"]), corpus, ranked, ks=(3, 6))
    dcg3 = 1 / math.log2(2) + 1 / math.log2(4)           # hits at ranks 1 and 3
    ideal_cut = 1 + 1 / math.log2(3) + 1 / math.log2(4)    # 3 relevant items on top (ranx: cut at k = 3)
    ideal_full = ideal_cut + 1 / math.log2(5)              # all 4 relevant items (the authors' ideal)
    assert pq["ndcg@3"][0] == pytest.approx(dcg3 / ideal_cut)
    assert pq["ndcg_paper@3"][0] == pytest.approx(dcg3 / ideal_full)
    assert pq["ndcg_paper@3"][0] < pq["ndcg@3"][0]
    assert pq["ndcg_paper@3"][1] == pytest.approx(pq["ndcg@3"][1]) == pytest.approx(1 / math.log2(3))
    # k = 6 >= |R| = 4: the full ranking; hits at ranks 1, 3, 5, 6; both ideals hold all 4 items
    dcg6 = dcg3 + 1 / math.log2(6) + 1 / math.log2(7)
    assert pq["ndcg_paper@6"][0] == pytest.approx(pq["ndcg@6"][0]) == pytest.approx(dcg6 / ideal_full)


def test_a_perfect_ranking_cannot_reach_one_when_there_are_more_relevant_items_than_k():
    corpus = np.array(["a"] * 30 + ["b"] * 5)
    ranked = np.arange(35)[None, :]  # every relevant item first
    _, pq = score_rankings(np.array(["a"]), corpus, ranked, ks=(20,))
    assert pq["ndcg@20"][0] == pytest.approx(1.0)
    assert pq["ndcg_paper@20"][0] == pytest.approx(_idcg(20) / _idcg(30))


def test_ideal_dcg_and_ratio_by_hand():
    assert ideal_dcg(np.array([0, 1, 2, 5])).tolist() == pytest.approx([0.0, 1.0, 1 + 1 / math.log2(3), _idcg(5)])
    r = uncut_ideal_ratio(np.array([1, 3, 10]), 3)
    assert r.tolist() == pytest.approx([1.0, 1.0, _idcg(3) / _idcg(10)])
    assert uncut_ideal_ratio(np.array([0]), 3).tolist() == [0.0]  # |R| = 0: the 0.3 floor, no division by 0


def _authors_evaluator(ground_truth: set, rank_index: list, top_k: int, map_norm: str) -> dict[str, float]:
    """The authors' `evaluator` (TerryPei/NNRetrieval, evaluation/eval.py and evaluation/evaluator.py),
    binary grades: `map_norm` "min" is eval.py's MAP (/ min(|R|, k)), "all" is evaluator.py's (/ max(1, |R|))."""
    ranks = list(rank_index)[:top_k]
    mrr = next((1.0 / (r + 1) for r, item in enumerate(ranks) if item in ground_truth), 0.0)
    ap, hits = 0.0, 0
    for r, item in enumerate(ranks):
        if item in ground_truth and item not in ranks[:r]:
            hits += 1
            ap += hits / (r + 1.0)
    ap /= min(len(ground_truth), top_k) if map_norm == "min" else max(1.0, len(ground_truth))
    dcg = sum(1.0 / np.log2(r + 2) for r, item in enumerate(ranks) if item in ground_truth)
    norm = sum(1.0 / np.log2(r + 2) for r in range(len(ground_truth)))
    return {"mrr": mrr, "map": ap, "ndcg": dcg / max(0.3, norm)}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_authors_evaluator_is_reproduced_from_our_rankings(seed):
    """Each of the authors' metrics equals the narbench metric `PAPER_CONVENTION` names for it."""
    rng = np.random.default_rng(seed)
    sizes = np.array([90, 40, 12, 3, 1])
    corpus = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(corpus)
    queries = rng.choice(len(sizes), size=25)
    ranked = np.stack([rng.permutation(len(corpus))[:60] for _ in queries])
    ks = (5, 20, 50)
    _, pq = score_rankings(queries, corpus, ranked, ks=ks)
    convention = {"mrr": "mrr@{k}", "map_min": PAPER_CONVENTION["MAP (eval.py: / min(k, |R|))"],
                  "map_all": PAPER_CONVENTION["MAP (evaluator.py: / |R|)"],
                  "ndcg": PAPER_CONVENTION["NDCG (eval.py and evaluator.py: ideal over all |R|)"]}
    for k in ks:
        for i, q in enumerate(queries):
            truth = set(np.flatnonzero(corpus == q).tolist())
            by_min = _authors_evaluator(truth, ranked[i].tolist(), k, "min")
            by_all = _authors_evaluator(truth, ranked[i].tolist(), k, "all")
            assert by_min["mrr"] == pytest.approx(pq[convention["mrr"].format(k=k)][i], abs=1e-12)
            assert by_min["map"] == pytest.approx(pq[convention["map_min"].format(k=k)][i], abs=1e-12)
            assert by_all["map"] == pytest.approx(pq[convention["map_all"].format(k=k)][i], abs=1e-12)
            assert by_min["ndcg"] == pytest.approx(pq[convention["ndcg"].format(k=k)][i], abs=1e-12)
