"""Training-free floors (`ophist`, `ophist-tfidf`, `wl`) on hand-built graphs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.core import registry
from narbench.train.encoder import Labels
from narbench.data.graph import ArchGraph
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer

NUM_OPS = 6


def _graph(ops, edges, name="g", family="f"):
    return ArchGraph(ops=np.array(ops), edges=np.array(edges, dtype=np.int64).reshape(-1, 2).T, name=name,
                     family=family, coarse="c")


def _encoder(name, train=()):
    enc = registry.load("encoder", name)(NUM_OPS, 2, get_profile("smoke"))
    trainer = Trainer("cpu", 0, progress=False)
    labels = Labels(np.zeros(len(train), np.int64), np.zeros(len(train), np.int64), 2)
    enc.fit(trainer, list(train), labels)
    return enc, trainer


def _cos(a, b):
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


RESBLOCK = _graph([0, 1, 2, 1, 3], [(0, 1), (1, 2), (2, 3), (0, 4), (3, 4)], "res")
# the same ops with the skip edge moved: ophist cannot tell them apart, WL can
CHAIN = _graph([0, 1, 2, 1, 3], [(0, 1), (1, 2), (2, 3), (3, 4)], "chain")


@pytest.mark.parametrize("name", ["ophist", "ophist-tfidf", "wl"])
def test_identical_graphs_have_cosine_one_and_are_training_free(name):
    twin = _graph(RESBLOCK.ops, RESBLOCK.edges.T, "twin", "other-family")
    enc, trainer = _encoder(name, [RESBLOCK, CHAIN])
    emb = enc.embed(trainer, [RESBLOCK, twin, CHAIN])
    assert emb.shape[0] == 3 and emb.dtype == torch.float32
    assert _cos(emb[0], emb[1]) == pytest.approx(1.0, abs=1e-6)
    assert not enc.trainable and enc.config() == {"trainable": False, **({"iterations": 3, "dim": 2048} if name == "wl" else {})}


def test_ophist_counts_ops_and_ignores_edges():
    enc, trainer = _encoder("ophist")
    emb = enc.embed(trainer, [RESBLOCK, CHAIN])
    assert emb[0].tolist() == [1, 2, 1, 1, 0, 0]
    assert torch.equal(emb[0], emb[1])


def test_wl_sees_edges_and_op_labels():
    enc, trainer = _encoder("wl")
    relabelled = _graph([0, 1, 2, 4, 3], RESBLOCK.edges.T, "relabelled")  # one op changed
    emb = enc.embed(trainer, [RESBLOCK, CHAIN, relabelled])
    assert not torch.equal(emb[0], emb[1])  # same op counts, other wiring
    assert not torch.equal(emb[0], emb[2])
    assert _cos(emb[0], emb[1]) < 0.999 and _cos(emb[0], emb[2]) < 0.999
    # iteration 0 alone is a hashed op histogram: same for the rewired graph
    from narbench.baselines.floors import wl_features

    h0 = wl_features([RESBLOCK, CHAIN], iterations=0, dim=64)
    assert np.array_equal(h0[0], h0[1])


def test_wl_embeds_a_graph_the_same_alone_or_in_a_batch():
    from narbench.baselines import floors

    enc, trainer = _encoder("wl")
    big = [_graph(list(range(NUM_OPS)) * 3, [(i, i + 1) for i in range(17)], f"c{i}") for i in range(3)]
    batch = enc.embed(trainer, [RESBLOCK, *big, CHAIN])
    alone = enc.embed(trainer, [CHAIN])
    assert torch.equal(batch[-1], alone[0])
    # and across chunk boundaries of the disjoint union
    old = floors.CHUNK_NODES
    try:
        floors.CHUNK_NODES = 7
        assert torch.equal(enc.embed(trainer, [RESBLOCK, *big, CHAIN]), batch)
    finally:
        floors.CHUNK_NODES = old


def test_tfidf_weights_come_from_the_training_graphs():
    common = [_graph([0, 0, 0, 5], [(0, 1), (1, 2), (2, 3)], f"t{i}") for i in range(5)]
    enc, trainer = _encoder("ophist-tfidf", common)
    rare_vs_common = enc.embed(trainer, [_graph([0, 1], [(0, 1)], "q")])[0]
    assert rare_vs_common[1] > rare_vs_common[0] > 0  # op 1 never seen in training: higher idf
    unfit = registry.load("encoder", "ophist-tfidf")(NUM_OPS, 2, get_profile("smoke"))
    with pytest.raises(RuntimeError, match="fit"):
        unfit.embed(trainer, [RESBLOCK])


def test_floors_run_end_to_end_and_record_no_labels(toy_dataset, tmp_path):
    from narbench.harness.runner import RunConfig, run

    for name in ("ophist", "wl"):
        ev = run(RunConfig(encoder=name, profile="smoke", device="cpu", out=str(tmp_path), progress=False),
                 dataset=toy_dataset)
        res = ev.result
        assert res.config["labels"] is None and res.config["training_history"] == []
        assert res.metrics["ndcg@20"] > 0.5  # the toy families differ in their blocks
