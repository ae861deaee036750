import json

import numpy as np
import pytest
import torch

from narbench.train.checkpoint import CheckpointError
from narbench.data.dataset import GraphDataset, stratified_split
from narbench.harness.runner import RunConfig, run
from tests.conftest import toy_graphs


def _run(ds, tmp_path, **kw):
    kw.setdefault("profile", "smoke")
    return run(RunConfig(out=str(tmp_path), progress=False, **kw), dataset=ds)


def test_weights_saved_and_reloaded_exactly(toy_dataset, tmp_path, monkeypatch):
    first = _run(toy_dataset, tmp_path / "a", encoder="gcn", save_weights=True)
    weights = tmp_path / "a" / f"{first.result.run_id}.pt"
    assert weights.is_file()
    # Starting from the trained weights with zero epochs of further training reproduces the embeddings.
    from narbench.train import profiles

    monkeypatch.setitem(profiles.PROFILES, "smoke-zero", profiles.get_profile("smoke", epochs=0))
    again = _run(toy_dataset, tmp_path / "b", encoder="gcn", profile="smoke-zero", init_from=str(first.path))
    assert torch.allclose(again.query_embeddings, first.query_embeddings, atol=1e-6)
    init = again.result.config["init"]
    assert init["run_id"] == first.result.run_id and init["skipped"] == [] and init["copied"] > 0


def test_transfer_across_vocabularies_maps_ops_by_name(toy_dataset, tmp_path):
    first = _run(toy_dataset, tmp_path / "a", encoder="gcn", save_weights=True)
    graphs = toy_graphs(per_family=8, seed=1)
    # Same ops under other names, in another order, plus one op the source never saw.
    vocab = [f"op{i}" for i in range(8)][::-1] + ["brand-new"]
    for g in graphs:
        g.ops = 7 - g.ops
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    other = GraphDataset("toy2", "0", vocab, graphs, "1" * 64, split)
    ev = _run(other, tmp_path / "b", encoder="gcn", init_from=str(first.path))
    init = ev.result.config["init"]
    assert init["by_op_name"] == ["stack.embedding.weight"] and init["shared_ops"] == 8
    assert "classifier.weight" not in init["skipped"]  # same number of coarse classes: copied


def test_bad_init_sources_are_clear_errors(toy_dataset, tmp_path):
    first = _run(toy_dataset, tmp_path, encoder="gcn")  # no --save-weights
    with pytest.raises(CheckpointError, match="saved no weights"):
        _run(toy_dataset, tmp_path, encoder="gcn", init_from=str(first.path))
    with pytest.raises(CheckpointError, match="not found"):
        _run(toy_dataset, tmp_path, encoder="gcn", init_from=str(tmp_path / "missing.pt"))
    saved = _run(toy_dataset, tmp_path / "w", encoder="gat", save_weights=True)
    with pytest.raises(CheckpointError, match="encoder 'gat', not 'gcn'"):
        _run(toy_dataset, tmp_path, encoder="gcn", init_from=str(saved.path))
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="broken.pt is a text file, not a checkpoint torch can read; expected"):
        _run(toy_dataset, tmp_path, encoder="gcn", init_from=str(broken))


@pytest.mark.parametrize("content, what", [
    (b"", "an empty file"),
    (b"PK\x03\x04junk", "a zip archive"),
    (b"\x89PNG\r\n", "a PNG image"),
    (bytes(range(128, 256)), "128 bytes of binary data"),
    (b'{"a": 1}', "a JSON file"),
])
def test_a_file_that_is_not_a_checkpoint_is_described(tmp_path, content, what):
    from narbench.train.checkpoint import check

    path = tmp_path / "weights.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as err:
        check(path, "gcn")
    assert str(err.value).startswith(f"{path} is {what}, not a checkpoint") and "--save-weights" in str(err.value)
    torch.save({"something": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="a torch file but not a narbench checkpoint"):
        check(path, "gcn")
    bad_json = tmp_path / "result.json"
    bad_json.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="result.json is a JSON file, not a narbench result file"):
        check(bad_json, "gcn")
    with pytest.raises(CheckpointError, match="is a folder, not a checkpoint"):
        check(tmp_path, "gcn")


def test_ours_can_start_from_saved_weights(toy_dataset, tmp_path):
    first = _run(toy_dataset, tmp_path / "a", encoder="ours", save_weights=True)
    ev = _run(toy_dataset, tmp_path / "b", encoder="ours", init_from=str(first.path))
    assert ev.result.config["init"]["skipped"] == []
    assert json.loads(ev.path.read_text())["config"]["run"]["init_from"] == str(first.path)
