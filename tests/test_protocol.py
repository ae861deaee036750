"""Supervision protocols: labels per encoder, recorded in results, never ranked together."""

from __future__ import annotations

import json

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.train.protocol import PROTOCOLS, get_protocol
from narbench.eval.result import MIXED_PROTOCOL, RunResult
from narbench.harness.runner import ConfigError, RunConfig, make_labels, run


def _run(ds, tmp_path, **kw):
    return run(RunConfig(out=str(tmp_path), progress=False, profile="smoke", device="cpu", **kw), dataset=ds)


def test_family_protocol_gives_every_encoder_the_same_labels():
    from narbench.core import registry

    family = get_protocol("family")
    for name in ("gcn", "gat", "ours"):
        assert family.labels(registry.load("encoder", name)) == ("family", "family")
    paper = get_protocol("paper")
    assert paper.labels(registry.load("encoder", "gcn")) == ("coarse", "coarse")  # section 4.3
    assert paper.labels(registry.load("encoder", "gat")) == ("coarse", "coarse")
    assert paper.labels(registry.load("encoder", "ours")) == ("family", "family")  # section 3.5
    with pytest.raises(KeyError, match="known protocols: family, paper"):
        get_protocol("mine")
    assert set(PROTOCOLS) == {"family", "paper"}


def test_labels_follow_the_protocol(toy_dataset):
    from narbench.baselines.gnn import GCNEncoder

    idx = np.arange(len(toy_dataset))
    fam, rec = make_labels(toy_dataset, get_protocol("family"), GCNEncoder, idx)
    assert np.array_equal(fam.cl, toy_dataset.family_ids()) and np.array_equal(fam.ce, toy_dataset.family_ids())
    assert fam.num_ce_classes == 4 and rec == {"cl": "family", "ce": "family", "num_ce_classes": 4}
    coarse, rec = make_labels(toy_dataset, get_protocol("paper"), GCNEncoder, idx)
    assert np.array_equal(coarse.cl, toy_dataset.coarse_ids()) and coarse.num_ce_classes == 3
    assert rec["cl"] == rec["ce"] == "coarse"


def test_protocol_and_split_are_recorded(toy_dataset, tmp_path):
    ev = _run(toy_dataset, tmp_path, encoder="gcn", protocol="paper")
    data = json.loads(ev.path.read_text())
    assert data["protocol"] == "paper" and data["split"] == "standard" and data["schema"] == 2
    assert data["config"]["labels"] == {"cl": "coarse", "ce": "coarse", "num_ce_classes": 3}
    assert data["dataset"]["split"]["name"] == "standard"
    assert "-standard-gcn-none-smoke-paper-s0-" in data["run_id"]
    floor = _run(toy_dataset, tmp_path, encoder="random", protocol="paper").result
    assert floor.config["labels"] is None  # saw no labels: valid under every protocol


def test_bad_protocol_or_split_is_a_config_error(toy_dataset, tmp_path):
    with pytest.raises(ConfigError, match="unknown protocol 'coarse'"):
        _run(toy_dataset, tmp_path, encoder="gcn", protocol="coarse")
    with pytest.raises(ConfigError, match="no split 'unseen'; its splits: standard"):
        _run(toy_dataset, tmp_path, encoder="gcn", split="unseen")
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


def _write(out, encoder, protocol, value, *, split="standard", trained=True, seed=0):
    metrics = {m: value for m in lb.METRICS}
    res = RunResult(
        run_id=f"nas-{split}-{encoder}-{protocol}-{seed}", encoder=encoder, splitter="none",
        dataset={"name": "nas", "version": "1.0", "sha256": "ab" * 32}, profile="quick", seed=seed,
        config={"run": {}, "labels": {"cl": "family", "ce": "family"} if trained else None},
        metrics=metrics, metrics_extra={m: value for m in lb.EXTRA}, timings={}, device="cpu",
        num_queries=4, num_corpus=10, num_train=5, split=split, protocol=protocol)
    res.write(out, {m: np.full(4, value) for m in lb.ALL_METRICS})


def test_leaderboard_never_ranks_protocols_or_splits_together(tmp_path):
    out = tmp_path / "res"
    _write(out, "gcn", "family", 0.6)
    _write(out, "gcn", "paper", 0.9)
    _write(out, "gat", "paper", 0.8)
    _write(out, "gcn", "family", 0.3, split="unseen")
    _write(out, "wl", "family", 0.7, trained=False)  # a floor: joins every protocol's block
    t1 = next(t for t in lb.build_tables(lb.collect([out])) if t.number == 1)
    blocks = {b.setting: [(r.label, round(r.mean["ndcg@20"], 3)) for r in b.rows] for b in t1.blocks if b.rows}
    assert blocks == {
        ("nas", "standard", "quick", "cpu", "family"): [("wl (floor)", 0.7), ("gcn", 0.6)],
        ("nas", "standard", "quick", "cpu", "paper"): [("wl (floor)", 0.7), ("gcn", 0.9), ("gat", 0.8)],
        ("nas", "unseen", "quick", "cpu", "family"): [("gcn", 0.3)],
    }
    df = lb.aggregate(lb.collect([out]))
    assert sorted(df["protocol"]) == ["any", "family", "family", "paper", "paper"]


def test_schema1_results_name_the_labels_they_were_trained_on(tmp_path):
    def old(encoder, ce_label, history):
        raw = {"run_id": encoder, "encoder": encoder, "splitter": "none", "dataset": {"name": "nas"}, "profile": "quick",
               "seed": 0, "config": {"encoder": {"ce_label": ce_label}, "training_history": history},
               "metrics": {}, "metrics_extra": {}, "timings": {}, "device": "cpu", "num_queries": 1, "num_corpus": 1,
               "num_train": 1, "schema": 1}
        path = tmp_path / f"{encoder}.json"
        path.write_text(json.dumps(raw))
        return RunResult.read(path)

    gcn = old("gcn", "coarse", [{"stage": "train", "losses": [1.0]}])
    assert (gcn.protocol, gcn.split, gcn.config["labels"]) == (MIXED_PROTOCOL, "standard", {"cl": "family", "ce": "coarse"})
    ours = old("ours", "family", [{"stage": "graph", "losses": [1.0]}])
    assert ours.protocol == "family" and ours.config["labels"] == {"cl": "family", "ce": "family"}
    rnd = old("random", "coarse", [])
    assert rnd.protocol == "family" and rnd.config["labels"] is None
