"""Epoch snapshots: a run killed during training goes on from its last finished epoch, with the
numbers of an uninterrupted run."""

import json

import pytest
import torch

from narbench.harness.runner import SNAPSHOTS, RunConfig, run
from narbench.train import resume
from narbench.train.profiles import TrainConfig
from narbench.train.resume import Snapshots, SnapshotWarning
from narbench.train.trainer import Trainer, seed_everything


def _run(ds, out, **kw):
    return run(RunConfig(encoder="gcn", profile="smoke", out=str(out), progress=False, **kw), dataset=ds)


def _kill_after_epoch(monkeypatch, epochs_done: int) -> None:
    """Make the run die (Ctrl-C) right after the snapshot of epoch `epochs_done` is written."""
    save = Snapshots.save

    def save_then_die(self, index, stage, done, *a, **k):
        path = save(self, index, stage, done, *a, **k)
        if done == epochs_done:
            raise KeyboardInterrupt
        return path

    monkeypatch.setattr(Snapshots, "save", save_then_die)


@pytest.mark.isa  # bit-identical under every CPU kernel set: the same kernels run before and after the kill
def test_a_killed_run_resumes_with_the_numbers_of_an_uninterrupted_one(toy_dataset, tmp_path, monkeypatch):
    whole = _run(toy_dataset, tmp_path / "whole")
    epochs = len(whole.result.config["training_history"][0]["losses"])
    assert epochs >= 2 and "resumed" not in whole.result.config
    assert not (tmp_path / "whole" / SNAPSHOTS).exists()  # cleared once the result is written

    out = tmp_path / "killed"
    with monkeypatch.context() as m:
        _kill_after_epoch(m, 1)
        with pytest.raises(KeyboardInterrupt):
            _run(toy_dataset, out)
    assert not list(out.glob("*.json"))  # no result, but the snapshot of epoch 1
    assert len(list((out / SNAPSHOTS).rglob("*.pt"))) == 1

    again = _run(toy_dataset, out)
    assert again.result.metrics == whole.result.metrics
    assert again.result.config["training_history"] == whole.result.config["training_history"]
    assert torch.equal(again.query_embeddings, whole.query_embeddings)
    (resumed,) = again.result.config["resumed"]
    assert resumed["epochs_done"] == 1 and "git_commit" in resumed["written_by"]
    assert json.loads(again.path.read_text())["config"]["resumed"][0]["epochs_done"] == 1
    assert not (out / SNAPSHOTS).exists()


def test_no_resume_neither_loads_nor_writes_snapshots(toy_dataset, tmp_path, monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _kill_after_epoch(m, 1)
        with pytest.raises(KeyboardInterrupt):
            _run(toy_dataset, out)
    left = list((out / SNAPSHOTS).rglob("*.pt"))
    ev = _run(toy_dataset, out, resume=False)
    assert "resumed" not in ev.result.config and list((out / SNAPSHOTS).rglob("*.pt")) == left


def test_another_configuration_does_not_resume_from_a_snapshot(toy_dataset, tmp_path, monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _kill_after_epoch(m, 1)
        with pytest.raises(KeyboardInterrupt):
            _run(toy_dataset, out, seed=0)
    ev = _run(toy_dataset, out, seed=1)
    assert "resumed" not in ev.result.config
    assert len(list((out / SNAPSHOTS).iterdir())) == 1  # seed 0's snapshot is still there for seed 0


def _toy_fit(snapshots, toy_dataset, epochs=3, on_epoch=None, step=lambda m, b: m(b).pow(2).mean()):
    from narbench.baselines.gnn import GNNStack, gcn_conv
    from narbench.train.encoder import graph_to_data

    seed_everything(0)
    model = GNNStack(gcn_conv, 16, 2, 0.5, num_ops=len(toy_dataset.vocab))
    datas = [graph_to_data(g, len(toy_dataset.vocab)) for g in toy_dataset.graphs]
    trainer = Trainer("cpu", 0, progress=False, snapshots=snapshots)
    cfg = TrainConfig(epochs=epochs, batch_size=8, lr=1e-2)
    hist = trainer.fit(model, datas, cfg, step, stage="toy", on_epoch=on_epoch)
    return model, hist


def test_an_unreadable_snapshot_is_reported_set_aside_and_the_stage_starts_over(toy_dataset, tmp_path):
    whole, whole_hist = _toy_fit(None, toy_dataset)
    snaps = Snapshots(tmp_path, "k")
    _toy_fit(snaps, toy_dataset)
    path = snaps.path(0, "toy")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a kill mid-write of another tool, a full disk
    with pytest.warns(SnapshotWarning, match=r"cannot resume from .*stage0-toy\.pt.*moved to stage0-toy\.corrupt"):
        model, hist = _toy_fit(Snapshots(tmp_path, "k"), toy_dataset)
    assert path.with_suffix(".corrupt").read_bytes() == data[: len(data) // 2]  # kept, for a look
    assert hist.losses == whole_hist.losses
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), whole.state_dict().values()))


def test_a_snapshot_of_another_key_or_format_is_not_loaded(toy_dataset, tmp_path, monkeypatch):
    _toy_fit(Snapshots(tmp_path, "k"), toy_dataset)
    with pytest.warns(SnapshotWarning, match="written by another run"):
        assert Snapshots(tmp_path, "other").load(0, "toy") is None
    _toy_fit(Snapshots(tmp_path, "k"), toy_dataset)
    monkeypatch.setattr(resume, "FORMAT", resume.FORMAT + 1)
    with pytest.warns(SnapshotWarning, match="not a format-"):
        assert Snapshots(tmp_path, "k").load(0, "toy") is None


def test_a_finished_stage_is_restored_not_retrained(toy_dataset, tmp_path):
    snaps = Snapshots(tmp_path, "k")
    model, hist = _toy_fit(snaps, toy_dataset)
    calls = []
    again = Snapshots(tmp_path, "k")
    fresh, h = _toy_fit(again, toy_dataset, step=lambda m, b: calls.append(1) or m(b).pow(2).mean())
    assert calls == [] and h.losses == hist.losses and again.resumed[0]["epochs_done"] == 3
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values()))


def test_a_stage_with_a_per_epoch_callback_is_not_snapshotted(toy_dataset, tmp_path):
    seen = []
    _toy_fit(Snapshots(tmp_path, "k"), toy_dataset, on_epoch=lambda e, loss: seen.append(e))
    assert seen == [0, 1, 2] and not list(tmp_path.glob("*.pt"))


def test_the_cli_turns_resuming_off(monkeypatch):
    from narbench import cli

    seen = {}

    def fake_run(cfg, console=None):
        seen["resume"] = cfg.resume
        raise SystemExit(0)

    monkeypatch.setattr("narbench.runner.run", fake_run)
    for flags, expected in (([], True), (["--no-resume"], False)):
        with pytest.raises(SystemExit):
            cli.main(["run", "--encoder", "gcn", "--no-progress", *flags])
        assert seen["resume"] is expected
