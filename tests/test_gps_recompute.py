"""gps recomputes its layers in the backward pass above a size (`GPSStack.CHECKPOINT_ELEMENTS`) to bound
memory. A recomputed layer must be the layer that was not recomputed: the same outputs and gradients, and
its batch norms' running statistics updated once, not a second time by the recomputation (which would
weigh every large batch twice in the statistics that embed the corpus)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Batch

from narbench.baselines import gnn
from narbench.train.profiles import get_profile
from tests.conftest import toy_graphs


def _step(stack, batch, recompute: bool):
    stack.CHECKPOINT_ELEMENTS = 0 if recompute else 1 << 62
    torch.manual_seed(7)  # the same dropout draws for both
    out = stack(batch)
    out.square().sum().backward()
    return out.detach()


@pytest.mark.parametrize("steps", [1, 3])
def test_a_recomputed_layer_is_the_layer_not_recomputed(steps):
    enc = gnn.GPSEncoder(8, 4, get_profile("smoke"))
    enc.window = 4  # several attention groups per graph
    graphs = toy_graphs(per_family=2)
    batch = Batch.from_data_list(enc.to_datas(_Trainer(), graphs))
    torch.manual_seed(0)
    stack = gnn.GPSStack(8, 32, 2, 0.1, window=4).train()
    plain, again = copy.deepcopy(stack), copy.deepcopy(stack)
    for _ in range(steps):
        a, b = _step(plain, batch, False), _step(again, batch, True)
        assert torch.equal(a, b)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(plain.parameters(), again.parameters()))
    buffers = dict(again.named_buffers())
    assert any("running_mean" in name for name in buffers)
    for name, value in plain.named_buffers():
        assert torch.equal(value, buffers[name]), name  # running statistics and batch counts updated once


class _Trainer:
    jobs = 1


def test_norm_stats_twice_is_the_behaviour_before_the_fix():
    """`norm_stats=twice` keeps what result files on `real` written before the parameter ran."""
    enc = gnn.GPSEncoder(8, 4, get_profile("smoke"))
    enc.window = 4
    batch = Batch.from_data_list(enc.to_datas(_Trainer(), toy_graphs(per_family=2)))
    torch.manual_seed(0)
    stack = gnn.GPSStack(8, 32, 2, 0.1, window=4).train()
    plain, twice = copy.deepcopy(stack), copy.deepcopy(stack)
    twice.norm_stats_once = False
    _step(plain, batch, False), _step(twice, batch, True)
    mean = "convs.0.norm1.module.running_mean"
    assert not torch.equal(dict(plain.named_buffers())[mean], dict(twice.named_buffers())[mean])
    counts = "convs.0.norm1.module.num_batches_tracked"
    assert int(dict(twice.named_buffers())[counts]) == 2 * int(dict(plain.named_buffers())[counts]) == 2


def test_gps_refuses_an_unknown_norm_stats(toy_dataset):
    enc = gnn.GPSEncoder(8, 4, get_profile("smoke"))
    enc.set_params({"norm_stats": "thrice"})
    with pytest.raises(ValueError, match="'norm_stats' is 'once' or 'twice', got 'thrice'"):
        enc.fit(None, toy_dataset.graphs, None)


def _file(dataset, params=None):
    from narbench.eval.result import RunResult

    encoder = {"train": {"objective": "ce+cl"}}
    if params is not None:
        encoder |= {"params": params, "variant": ",".join(f"{k}={v}" for k, v in params.items() if v != "once")}
    return RunResult(run_id="x", encoder="gps", splitter="none", dataset={"name": dataset, "version": "2.2"},
                     profile="quick", seed=0, config={"run": {"encoder": "gps"}, "encoder": encoder,
                                                      "labels": {"cl": "family", "ce": "family"}},
                     split="standard", protocol="family", metrics={}, metrics_extra={}, timings={}, device="cpu",
                     num_queries=1, num_corpus=1, num_train=1)


def test_a_gps_file_on_real_from_before_the_fix_is_its_own_configuration_and_row():
    """Files written before `norm_stats` existed ran `twice` on `real` (a different run from today's default,
    in a row of its own) and, on `nas`, where no batch was large enough to recompute, the numbers of `once`."""
    from narbench.harness.confighash import result_hash
    from narbench.leaderboard.records import Record

    def variant(result):
        return Record(path=Path("r.json"), result=result).variant

    old_real, new_real = _file("real"), _file("real", {"norm_stats": "once"})
    explicit = _file("real", {"norm_stats": "twice"})
    assert result_hash(old_real) == result_hash(explicit) != result_hash(new_real)
    assert variant(old_real) == variant(explicit) == "norm_stats=twice" and variant(new_real) == ""
    old_nas, new_nas = _file("nas"), _file("nas", {"norm_stats": "once"})
    assert result_hash(old_nas) == result_hash(new_nas) and variant(old_nas) == variant(new_nas) == ""
