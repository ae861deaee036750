"""The regression gate (`narbench.gate`) and the pytest plugin (`narbench.pytest_plugin`).

Everything runs on the `toy` dataset with the training-free `nodefreq` / `edgeop` / `random`
encoders (test-only distributions on sys.path), so each test takes seconds, not minutes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from narbench.harness import gate
from narbench.pytest_plugin import assert_no_regression

pytest_plugins = ["pytester"]

EXAMPLE_DIR = Path(__file__).resolve().parent / "plugin_example"
ENCODERS = ["nodefreq", "random"]


@pytest.fixture
def plugins(plugin, monkeypatch):
    """Both test-only distributions (nodefreq + toy, and the documented example `edgeop`)."""
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    monkeypatch.setenv("COLUMNS", "200")  # rich: no wrapped lines in the captured output
    return plugin


def _cli(argv: list[str]) -> int:
    from narbench.cli import main

    return main(["check", *argv])


def _edit(path: Path, key: str, metric: str, delta: float) -> float:
    data = json.loads(path.read_text())
    data["entries"][key]["metrics"][metric] += delta
    path.write_text(json.dumps(data))
    return data["entries"][key]["metrics"][metric]


def test_update_writes_reference_and_same_run_passes(plugins, tmp_path, capsys):
    ref = tmp_path / "leaderboard" / "reference.json"
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq,random", "--datasets", "toy", "--update"]) == 0
    data = json.loads(ref.read_text())
    assert data["version"] == 1 and data["tolerance"] == gate.DEFAULT_TOLERANCE
    assert set(data["entries"]) == {"toy/nodefreq/none", "toy/random/none"}
    entry = data["entries"]["toy/nodefreq/none"]
    assert {"mrr@20", "map@50", "ndcg@100", "map_capped@20"} <= set(entry["metrics"])
    assert entry["config"]["profile"] == "smoke" and entry["config"]["seed"] == 0
    assert not list(ref.parent.glob("*.tmp"))  # atomic write leaves no temp file

    report = gate.check(ref, encoders=ENCODERS, datasets=["toy"])
    assert report.passed() and not report.dropped and not report.missing
    assert {c.status for c in report.cells} == {"unchanged"}
    assert len(report.cells) == 2 * 12
    capsys.readouterr()
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--encoders", "random", "--datasets", "toy"]) == 0
    assert "gate passed" in capsys.readouterr().out


def test_planted_drop_fails_and_names_the_metric(plugins, tmp_path, capsys):
    ref = tmp_path / "reference.json"
    gate.check(ref, encoders=ENCODERS, datasets=["toy"], update=True)
    _edit(ref, "toy/nodefreq/none", "ndcg@20", +0.05)  # the reference claims more than we get
    _edit(ref, "toy/random/none", "mrr@20", -0.05)  # ... and less here: an improvement
    capsys.readouterr()
    assert _cli(["--reference", str(ref), "--encoders", ",".join(ENCODERS), "--datasets", "toy"]) == 1
    out = capsys.readouterr().out
    assert "gate failed" in out and "1 metric(s) dropped" in out
    assert "toy/nodefreq/none ndcg@20" in out and "(-0.050000)" in out
    assert "improved" in out and "unchanged" in out
    report = gate.check(ref, encoders=ENCODERS, datasets=["toy"])
    assert [(c.key, c.metric) for c in report.dropped] == [("toy/nodefreq/none", "ndcg@20")]
    assert [(c.key, c.metric) for c in report.improved] == [("toy/random/none", "mrr@20")]
    # a tolerance larger than the planted drop lets it through
    assert gate.check(ref, tolerance=0.06, encoders=ENCODERS, datasets=["toy"]).passed()


def test_reference_made_on_other_dataset_content_fails(plugins, tmp_path):
    ref = tmp_path / "reference.json"
    gate.check(ref, encoders=ENCODERS, datasets=["toy"], update=True)
    data = json.loads(ref.read_text())
    data["entries"]["toy/nodefreq/none"]["config"]["dataset_sha256"] = "0" * 64
    ref.write_text(json.dumps(data))
    report = gate.check(ref, encoders=ENCODERS, datasets=["toy"])
    assert not report.passed()
    assert [k for k, _ in report.errors] == ["toy/nodefreq/none"] and "dataset content changed" in report.errors[0][1]
    assert {c.key for c in report.cells} == {"toy/random/none"}
    # what the message says: --update rewrites the entry for the new content
    assert gate.check(ref, encoders=ENCODERS, datasets=["toy"], update=True).updated
    assert json.loads(ref.read_text())["entries"]["toy/nodefreq/none"]["config"]["dataset_sha256"] != "0" * 64


def test_unavailable_dataset_is_skipped_with_a_warning(plugins, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NARBENCH_REAL_FILE", str(tmp_path / "no-such-real.narg"))  # make `real` unavailable
    ref = tmp_path / "reference.json"
    report = gate.check(ref, encoders=["nodefreq"], datasets=["toy", "real"], update=True)
    assert [name for name, _ in report.skipped] == ["real"]
    assert "not available" in report.skipped[0][1]
    assert set(json.loads(ref.read_text())["entries"]) == {"toy/nodefreq/none"}
    capsys.readouterr()
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy,real"]) == 0
    out = capsys.readouterr().out
    assert "warning: skipped dataset real" in out and "gate passed" in out


def test_missing_entry_fails_only_when_strict_and_missing_file_is_an_error(plugins, tmp_path, capsys):
    ref = tmp_path / "reference.json"
    gate.check(ref, encoders=["nodefreq"], datasets=["toy"], update=True)
    args = ["--reference", str(ref), "--encoders", "nodefreq,random", "--datasets", "toy"]
    assert _cli(args) == 0
    assert "no reference entry for toy/random/none" in capsys.readouterr().out
    assert _cli([*args, "--strict"]) == 1
    assert _cli(["--reference", str(tmp_path / "nope.json"), "--encoders", "nodefreq", "--datasets", "toy"]) == 2
    assert "--update" in capsys.readouterr().err
    assert _cli(["--reference", str(ref), "--encoders", "nope", "--datasets", "toy"]) == 2
    # --update keeps the entries it did not run
    gate.check(ref, encoders=["random"], datasets=["toy"], update=True)
    assert set(json.loads(ref.read_text())["entries"]) == {"toy/nodefreq/none", "toy/random/none"}


def test_assert_no_regression_message_lists_every_drop():
    class Result:  # the fields of RunResult the helper reads
        dataset = {"name": "toy"}
        encoder, splitter = "x", "none"
        metrics = {"mrr@20": 0.5, "ndcg@20": 0.40}
        metrics_extra = {"map_capped@20": 0.3}

    cells = assert_no_regression(Result(), {"mrr@20": 0.5, "ndcg@20": 0.39}, tolerance=1e-6)
    assert {c.metric: c.status for c in cells} == {"mrr@20": "unchanged", "ndcg@20": "improved", "map_capped@20": "new"}
    with pytest.raises(AssertionError) as err:
        assert_no_regression(Result(), {"entries": {"toy/x/none": {"metrics": {"mrr@20": 0.6, "ndcg@20": 0.41}}}},
                             tolerance=0.005)
    msg = str(err.value)
    assert "toy/x/none" in msg and "2 metric(s) dropped" in msg
    rows = {line.split()[0]: line.split()[1:] for line in msg.splitlines()[2:]}
    assert rows["mrr@20"] == ["0.600000", "0.500000", "-0.100000", "dropped"]
    assert rows["ndcg@20"] == ["0.410000", "0.400000", "-0.010000", "dropped"]
    assert rows["map_capped@20"] == ["-", "0.300000", "-", "new"]
    assert [ln.split()[-1] for ln in msg.splitlines()[2:]] == ["dropped", "dropped", "new"]  # dropped first
    with pytest.raises(AssertionError, match="no narbench reference entry 'toy/x/none'"):
        assert_no_regression(Result(), {"version": 1, "entries": {}})


def test_third_party_package_gates_itself_with_the_pytest_plugin(plugins, pytester, monkeypatch):
    """The documented example package: update its reference, pass, then fail on a planted drop."""
    # the documented file verbatim, pointed at the suite's tiny `toy` dataset instead of `nas`
    text = (EXAMPLE_DIR / "gate_check.py").read_text()
    assert 'DATASET = "nas"' in text
    (pytester.path / "test_gate_check.py").write_text(text.replace('DATASET = "nas"', 'DATASET = "toy"'))
    ref = pytester.path / "narbench-reference.json"

    res = pytester.runpytest("-p", "narbench.pytest_plugin", "--narbench-update-reference")
    res.assert_outcomes(passed=2)
    assert set(json.loads(ref.read_text())["entries"]) == {"toy/edgeop/none"}

    pytester.runpytest("-p", "narbench.pytest_plugin").assert_outcomes(passed=2)

    _edit(ref, "toy/edgeop/none", "map@20", +0.1)
    res = pytester.runpytest("-p", "narbench.pytest_plugin")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*narbench regression in toy/edgeop/none*", "*map@20 * 1.100000 * 1.000000 * -0.100000 * dropped*"])
    out = res.stdout.str()
    # the failure shows the metric table and the user's test, not narbench's own frames
    assert "def assert_no_regression" not in out and "pytest_plugin.py" not in out
    assert "mrr@20" in out and "unchanged" in out
    failure = out[out.index("_ test_edgeop_does_not_regress _"):out.index("short test summary")]
    assert len(failure.splitlines()) < 40, failure


@pytest.mark.slow
def test_gate_of_ours_on_a_cold_parts_cache_does_not_hang(tmp_path):
    """The CLI's SIGTERM handler is inherited by the parts pool's forked workers; without resetting it
    there, `pool.terminate()` left a worker alive and `pool.join()` waited forever (seen in CI)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "NARBENCH_CACHE": str(tmp_path / "cache"), "NARBENCH_NO_PROGRESS": "1"}
    out = subprocess.run([sys.executable, "-m", "narbench.cli", "check", "--encoders", "ours", "--datasets", "nas",
                          "--baseline", str(root / "leaderboard" / "reference.json"), "--quiet"],
                         capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-1500:]
