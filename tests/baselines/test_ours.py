import numpy as np
import pytest
import torch

from narbench.baselines.motif_inputs import data_key, induced, neighbourhood
from narbench.baselines.ours import MotifEncoder
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.harness.runner import RunConfig, run
from narbench.splitters.motif import MotifSplitter
from narbench.train.trainer import Trainer
from tests.conftest import chain_graph


def test_induced_subgraph_and_neighbourhood():
    g = chain_graph("g", "f", "c", [2, 3], 3, skip=True)  # 0 stem, blocks of 2, residual edges, head
    nodes = np.array([1, 2])
    sub = induced(g, nodes)
    assert sub.x.tolist() == [2, 3] and sub.edge_index.tolist() == [[0], [1]]
    ctx = neighbourhood(g, nodes, 1)
    # node 0 feeds 1 (and 2 via the residual edge); node 2 feeds 3 and 4 (residual of the next block)
    assert ctx.tolist() == [0, 1, 2, 3, 4]
    assert neighbourhood(g, nodes, 0).tolist() == [1, 2]


def test_data_key_is_exact():
    g = chain_graph("g", "f", "c", [2, 3], 4, skip=False)
    assert data_key(induced(g, np.array([1, 2]))) == data_key(induced(g, np.array([3, 4])))
    assert data_key(induced(g, np.array([1, 2]))) != data_key(induced(g, np.array([2, 3])))


def test_distinct_motifs_are_embedded_once_and_macro_graph_follows_partition(toy_dataset):
    profile = get_profile("smoke")
    enc = MotifEncoder(len(toy_dataset.vocab), len(toy_dataset.families), profile, MotifSplitter())
    trainer = Trainer("cpu", 0, progress=False)
    graphs = [toy_dataset.graphs[i] for i in toy_dataset.split.train]
    fam = toy_dataset.family_ids()[toy_dataset.split.train]
    enc.fit(trainer, graphs, Labels(fam, fam, len(toy_dataset.families)))
    assert enc.stats["distinct_train_motifs"] < enc.stats["train_motifs"] / 2  # blocks repeat
    cached = len(enc._motif_cache)
    emb = enc.embed(trainer, graphs[:5])
    assert emb.shape == (5, profile.model.hidden)
    assert len(enc._motif_cache) == cached  # nothing new to embed for training graphs
    motifs = enc._motifs(trainer, graphs[:1], "x")
    macro = enc._macro_datas(graphs[:1], motifs)[0]
    part = enc.partition(graphs[0])
    assert macro.num_nodes == part.num_parts
    assert torch.equal(macro.edge_index, torch.as_tensor(part.macro_edges))
    # F_s is frozen after stage 1.
    assert not any(p.requires_grad for p in enc.pair.f_s.parameters())


@pytest.mark.parametrize("splitter", ["motif", "node-number", "motif-number", "random"])
def test_ours_runs_end_to_end_with_every_splitter(toy_dataset, tmp_path, splitter):
    ev = run(RunConfig(encoder="ours", splitter=splitter, profile="smoke", out=str(tmp_path), progress=False),
             dataset=toy_dataset)
    res = ev.result
    assert res.splitter == splitter and res.config["splitter"]["name"] == splitter
    stages = [h["stage"] for h in res.config["training_history"]]
    assert stages == ["stage 1: motifs", "stage 2: macro graphs"]
    assert res.metrics["mrr@20"] > 0.5


def test_splitter_parameters_are_recorded_and_validated(toy_dataset, tmp_path):
    from narbench.harness.runner import ConfigError

    ev = run(RunConfig(encoder="ours", splitter="node-number", splitter_params={"nodes_per_part": 5},
                       profile="smoke", out=None, progress=False), dataset=toy_dataset)
    assert ev.result.config["splitter"]["params"] == {"nodes_per_part": 5}
    with pytest.raises(ConfigError, match="bad parameters for splitter 'node-number'"):
        run(RunConfig(encoder="ours", splitter="node-number", splitter_params={"bogus": 1}, profile="smoke",
                      out=None, progress=False), dataset=toy_dataset)


def test_objective_switch_for_ours(toy_dataset):
    ev = run(RunConfig(encoder="ours", objective="cl", profile="smoke", out=None, progress=False), dataset=toy_dataset)
    assert ev.result.config["encoder"]["train"]["objective"] == "cl"


def _fit(toy_dataset, **params):
    enc = MotifEncoder(len(toy_dataset.vocab), len(toy_dataset.families), get_profile("smoke"), MotifSplitter())
    enc.set_params(params)
    torch.manual_seed(0)
    enc._build_pair()  # the same initial weights for every variant
    before = {k: v.clone() for k, v in enc.pair.f_s.state_dict().items()}
    trainer = Trainer("cpu", 0, progress=False)
    graphs = [toy_dataset.graphs[i] for i in toy_dataset.split.train]
    fam = toy_dataset.family_ids()[toy_dataset.split.train]
    enc.fit(trainer, graphs, Labels(fam, fam, len(toy_dataset.families)))
    return enc, before, trainer


def test_no_stage1_leaves_f_s_untrained_and_stage2_still_trains(toy_dataset):
    enc, before, trainer = _fit(toy_dataset, stage1=False)
    after = enc.pair.f_s.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert [h.stage for h in trainer.histories] == ["stage 2: macro graphs"]
    rec = enc.stats["stage1_health"]
    assert rec["trained"] is False and "loss" not in rec and rec["before"] == rec["after"]
    trained, before2, _ = _fit(toy_dataset)
    assert any(not torch.equal(before2[k], v) for k, v in trained.pair.f_s.state_dict().items())
    assert len(trained.stats["stage1_health"]["loss"]) == get_profile("smoke").motif_train.epochs


def test_occurrences_train_one_pair_per_motif_occurrence(toy_dataset):
    distinct, _, _ = _fit(toy_dataset)
    every, _, _ = _fit(toy_dataset, motif_examples="occurrences")
    assert distinct.stats["stage1_health"]["pairs"] == distinct.stats["distinct_train_motifs"]
    assert every.stats["stage1_health"]["pairs"] == every.stats["train_motifs"] > distinct.stats["distinct_train_motifs"]


def test_encoder_params_are_validated_and_recorded(toy_dataset):
    from narbench.harness.runner import ConfigError

    with pytest.raises(ConfigError, match="no parameter 'bogus'"):
        run(RunConfig(encoder="ours", encoder_params={"bogus": 1}, profile="smoke", out=None, progress=False),
            dataset=toy_dataset)
    with pytest.raises(ConfigError, match="motif_examples must be one of"):
        run(RunConfig(encoder="ours", encoder_params={"motif_examples": "some"}, profile="smoke", out=None,
                      progress=False), dataset=toy_dataset)
    with pytest.raises(ConfigError, match="takes a bool"):
        run(RunConfig(encoder="ours", encoder_params={"stage1": "no"}, profile="smoke", out=None, progress=False),
            dataset=toy_dataset)
    ev = run(RunConfig(encoder="ours", encoder_params={"stage1_lr": 0.01, "last_activation": False}, profile="smoke",
                       out=None, progress=False), dataset=toy_dataset)
    enc = ev.result.config["encoder"]
    assert enc["motif_train"]["lr"] == 0.01 and enc["params"]["last_activation"] is False
    assert enc["variant"] == "stage1_lr=0.01,last_activation=False"
    assert "-ours+stage1_lr.0.01+last_activation.False-motif-smoke-" in ev.result.run_id


def test_smoke_result_records_stage1_health(toy_dataset, tmp_path):
    from narbench.eval.result import RunResult

    ev = run(RunConfig(encoder="ours", profile="smoke", out=str(tmp_path), progress=False), dataset=toy_dataset)
    rec = RunResult.read(ev.path).config["encoder_stats"]["stage1_health"]
    assert rec["trained"] is True and len(rec["loss"]) == get_profile("smoke").motif_train.epochs
    for when in ("before", "after"):
        h = rec[when]
        assert h["dims"] == get_profile("smoke").model.hidden and 0 < h["samples"] <= 1024
        assert 1.0 <= h["effective_rank"] <= h["dims"] and 0 <= h["dead_dims"] <= h["dims"]
    assert ev.result.config["encoder"]["variant"] == ""
