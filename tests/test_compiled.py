"""`Trainer(compile=True)`: the forward through torch.compile, eager when compilation fails."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from narbench.core import registry
from narbench.train import compiled
from narbench.train.encoder import Labels
from narbench.train.profiles import get_profile
from narbench.train.trainer import Trainer, seed_everything

from .conftest import toy_graphs


def _train_and_embed(encoder: str, compile: bool, per_family: int = 4):
    """(trainer, losses of every epoch, embeddings of the training graphs) of a smoke-sized run."""
    graphs = toy_graphs(per_family=per_family)
    families = sorted({g.family for g in graphs})
    cl = np.array([families.index(g.family) for g in graphs])
    seed_everything(0)
    enc = registry.load("encoder", encoder)(8, len(families), get_profile("smoke"))
    trainer = Trainer("cpu", 0, progress=False, jobs=1, compile=compile)
    enc.fit(trainer, graphs, Labels(cl, cl, len(families)))
    emb = enc.embed(trainer, graphs)
    assert "forward" not in enc.__dict__  # the class's forward is back after training and embedding
    return trainer, [loss for h in trainer.histories for loss in h.losses], emb


@pytest.fixture
def eager_gcn():
    return _train_and_embed("gcn", compile=False)


def test_the_forward_goes_through_torch_compile_with_dynamic_shapes(monkeypatch, eager_gcn):
    calls = []

    def fake_compile(fn, **kwargs):  # records what the trainer asks for, runs eager
        calls.append(kwargs)

        def run(*a, **k):
            calls.append("call")
            return fn(*a, **k)
        return run

    monkeypatch.setattr(torch, "compile", fake_compile)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiled.CompileWarning)
        trainer, losses, emb = _train_and_embed("gcn", compile=True)
    assert calls[0] == {"dynamic": True, "options": compiled.OPTIONS}
    assert calls.count({"dynamic": True, "options": compiled.OPTIONS}) == 1  # compiled once, for fit and embed
    assert calls.count("call") >= 2 and trainer.compile_failure is None
    assert losses == eager_gcn[1] and torch.equal(emb, eager_gcn[2])


def test_a_container_without_forward_has_its_children_compiled():
    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.f_s, self.f_c = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)

    pair, linear = Pair(), torch.nn.Linear(2, 2)
    assert compiled.targets(pair) == [pair.f_s, pair.f_c]
    assert compiled.targets(linear) == [linear]


def test_torch_compile_refusing_warns_once_and_the_run_is_eager(monkeypatch, eager_gcn):
    def refuse(fn, **kwargs):
        raise RuntimeError("no working C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", refuse)
    with pytest.warns(compiled.CompileWarning) as record:
        trainer, losses, emb = _train_and_embed("gcn", compile=True)
    assert len(record) == 1
    assert str(record[0].message) == ("torch.compile failed, running eager instead "
                                      "(RuntimeError: no working C++ compiler found)")
    assert trainer.compile_failure == "RuntimeError: no working C++ compiler found"
    assert losses == eager_gcn[1] and torch.equal(emb, eager_gcn[2])


def test_a_compilation_failing_at_the_first_call_falls_back_with_the_random_state_restored(monkeypatch, eager_gcn):
    def compile_then_fail(fn, **kwargs):
        def run(*a, **k):
            torch.rand(1000)  # as a partly traced forward may: draws random numbers, then fails
            raise RuntimeError("BackendCompilerFailed: an op inductor does not support")
        return run

    monkeypatch.setattr(torch, "compile", compile_then_fail)
    with pytest.warns(compiled.CompileWarning, match="an op inductor does not support") as record:
        trainer, losses, emb = _train_and_embed("gcn", compile=True)
    assert len(record) == 1
    # dropout's masks come from the same random stream as in the eager run: bit-identical
    assert losses == eager_gcn[1] and torch.equal(emb, eager_gcn[2])


def test_the_cli_flag_reaches_the_trainer_and_the_result_records_it(monkeypatch, tmp_path, toy_dataset):
    from narbench import cli
    from narbench.harness import runner
    from narbench.harness.confighash import result_hash
    from narbench.eval.result import RunResult

    seen = []
    real_trainer = runner.Trainer

    def spy(*a, **k):
        trainer = real_trainer(*a, **k)
        seen.append(trainer.compile)
        return trainer

    real_run = runner.run
    monkeypatch.setattr(runner, "Trainer", spy)
    monkeypatch.setattr(runner, "run", lambda cfg, console=None: real_run(cfg, dataset=toy_dataset, console=console))
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)  # the wiring, not inductor (the slow test)
    paths = {}
    for flag in ([], ["--compile"]):
        out = tmp_path / ("compiled" if flag else "eager")
        argv = ["run", "--encoder", "gcn", "--profile", "smoke", "--no-progress", "--jobs", "1", "--out", str(out), *flag]
        assert cli.main(argv) == 0
        paths[bool(flag)] = next(out.rglob("*.json"))
    assert seen == [False, True]
    eager, comp = (RunResult.read(paths[k]) for k in (False, True))
    assert eager.config["run"]["compile"] is False and "compile_failure" not in eager.config
    assert comp.config["run"]["compile"] is True and comp.config["compile_failure"] is None
    assert comp.metrics == eager.metrics  # the fake compile is eager: the same numbers...
    assert result_hash(comp) != result_hash(eager)  # ...but a configuration of its own
    assert json.loads(paths[False].read_text())["config_hash"] == result_hash(eager)


def test_an_eager_run_keeps_the_hash_it_had_before_the_compile_option(toy_dataset):
    from narbench.harness.confighash import FIELDS, config_hash, result_fields
    from narbench.harness.runner import RunConfig, run

    ev = run(RunConfig(encoder="random", dataset="toy", profile="smoke", out=None, progress=False), dataset=toy_dataset)
    fields = result_fields(ev.result)
    assert set(fields) == set(FIELDS)  # no `compile` field: the hash of every file written before it
    assert config_hash({**fields, "compile": True}) != config_hash(fields)
    with pytest.raises(ValueError, match="unexpected"):
        config_hash({**fields, "jit": True})


@pytest.mark.slow
@pytest.mark.parametrize("encoder", ["gcn", "gat", "gin"])
def test_compiled_training_and_embedding_agree_with_eager(encoder):
    """Inductor for real (C++ compiler; 15-30 s a model): losses and embeddings as eager's, to rounding."""
    _, eager_losses, eager_emb = _train_and_embed(encoder, compile=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiled.CompileWarning)
        trainer, losses, emb = _train_and_embed(encoder, compile=True)
    assert trainer.compile_failure is None
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    if encoder == "gin":
        # GIN's Linear before BatchNorm has a bias whose gradient is 0 in exact arithmetic: Adam
        # scales its rounding noise to steps of the learning rate, whose sign differs between any
        # two orders of summation, so the trained weights drift apart by ~lr per step (about 1% of
        # the embedding here) while the losses agree: compare directions.
        cos = torch.nn.functional.cosine_similarity(emb, eager_emb, dim=1)
        assert cos.min() > 0.999
    else:
        torch.testing.assert_close(emb, eager_emb, rtol=1e-5, atol=1e-5)
