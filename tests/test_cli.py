import json

import pytest

from narbench.cli import main


@pytest.mark.parametrize(
    "args, expected",
    [
        (["run", "--encoder", "nope"], "unknown encoder 'nope'; known encoders: "),
        (["run", "--encoder", "gcn", "--splitter", "nope"], "unknown splitter 'nope'; known splitters: "),
        (["run", "--encoder", "gcn", "--dataset", "nope"], "unknown dataset 'nope'; known datasets: "),
        (["run", "--encoder", "gcn", "--splitter", "motif"], "takes no splitter"),
    ],
)
def test_bad_names_exit_nonzero_with_known_names(args, expected, capsys, tmp_path):
    code = main(args + ["--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in " ".join(err.split())
    assert list(tmp_path.iterdir()) == []


def test_unknown_profile_is_rejected_by_argparse(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--profile", "huge"])
    assert exc.value.code == 2
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_listing_commands(capsys, plugin):
    assert main(["encoders"]) == 0
    out = capsys.readouterr().out
    assert "gcn" in out and "gat" in out and "nodefreq" in out and "fails to load" in out
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "nas" in out and "toy" in out
    assert main(["splitters"]) == 0
    assert "none" in capsys.readouterr().out


def test_run_through_cli_with_third_party_plugin(plugin, tmp_path, capsys):
    code = main(["run", "--encoder", "nodefreq", "--dataset", "toy", "--profile", "smoke",
                 "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    files = [p for p in tmp_path.iterdir() if p.suffix == ".json"]
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["encoder"] == "nodefreq" and data["dataset"]["name"] == "toy"
    assert len(data["dataset"]["sha256"]) == 64
    assert "MRR" in capsys.readouterr().out


def test_corrupt_dataset_cache_is_rebuilt(plugin, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--encoder", "random", "--dataset", "toy", "--profile", "smoke", "--out", str(out)]) == 0
    cache = next((tmp_path / "cache").glob("toy-*.narg"))
    first = json.loads(next(out.glob("*.json")).read_text())["dataset"]["sha256"]
    cache.write_bytes(cache.read_bytes()[:100])
    with pytest.warns(UserWarning, match="corrupt"):
        assert main(["run", "--encoder", "random", "--dataset", "toy", "--profile", "smoke",
                     "--out", str(tmp_path / "out2")]) == 0
    second = json.loads(next((tmp_path / "out2").glob("*.json")).read_text())["dataset"]["sha256"]
    assert first == second


def test_missing_real_artifact_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NARBENCH_REAL_FILE", str(tmp_path / "nope.narg"))
    code = main(["run", "--encoder", "gcn", "--splitter", "none", "--dataset", "real", "--out", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "does not exist" in err and "narbench[zoo]" in err and "build-real" in err
