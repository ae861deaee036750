import numpy as np
import pytest
import torch

from narbench.baselines.ours import MotifEncoder, data_key, induced, neighbourhood
from narbench.encoder import Labels
from narbench.profiles import get_profile
from narbench.runner import RunConfig, run
from narbench.splitters.motif import MotifSplitter
from narbench.trainer import Trainer
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
    from narbench.runner import ConfigError

    ev = run(RunConfig(encoder="ours", splitter="node-number", splitter_params={"nodes_per_part": 5},
                       profile="smoke", out=None, progress=False), dataset=toy_dataset)
    assert ev.result.config["splitter"]["params"] == {"nodes_per_part": 5}
    with pytest.raises(ConfigError, match="bad parameters for splitter 'node-number'"):
        run(RunConfig(encoder="ours", splitter="node-number", splitter_params={"bogus": 1}, profile="smoke",
                      out=None, progress=False), dataset=toy_dataset)


def test_objective_switch_for_ours(toy_dataset):
    ev = run(RunConfig(encoder="ours", objective="cl", profile="smoke", out=None, progress=False), dataset=toy_dataset)
    assert ev.result.config["encoder"]["train"]["objective"] == "cl"
