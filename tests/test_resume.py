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

    monkeypatch.setattr("narbench.harness.runner.run", fake_run)
    for flags, expected in (([], True), (["--no-resume"], False)):
        with pytest.raises(SystemExit):
            cli.main(["run", "--encoder", "gcn", "--no-progress", *flags])
        assert seen["resume"] is expected


# ------------------------------------------------------------------ safe to read, solid to write (issue 57)


def test_the_random_state_survives_its_plain_form_exactly():
    import random

    import numpy as np

    np.random.seed(7)
    random.seed(7)
    np.random.standard_normal(3)  # numpy keeps a cached Gaussian: it must come back too
    random.gauss(0, 1)  # and Python its gauss_next
    state = resume.random_state()
    plain = resume.plain_random_state(state)
    assert isinstance(plain["numpy_rng"], dict) and isinstance(plain["python_rng"], dict)
    buf = __import__("io").BytesIO()
    torch.save(plain, buf)
    buf.seek(0)
    back = resume.unplain_random_state(torch.load(buf, weights_only=True))
    expected = (np.random.standard_normal(5), random.random(), random.gauss(0, 1))
    resume.set_random_state(back)
    assert np.array_equal(np.random.standard_normal(5), expected[0])
    assert (random.random(), random.gauss(0, 1)) == expected[1:]


def test_concurrent_saves_of_one_configuration_never_collide(toy_dataset, tmp_path):
    """Two runs of one configuration into one --out write the same snapshot files: each write has a
    temp file of its own (31 of 600 saves failed with a fixed temp name)."""
    import threading

    from narbench.baselines.gnn import GNNStack, gcn_conv

    model = GNNStack(gcn_conv, 16, 2, 0.5, num_ops=len(toy_dataset.vocab))
    opt = torch.optim.Adam(model.parameters())
    errors = []

    def saver(n):
        snaps = Snapshots(tmp_path / "snap", "k")
        for epoch in range(n):
            try:
                snaps.save(0, "toy", epoch + 1, model, opt, None, [0.5] * (epoch + 1))
            except Exception as exc:  # noqa: BLE001 - collected, the test says which
                errors.append(exc)

    threads = [threading.Thread(target=saver, args=(100,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in (tmp_path / "snap").iterdir()) == ["stage0-toy.pt"]  # no temp file left
    assert Snapshots(tmp_path / "snap", "k").load(0, "toy")["epochs_done"] == 100


class _FullDisk:
    """A file whose writes fail as on a full disk."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        import errno
        import os

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def test_a_full_disk_during_a_snapshot_is_one_line_and_leaves_no_temp_file(plugin, tmp_path, monkeypatch, capsys):
    import os

    from narbench.cli import main

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to name an fd's file")
    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        fh = real_fdopen(fd, *args, **kwargs)
        return _FullDisk(fh) if f"/{SNAPSHOTS}/" in os.readlink(f"/proc/self/fd/{fd}") else fh

    monkeypatch.setattr(os, "fdopen", fdopen)
    out = tmp_path / "out"
    assert main(["run", "--encoder", "gcn", "--dataset", "toy", "--profile", "smoke", "--no-progress",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: cannot write ") and "stage0-" in lines[0], lines[0]
    assert "no space left on device (ENOSPC); the run stopped after epoch 1" in lines[0], lines[0]
    assert [p for p in out.rglob("*") if p.is_file()] == []  # no snapshot, no 0-byte temp file, no result


def test_a_snapshot_that_does_not_fit_the_model_is_set_aside_and_the_stage_starts_over(toy_dataset, tmp_path):
    """The code changed under one configuration key: the snapshot's weights fit no longer."""
    from narbench.baselines.gnn import GNNStack, gcn_conv

    whole, whole_hist = _toy_fit(None, toy_dataset)
    other = GNNStack(gcn_conv, 8, 2, 0.5, num_ops=len(toy_dataset.vocab))  # another width
    Snapshots(tmp_path, "k").save(0, "toy", 1, other, torch.optim.Adam(other.parameters()), None, [1.0])
    with pytest.warns(SnapshotWarning, match=r"stage0-toy\.pt: it does not fit this run's model .*moved to"):
        model, hist = _toy_fit(Snapshots(tmp_path, "k"), toy_dataset)
    assert hist.losses == whole_hist.losses
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), whole.state_dict().values()))


def test_a_snapshot_with_foreign_random_states_is_set_aside(toy_dataset, tmp_path):
    snaps = Snapshots(tmp_path, "k")
    _toy_fit(snaps, toy_dataset)
    state = torch.load(snaps.path(0, "toy"), weights_only=True)
    state["python_rng"]["internal"] = [1, 2, 3]  # not a Mersenne Twister state
    torch.save(state, snaps.path(0, "toy"))
    with pytest.warns(SnapshotWarning, match="random states the generators refuse"):
        assert Snapshots(tmp_path, "k").load(0, "toy") is None
