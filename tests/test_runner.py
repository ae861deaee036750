import json

import numpy as np
import pytest
import torch

from narbench.eval.metrics import METRICS
from narbench.eval.result import RunResult
from narbench.harness.runner import ConfigError, RunConfig, run


def _run(ds, tmp_path, **kw):
    kw.setdefault("profile", "smoke")
    return run(RunConfig(out=str(tmp_path), progress=False, **kw), dataset=ds)


def test_gcn_run_writes_complete_result(toy_dataset, tmp_path):
    ev = _run(toy_dataset, tmp_path, encoder="gcn")
    data = json.loads(ev.path.read_text())
    assert set(METRICS) == set(data["metrics"])
    assert all(0.0 <= v <= 1.0 for v in data["metrics"].values())
    assert data["dataset"]["name"] == "toy" and data["dataset"]["sha256"] == "0" * 64
    assert data["encoder"] == "gcn" and data["splitter"] == "none" and data["profile"] == "smoke"
    assert data["config"]["profile"]["model"]["hidden"] == 32
    assert set(data["timings"]) >= {"data", "train", "embed", "retrieve", "score", "total"}
    assert data["environment"]["packages"]["torch"] and data["environment"]["packages"]["ranx"]
    origin = data["environment"]["entry_points"]["encoder"]
    assert origin["distribution"] == "narbench" and origin["version"] == data["environment"]["packages"]["narbench"]
    assert origin["value"] == "narbench.baselines.gnn:GCNEncoder"
    assert data["environment"]["entry_points"]["splitter"]["name"] == "none"
    # the host's kernel dispatch is recorded: another ISA changes floats in the last digits
    assert data["environment"]["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability()
    assert "git_commit" in data and data["device"] == "cpu"
    assert data["config"]["precision"] == "float32"  # bfloat16 autocast only on CUDA (recorded, not hashed)
    # the process's peak memory, for sizing runs side by side (CUDA adds its allocator's peaks)
    memory = data["config"]["memory"]
    assert set(memory) <= {"host_rss"} and (not memory or 0.05 < memory["host_rss"] < 64), memory
    assert data["num_queries"] == len(toy_dataset.split.test)
    assert (tmp_path / f"{data['run_id']}.queries.json.gz").exists()
    assert RunResult.read(ev.path).metrics == data["metrics"]


def test_same_seed_same_metrics(toy_dataset, tmp_path):
    a = _run(toy_dataset, tmp_path / "a", encoder="gcn", seed=3).result.metrics
    b = _run(toy_dataset, tmp_path / "b", encoder="gcn", seed=3).result.metrics
    assert a == b


def test_trained_gnn_beats_random_floor(toy_dataset, tmp_path):
    gcn = _run(toy_dataset, tmp_path, encoder="gcn").result.metrics
    floor = np.mean([_run(toy_dataset, tmp_path, encoder="random", seed=s).result.metrics["ndcg@20"] for s in range(3)])
    assert gcn["ndcg@20"] > floor + 0.1


def test_whole_graph_encoder_rejects_a_splitter(toy_dataset, tmp_path):
    with pytest.raises(ConfigError, match="takes no splitter"):
        _run(toy_dataset, tmp_path, encoder="gcn", splitter="motif")


def test_unknown_profile_and_objective(toy_dataset, tmp_path):
    with pytest.raises(ConfigError, match="unknown profile 'huge'"):
        _run(toy_dataset, tmp_path, encoder="gcn", profile="huge")
    with pytest.raises(ConfigError, match="unknown objective"):
        _run(toy_dataset, tmp_path, encoder="gcn", objective="mse")


def test_objective_is_recorded(toy_dataset, tmp_path):
    ev = _run(toy_dataset, tmp_path, encoder="gat", objective="ce")
    assert ev.result.config["encoder"]["train"]["objective"] == "ce"
    assert len(ev.result.config["training_history"]) == 1


def test_no_result_file_when_run_fails(toy_dataset, tmp_path, monkeypatch):
    import narbench.harness.runner as runner

    def fail(*a, **k):
        raise RuntimeError("scoring crashed")

    monkeypatch.setattr(runner, "score_rankings", fail)
    with pytest.raises(RuntimeError, match="scoring crashed"):
        _run(toy_dataset, tmp_path, encoder="random")
    assert list(tmp_path.iterdir()) == []


def test_malformed_result_file(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a valid narbench result file"):
        RunResult.read(bad)


def test_the_cpu_computes_in_float32_even_when_mixed_precision_is_asked():
    """Mixed precision is CUDA's bfloat16 autocast only: a CPU trainer's matmuls stay float32 (what
    `config.precision` records), so CPU results never depend on an AMP switch."""
    from narbench.train.trainer import Trainer

    with Trainer("cpu", 0, progress=False, amp=True).autocast():
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.float32
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):  # what the test would see if it autocast
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.bfloat16
