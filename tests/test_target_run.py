"""`narbench._target_run`: the device a search target runs on."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from narbench.search_engine._target_run import _devices, extract  # noqa: E402
from tests.search_models import DataDependent, TinyCNN, TinyTagger  # noqa: E402


def test_device_order():
    assert _devices(None) == ["meta", "cpu"]
    assert _devices(TinyCNN()) == ["meta", "cpu"]
    with torch.device("meta"):
        assert _devices(TinyCNN()) == ["meta"]


@pytest.mark.parametrize("cls, shape", [(TinyCNN, (1, 3, 16, 16)), (TinyTagger, None)])
def test_an_instance_records_the_graph_of_the_built_model_and_keeps_its_weights(cls, shape):
    model = cls()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    raw, info = extract(cls.__name__, None, instance=model, shape=shape)
    built, built_info = extract(cls.__name__, cls, shape=shape)
    assert info["device"] == built_info["device"] == "meta"
    assert raw.signature() == built.signature()
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_each_module_gets_its_own_training_mode_back():
    model = TinyCNN().train()
    model.b1.eval()
    extract("TinyCNN", None, instance=model, shape=(1, 3, 16, 16))
    assert model.training and model.c1.training and not model.b1.training


def test_a_forward_meta_cannot_run_moves_to_the_cpu():
    raw, info = extract("DataDependent", None, instance=DataDependent(), shape=(1, 3, 16, 16))
    tiny, _ = extract("TinyCNN", None, instance=TinyCNN(), shape=(1, 3, 16, 16))
    assert info["device"] == "cpu" and raw.num_nodes == tiny.num_nodes + 1  # TinyCNN's graph and the product


def test_meta_weights_are_swapped_in_for_the_pass_and_back_even_when_it_raises():
    from narbench.search_engine._target_run import _meta_weights

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 4))
    model[2].weight = model[0].weight  # tied
    own = {id(t) for t in [*model.parameters(), *model.buffers()]}
    seen = {}
    with pytest.raises(ValueError), _meta_weights(list(model.modules())):
        seen = {"w0": model[0].weight, "w2": model[2].weight, "mean": model[1].running_mean,
                "grad": model[0].bias.requires_grad}
        raise ValueError("the forward pass failed")
    assert seen["w0"] is seen["w2"] and seen["w0"].device.type == "meta" and seen["w0"].requires_grad
    assert seen["mean"].device.type == "meta" and not seen["mean"].requires_grad and seen["grad"]
    assert {id(t) for t in [*model.parameters(), *model.buffers()]} == own  # the very same tensors back
    assert model[2].weight is model[0].weight and model[0].weight.device.type == "cpu"


class _OwnReferences(torch.nn.Module):
    """Keras 3 on torch, in small: the forward reads its weights through references of its own (not the
    module's tables) and makes its input a CPU tensor; the statistics are frozen (requires_grad False)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.moving_variance = torch.nn.Parameter(torch.ones(4), requires_grad=False)
        self._refs = [self.weight, self.moving_variance]

    def forward(self, x):
        if x.is_meta:
            x = torch.zeros(x.shape)
        w, var = self._refs
        return (x @ w) * torch.rsqrt(var + 1e-3)


def test_an_instance_records_a_frozen_weight_its_forward_reads_through_its_own_reference():
    model = _OwnReferences()
    raw, info = extract("OwnReferences", None, instance=model, shape=(1, 4))
    built, _ = extract("OwnReferences", _OwnReferences, shape=(1, 4))
    assert raw.signature() == built.signature()
    assert "RsqrtBackward0" in raw.ops  # the frozen statistic's chain is in the graph
    assert not model.moving_variance.requires_grad and model.weight.requires_grad  # flags as they were
