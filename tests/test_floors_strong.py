"""The strong training-free floors: WL variants (`wl-count`, `wl-binary`, `wl-tfidf`), `graf`, `best-floor`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.baselines import floors, graf, selection
from narbench.core import registry
from narbench.data.dataset import GraphDataset
from narbench.data.graph import ArchGraph
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer
from tests.conftest import chain_graph, edge_list_graph, toy_graphs

NUM_OPS = 8
BIG = 1 << 20  # wide enough that the few labels of a small graph share no bucket


def _encoder(name, train=(), **params):
    enc = registry.load("encoder", name)(NUM_OPS, 4, get_profile("smoke"))
    if params:
        enc.set_params(params)
    trainer = Trainer("cpu", 0, progress=False)
    enc.fit(trainer, list(train), Labels(np.zeros(len(train), np.int64), np.zeros(len(train), np.int64), 4))
    return enc, trainer


def _permuted(g: ArchGraph, seed: int = 1) -> ArchGraph:
    """The same graph with its nodes renumbered at random (and its edges listed in another order)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(g.num_nodes)  # old id -> new id
    ops = np.empty_like(g.ops)
    ops[perm] = g.ops
    edges = perm[g.edges][:, rng.permutation(g.num_edges)]
    return ArchGraph(ops=ops, edges=edges, name=g.name + "-perm", family=g.family, coarse=g.coarse)


# four copies of the same block: many WL labels repeat; the chain of distinct ops repeats none
REPEATED = chain_graph("rep", "f", "c", [2, 3, 4], 4, skip=True)
DISTINCT = edge_list_graph([0, 1, 2, 3, 4], [(0, 1), (1, 2), (2, 3), (3, 4)], name="distinct")


# ------------------------------------------------------------------------------------------- WL


def test_wl_count_at_three_rounds_is_wl():
    graphs = [REPEATED, DISTINCT, *toy_graphs(per_family=2)]
    assert np.array_equal(floors.wl_weighted_features(graphs, 3, 2048, "count", dtype=np.int64),
                          floors.wl_features(graphs, 3, 2048, dtype=np.int64))
    enc, trainer = _encoder("wl-count")
    wl, _ = _encoder("wl")
    assert torch.equal(enc.embed(trainer, graphs), wl.embed(trainer, graphs))
    assert enc.config() == {"trainable": False, "params": {"rounds": 3, "dim": 2048}, "variant": "", "weighting": "count"}


def test_binary_differs_from_counts_exactly_where_labels_repeat():
    for rounds in range(4):
        count = floors.wl_weighted_features([REPEATED, DISTINCT], rounds, BIG, "count", dtype=np.int64)
        binary = floors.wl_weighted_features([REPEATED, DISTINCT], rounds, BIG, "binary", dtype=np.int64)
        assert np.array_equal(binary, np.sign(count))  # each distinct label once, with its sign
        assert np.array_equal(count != binary, np.abs(count) > 1)
        assert np.array_equal(count[1], binary[1])  # no label repeats in the chain of distinct ops
        assert (np.abs(count[0]) > 1).any()  # the repeated blocks' labels do
        # presence: as many nonzero buckets as distinct labels of levels 0..rounds
        from narbench.splitters.motif import encode_levels
        distinct = sum(len(np.unique(lv)) for lv in encode_levels(REPEATED, rounds, children=True))
        assert int(np.abs(binary[0]).sum()) == distinct


def test_binary_is_decided_before_hashing():
    # two distinct labels sharing a bucket (dim 1: every label does) add up; a repeated label does not
    one = floors.wl_weighted_features([DISTINCT], 0, 1, "binary", dtype=np.int64)
    signs = floors.wl_weighted_features([DISTINCT], 0, BIG, "binary", dtype=np.int64)
    assert one[0, 0] == signs.sum()  # 5 distinct op labels, summed with their signs


def test_rounds_change_the_feature_set():
    enc, trainer = _encoder("wl-binary")
    base = enc.embed(trainer, [REPEATED])
    vectors = {}
    for rounds in range(5):
        enc.set_params({"rounds": rounds})
        vectors[rounds] = enc.embed(trainer, [REPEATED])[0]
        assert enc.variant() == ("" if rounds == 3 else f"rounds={rounds}")
        assert enc.config()["params"] == {"rounds": rounds, "dim": 2048}
    assert torch.equal(vectors[3], base[0])
    assert len({tuple(v.tolist()) for v in vectors.values()}) == 5
    # each round adds its level's labels: the number of distinct labels grows (a deeper WL sees more)
    nonzero = [int(np.count_nonzero(floors.wl_weighted_features([REPEATED], r, BIG, "binary"))) for r in range(5)]
    assert nonzero == sorted(nonzero) and nonzero[0] < nonzero[-1]
    # rounds 0: a hashed op histogram, blind to the wiring
    rewired = edge_list_graph(DISTINCT.ops, [(0, 2), (2, 1), (1, 3), (3, 4)], name="rewired")
    h0 = floors.wl_weighted_features([DISTINCT, rewired], 0, 64, "binary")
    h1 = floors.wl_weighted_features([DISTINCT, rewired], 1, 64, "binary")
    assert np.array_equal(h0[0], h0[1]) and not np.array_equal(h1[0], h1[1])


@pytest.mark.parametrize("params", [{"rounds": -1}, {"dim": 0}])
def test_bad_wl_parameters_are_refused(params):
    enc = registry.load("encoder", "wl-binary")(NUM_OPS, 4, get_profile("smoke"))
    with pytest.raises(ValueError, match="must be"):
        enc.set_params(params)


def test_tfidf_needs_fit_and_weights_by_training_document_frequency():
    trainer = Trainer("cpu", 0, progress=False)
    unfit = registry.load("encoder", "wl-tfidf")(NUM_OPS, 4, get_profile("smoke"))
    with pytest.raises(RuntimeError, match="fit"):
        unfit.embed(trainer, [DISTINCT])
    train = [DISTINCT, REPEATED, chain_graph("other", "f", "c", [5, 6], 2, skip=False)]
    enc, trainer = _encoder("wl-tfidf", train, rounds=1)
    idf = enc.idf
    n = len(train)
    assert idf.num_graphs == n and idf.unseen == pytest.approx(np.log(1 + n) + 1)
    # op 0 (every graph's stem) is in all three: idf 1; op 3 in two of them; op 7 in none
    labels = [floors._mix(floors.encode_levels(edge_list_graph([op], []), 0)[0] ^ floors._SALT_LEVEL)
              for op in (0, 3, 7)]
    w = [float(idf.weights(lab)[0]) for lab in labels]
    assert w[0] == pytest.approx(1.0)
    assert w[1] == pytest.approx(np.log((1 + n) / (1 + 2)) + 1)
    assert w[2] == pytest.approx(idf.unseen)
    # counts times idf, hashed: exactly the count vector when every label's idf is 1
    same = [DISTINCT] * 3
    enc1, _ = _encoder("wl-tfidf", same, dim=BIG)
    assert np.allclose(enc1.embed(trainer, [DISTINCT]).numpy(),
                       floors.wl_weighted_features([DISTINCT], 3, BIG, "count"))
    # a parameter changed after fit: the idf is stale
    enc1.set_params({"rounds": 2})
    with pytest.raises(RuntimeError, match="fit"):
        enc1.embed(trainer, [DISTINCT])


@pytest.mark.parametrize("name", ["wl-count", "wl-binary", "wl-tfidf", "graf"])
def test_strong_floors_are_permutation_invariant_and_batch_independent(name):
    graphs = toy_graphs(per_family=3)
    enc, trainer = _encoder(name, graphs)
    g = graphs[4]
    emb = enc.embed(trainer, [g, _permuted(g), _permuted(g, 2)])
    assert torch.allclose(emb[0], emb[1], atol=1e-6) and torch.allclose(emb[0], emb[2], atol=1e-6)
    alone = enc.embed(trainer, [g])[0]
    assert torch.allclose(enc.embed(trainer, graphs)[4], alone, atol=1e-6)
    assert not enc.trainable


# ------------------------------------------------------------------------------------------ graf


def test_graf_features_are_permutation_invariant():
    graphs = toy_graphs(per_family=2)
    enc, _ = _encoder("graf", graphs)
    for g in graphs:
        for seed in (1, 2):
            assert np.allclose(enc.features([g]), enc.features([_permuted(g, seed)]), atol=1e-12)
    raw = graf.candidate_blocks([REPEATED, _permuted(REPEATED)], NUM_OPS, enc.pairs)
    for name, block in raw.items():
        assert np.allclose(block[0], block[1], atol=1e-12), name


def test_graf_needs_fit_and_its_pairs_come_from_training():
    trainer = Trainer("cpu", 0, progress=False)
    unfit = registry.load("encoder", "graf")(NUM_OPS, 4, get_profile("smoke"))
    with pytest.raises(RuntimeError, match="fit"):
        unfit.embed(trainer, [DISTINCT])
    enc, trainer = _encoder("graf", [DISTINCT])
    assert enc.pairs.tolist() == [0 * NUM_OPS + 1, 1 * NUM_OPS + 2, 2 * NUM_OPS + 3, 3 * NUM_OPS + 4]
    # a graph made of pairs no training graph holds: only its degree blocks remain
    unseen = edge_list_graph([5, 6, 7], [(0, 1), (1, 2)])
    f = enc.features([unseen])[0]
    assert np.all(f[:4] == 0) and np.linalg.norm(f) > 0
    # the blocks: op pairs, degree shares, per-op degrees; each unit length times sqrt(its weight)
    f = enc.features([DISTINCT])[0]
    widths = {"op_pairs": 4, "degrees": 2 * graf.DEGREE_BINS, "op_degrees": 2 * NUM_OPS}
    start = 0
    for k, w in graf.WEIGHTS.items():
        assert np.linalg.norm(f[start : start + widths[k]]) == pytest.approx(np.sqrt(w))
        start += widths[k]
    assert start == len(f)
    assert enc.config() == {"trainable": False, "weights": graf.WEIGHTS}


def test_graf_depth_kernel():
    # diamond with a skip: 0 -> 1 -> 2 -> 3 and 0 -> 3
    g = edge_list_graph([0, 1, 2, 3], [(0, 1), (1, 2), (2, 3), (0, 3)])
    node_off = np.array([0, 4]); edge_off = np.array([0, 4])
    depth, height = graf._kernels().depth_height(node_off, edge_off, g.edges[0], g.edges[1])
    assert depth.tolist() == [0, 1, 2, 3] and height.tolist() == [3, 2, 1, 0]


# ------------------------------------------------------------------------------------ best-floor


def test_validation_split_is_stratified_seeded_and_keeps_singletons_in_the_pool():
    labels = np.array([0] * 20 + [1] * 10 + [2] * 2 + [3])
    pool, val = selection.validation_split(labels)
    assert set(pool) | set(val) == set(range(len(labels))) and not set(pool) & set(val)
    assert 32 in pool  # the family of one graph
    assert set(labels[val]) <= set(labels[pool])  # every validation query has a relevant pool graph
    assert {0, 1} <= set(labels[val]) and len(val) == 3  # 10% of the 32 splittable graphs, stratified
    again = selection.validation_split(labels)
    assert np.array_equal(pool, again[0]) and np.array_equal(val, again[1])
    with pytest.raises(ValueError, match="two training graphs"):
        selection.validation_split(np.arange(5))


def _best_floor_run(dataset, tmp_path):
    from narbench.harness.runner import RunConfig, run

    return run(RunConfig(encoder="best-floor", profile="smoke", device="cpu", out=str(tmp_path), progress=False),
               dataset=dataset).result


def _dataset(graphs, split) -> GraphDataset:
    return GraphDataset("toy", "0", [f"op{i}" for i in range(NUM_OPS)], graphs, "0" * 64, split)


def test_best_floor_picks_by_validation_and_never_looks_at_the_queries(toy_dataset, tmp_path):
    res = _best_floor_run(toy_dataset, tmp_path / "a")
    sel = res.config["encoder_stats"]["selection"]
    scores = {k: v["ndcg@20"] for k, v in sel["scores"].items()}
    assert list(scores) == [c.label for c in selection.CANDIDATES]
    best = max(scores.values())
    assert sel["picked"] == next(k for k, v in scores.items() if v == best)  # the first of the best
    assert res.config["labels"] is None and res.config["encoder"]["trainable"] is False
    assert "family" in res.config["encoder"]["uses_labels"]
    # the queries replaced by other graphs (other depths, one family dropped): the same choice, the same scores
    graphs = list(toy_dataset.graphs)
    split = toy_dataset.split
    rng = np.random.default_rng(5)
    for i in split.test:
        g = graphs[i]
        graphs[i] = chain_graph(g.name + "-q", g.family, g.coarse, [int(o) for o in rng.integers(2, 8, 3)],
                                int(rng.integers(2, 9)), skip=bool(rng.integers(2)))
    other = _best_floor_run(_dataset(graphs, split), tmp_path / "b")
    assert other.metrics != res.metrics  # the queries did change
    assert other.config["encoder_stats"]["selection"] == {**sel, "seconds": other.config["encoder_stats"]["selection"]["seconds"]}
    # and deterministic: the same run again gives the same record and the same numbers
    again = _best_floor_run(toy_dataset, tmp_path / "c")
    assert again.metrics == res.metrics
    assert again.config["encoder_stats"]["selection"]["scores"] == sel["scores"]


def test_best_floor_follows_the_validation_scores(monkeypatch):
    graphs = toy_graphs(per_family=6)
    labels = np.unique([g.family for g in graphs], return_inverse=True)[1]
    cands = selection.CANDIDATES[:3]
    fake = {cands[0].label: 0.5, cands[1].label: 0.9, cands[2].label: 0.9}
    monkeypatch.setattr(selection, "score_candidate",
                        lambda cand, *a, **k: {m: fake[cand.label] for m in selection.RECORDED})
    best, record = selection.select_floor(Trainer("cpu", 0, progress=False), graphs, labels, NUM_OPS,
                                          get_profile("smoke"), cands)
    assert best is cands[1] and record["picked"] == cands[1].label  # a tie keeps the earlier candidate
    enc = registry.load("encoder", "best-floor")(NUM_OPS, 4, get_profile("smoke"))
    with pytest.raises(RuntimeError, match="fit"):
        enc.embed(Trainer("cpu", 0, progress=False), graphs)


def test_best_floor_can_choose_on_the_cross_source_split(monkeypatch):
    """`holdout=cross-source`: the candidates are scored with one source's graphs of some families as the
    queries against the other sources' (what search across implementations asks); the default is unchanged."""
    graphs = toy_graphs(per_family=6)
    for i, g in enumerate(graphs):
        g.source = "zoo-a" if i % 3 else "zoo-b"
    labels = np.unique([g.family for g in graphs], return_inverse=True)[1]
    seen = {}

    def fake(cand, trainer, gs, labs, pool, val, *a, **k):
        seen["val"], seen["pool"] = val, pool
        return {m: 0.5 for m in selection.RECORDED}

    monkeypatch.setattr(selection, "score_candidate", fake)
    _, record = selection.select_floor(Trainer("cpu", 0, progress=False), graphs, labels, NUM_OPS,
                                       get_profile("smoke"), selection.CANDIDATES[:2], holdout="cross-source")
    assert record["holdout"] == "cross-source"
    for v in seen["val"]:  # a query's family has graphs of another source in the pool, none of its own source
        others = [p for p in seen["pool"] if labels[p] == labels[v]]
        assert others and all(graphs[p].source != graphs[v].source for p in others)
    enc = registry.load("encoder", "best-floor")(NUM_OPS, 4, get_profile("smoke"))
    assert enc.holdout == "family" and enc.variant() == ""  # the default: rows and hashes as before
    with pytest.raises(ValueError, match="holdout must be one of family, cross-source"):
        enc.set_params({"holdout": "by-zoo"})


# ------------------------------------------------------------------------- best-floor, fused


def test_fused_cosine_is_the_weighted_mean_of_the_members_cosines():
    rng = np.random.default_rng(0)
    a, b = torch.from_numpy(rng.normal(size=(6, 5))), torch.from_numpy(rng.normal(size=(6, 9)) * 7)
    fused = selection.fuse([a, b], [3, 1]).double()
    cos = torch.nn.functional.normalize
    want = (3 * cos(a) @ cos(a).T + 1 * cos(b) @ cos(b).T) / 4
    assert torch.allclose(cos(fused) @ cos(fused).T, want, atol=1e-6)
    assert torch.allclose(fused.norm(dim=1).double(), torch.full((6,), 2.0, dtype=torch.float64), atol=1e-6)


def _split_signal_embeddings(labels, pool, val):
    """Three candidates' validation embeddings: `a` tells families 0-1 apart and confuses 2 with 3, `b`
    the reverse, `c` is noise; only a fusion of `a` and `b` tells all four apart."""
    rng = np.random.default_rng(1)
    rows = np.concatenate([pool, val])
    onehot = np.eye(4)[labels[rows]]
    noise = lambda: rng.normal(scale=0.05, size=(len(rows), 4))  # noqa: E731
    a = onehot[:, [0, 1, 2, 2]].copy(); a[:, 2] += onehot[:, 3]
    b = onehot[:, [0, 0, 2, 3]].copy(); b[:, 0] += onehot[:, 1]
    a, b = a[:, :3], b[:, [0, 2, 3]]
    return {"a": torch.from_numpy(a + noise()[:, :3]).float(), "b": torch.from_numpy(b + noise()[:, :3]).float(),
            "c": torch.from_numpy(rng.normal(size=(len(rows), 4))).float()}


def test_ensemble_selection_fuses_complementary_floors_and_keeps_the_best_prefix():
    graphs = toy_graphs(per_family=10)
    labels = np.unique([g.family for g in graphs], return_inverse=True)[1]
    pool, val = selection.holdout_split(graphs, labels, "family")
    embs = _split_signal_embeddings(labels, pool, val)
    cands = tuple(selection.Candidate(k, "unused:Unused") for k in ("c", "a", "b"))
    alone = {k: selection.score_embeddings(embs[k], graphs, labels, pool, val)["ndcg@20"] for k in embs}
    members, weights, record = selection.select_fusion(graphs, labels, cands, embs, steps=5)
    assert [m.label for m in members] == ["a", "b"] and weights == (1, 1)  # both halves, noise left out
    path = [p["ndcg@20"] for p in record["path"]]
    assert len(path) == 5 and record["kept"] == 2
    assert path[1] > max(alone.values())  # the fusion beats every candidate alone on validation
    assert path[0] == pytest.approx(max(alone["a"], alone["b"]), abs=1e-6) and max(path) == path[1]
    assert record["picked"] == {"a": 1, "b": 1}


def test_fused_best_floor_runs_saves_and_loads(toy_dataset):
    enc = registry.load("encoder", "best-floor")(NUM_OPS, 4, get_profile("smoke"))
    assert enc.fuse == 1 and enc.variant() == ""  # the default: rows and hashes as before
    for bad in (0, 9):
        with pytest.raises(ValueError, match="fuse must be an integer from 1 to 8"):
            enc.set_params({"fuse": bad})
    with pytest.raises(ValueError, match="'fuse' takes a int"):
        enc.set_params({"fuse": 2.0})
    enc.set_params({"fuse": 3})
    trainer = Trainer("cpu", 0, progress=False)
    graphs = toy_dataset.core_graphs
    enc.fit(trainer, graphs, None)
    fusion = enc.stats["selection"]["fusion"]
    assert 1 <= fusion["kept"] <= 3 and sum(fusion["picked"].values()) == fusion["kept"]
    assert isinstance(enc.chosen, torch.nn.ModuleList) and len(enc.chosen) == len(fusion["picked"])
    emb = enc.embed(trainer, graphs)
    fresh = registry.load("encoder", "best-floor")(NUM_OPS, 4, get_profile("smoke"))
    fresh.set_params({"fuse": 3})
    fresh.load_state_dict(enc.state_dict())
    assert torch.equal(fresh.embed(trainer, graphs), emb)
    assert "fusion" in enc.config() and "fusion" not in registry.load("encoder", "best-floor")(
        NUM_OPS, 4, get_profile("smoke")).config()
