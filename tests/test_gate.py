"""The regression gate (`narbench.gate`) and the pytest plugin (`narbench.pytest_plugin`).

Everything runs on the `toy` dataset with the training-free `nodefreq` / `edgeop` / `random`
encoders (test-only distributions on sys.path), so each test takes seconds, not minutes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from narbench.harness import bands, gate
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
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq,random", "--datasets", "toy", "--update",
                 "--no-measure"]) == 0
    data = json.loads(ref.read_text())
    assert data["version"] == 2 and data["bands"]["factor"] == bands.FACTOR
    assert [e["name"] for e in data["bands"]["environments"]] == [bands.Environment.current(gate.GATE_THREADS).name]
    assert set(data["entries"]) == {"toy/nodefreq/none", "toy/random/none"}
    entry = data["entries"]["toy/nodefreq/none"]
    assert {"mrr@20", "map@50", "ndcg@100", "map_capped@20"} <= set(entry["metrics"])
    assert set(entry["band"]) == set(entry["metrics"])
    assert set(entry["band"].values()) == {bands.FLOOR}  # nodefreq does not say it is training-free: the floor
    free = data["entries"]["toy/random/none"]
    assert set(free["band"].values()) == {0.0}  # training-free, one environment: exact
    assert free["derivation"]["trained"] is False and free["derivation"]["environments"]
    assert entry["config"]["profile"] == "smoke" and entry["config"]["seed"] == 0
    assert not list(ref.parent.glob("*.tmp"))  # atomic write leaves no temp file

    report = gate.check(ref, encoders=ENCODERS, datasets=["toy"])
    assert report.passed(strict=True) and not report.dropped and not report.missing and not report.warnings
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
    assert "gate failed" in out and "1 metric(s) dropped, 1 rose above their band" in out
    assert "toy/nodefreq/none ndcg@20" in out and "(-0.050000; band 1.0e-05)" in out
    assert "toy/random/none mrr@20" in out and "(+0.050000; band 0.0e+00)" in out
    assert "improved" in out and "unchanged" in out
    report = gate.check(ref, encoders=ENCODERS, datasets=["toy"])
    assert [(c.key, c.metric) for c in report.dropped] == [("toy/nodefreq/none", "ndcg@20")]
    assert [(c.key, c.metric) for c in report.improved] == [("toy/random/none", "mrr@20")]
    # a tolerance larger than the planted drop lets it through
    assert gate.check(ref, tolerance=0.06, encoders=ENCODERS, datasets=["toy"]).passed()
    # a rise alone fails (behaviour changed), unless rises are allowed
    _edit(ref, "toy/nodefreq/none", "ndcg@20", -0.05)
    assert not gate.check(ref, encoders=ENCODERS, datasets=["toy"]).passed()
    assert gate.check(ref, encoders=ENCODERS, datasets=["toy"], allow_improvements=True).passed()
    capsys.readouterr()
    assert _cli(["--reference", str(ref), "--encoders", ",".join(ENCODERS), "--datasets", "toy",
                 "--allow-improvements"]) == 0
    assert "gate passed: 1 improved" in capsys.readouterr().out


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
    err = capsys.readouterr().err  # never `--update`: that writes a reference the run passes by construction
    assert "nope.json does not exist" in err and "--update" not in err and len(err.strip().splitlines()) == 1
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


def _toy_reference(tmp_path: Path) -> Path:
    ref = tmp_path / "reference.json"
    gate.check(ref, encoders=ENCODERS, datasets=["toy"], update=True)
    return ref


def _spoil(path: Path, how) -> None:
    data = json.loads(path.read_text())
    how(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("how, says", [
    (lambda d: d.update(version=1, tolerance=float("nan")), "tolerance nan"),
    (lambda d: d.update(version=1, tolerance=-1e-4), "tolerance -0.0001"),
    (lambda d: d["entries"]["toy/nodefreq/none"]["metrics"].update({"ndcg@20": float("nan")}), "'ndcg@20' is nan"),
    (lambda d: d["entries"]["toy/nodefreq/none"]["metrics"].update({"ndcg@20": "0.5"}), "not a finite number"),
    (lambda d: d["entries"]["toy/nodefreq/none"].update(metrics={}), "has no metrics"),
    (lambda d: d["entries"]["toy/nodefreq/none"].pop("metrics"), "has no metrics"),
    (lambda d: d["entries"]["toy/nodefreq/none"]["band"].update({"mrr@20": -1e-4}), "not a finite number >= 0"),
    (lambda d: d["entries"]["toy/nodefreq/none"]["band"].update({"mrr@20": float("inf")}), "not a finite number >= 0"),
    (lambda d: d["entries"]["toy/nodefreq/none"]["band"].pop("mrr@20"), "no band for mrr@20"),
    (lambda d: d["entries"]["toy/nodefreq/none"].pop("derivation"), "how its band was derived"),
    (lambda d: d.update(version=3), "version 3"),
    (lambda d: d.update(entries=[]), "'entries' must be an object"),
])
def test_a_reference_that_would_blind_the_gate_is_refused_in_one_line(plugins, tmp_path, capsys, how, says):
    """NaN or negative bands, entries without metrics: each once let a real drop pass; now exit 2, nothing run."""
    ref = _toy_reference(tmp_path)
    _spoil(ref, how)
    capsys.readouterr()
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy"]) == 2
    err = capsys.readouterr().err
    assert says in err and "not a usable narbench reference" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(gate.GateError):  # --update does not overwrite a file it cannot read
        gate.check(ref, encoders=["nodefreq"], datasets=["toy"], update=True)


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\xff\xfe", b"[1, 2", b"[]"])
def test_a_binary_or_mistyped_reference_is_one_line_not_a_traceback(plugins, tmp_path, capsys, content):
    ref = tmp_path / "reference.json"
    ref.write_bytes(content)
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy"]) == 2
    err = capsys.readouterr().err
    assert str(ref) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_each_metric_is_judged_by_its_own_band(plugins, tmp_path):
    ref = _toy_reference(tmp_path)
    entry = "toy/nodefreq/none"
    _spoil(ref, lambda d: d["entries"][entry]["metrics"].update(
        {"ndcg@20": d["entries"][entry]["metrics"]["ndcg@20"] + 0.05,
         "mrr@20": d["entries"][entry]["metrics"]["mrr@20"] + 0.05}))
    _spoil(ref, lambda d: d["entries"][entry]["band"].update({"ndcg@20": 0.06, "mrr@20": 0.04}))
    # bands as a measurement would derive them: spread x factor (a band set by hand alone is refused)
    _spoil(ref, lambda d: d["entries"][entry]["derivation"]["spread"].update(
        {"ndcg@20": 0.06 / bands.FACTOR, "mrr@20": 0.04 / bands.FACTOR}))
    report = gate.check(ref, encoders=["nodefreq"], datasets=["toy"])
    assert [(c.metric, c.tolerance) for c in report.dropped] == [("mrr@20", 0.04)]
    assert gate.check(ref, tolerance=0.06, encoders=["nodefreq"], datasets=["toy"]).passed()  # one band for all
    with pytest.raises(gate.GateError, match="finite number >= 0"):
        gate.check(ref, tolerance=float("nan"), encoders=["nodefreq"], datasets=["toy"])


def test_strict_fails_on_a_metric_the_run_does_not_produce(plugins, tmp_path, capsys):
    ref = _toy_reference(tmp_path)
    _spoil(ref, lambda d: (d["entries"]["toy/nodefreq/none"]["metrics"].update({"mrr@7": 0.5}),
                           d["entries"]["toy/nodefreq/none"]["band"].update({"mrr@7": bands.FLOOR}),
                           d["entries"]["toy/nodefreq/none"]["derivation"]["spread"].update({"mrr@7": 0.0})))
    args = ["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy"]
    capsys.readouterr()
    assert _cli(args) == 0
    assert "mrr@7 is in the reference but this run has no such metric" in capsys.readouterr().out
    assert _cli([*args, "--strict"]) == 1


def test_bands_are_the_stated_factor_times_the_measured_spread():
    env = bands.Environment("2.13.0", "cpu", "AVX2", 2, "cpu A")
    other = {"torch": "2.15.0", "build": "cuda", "isa": "DEFAULT", "threads": 2, "cpu": "cpu A"}
    entries = {"d/t/none": {"metrics": {"a": 0.5, "b": 0.3}}, "d/f/none": {"metrics": {"a": 0.7, "b": 0.2}}}
    meas = {"environment": other, "entries": {"d/t/none": {"metrics": {"a": 0.5004, "b": 0.3}},
                                              "d/f/none": {"metrics": {"a": 0.7, "b": 0.2}}}}
    out, envs = bands.derive(entries, env, [meas], {"d/t/none": True, "d/f/none": False})
    t, f = out["d/t/none"], out["d/f/none"]
    assert t["band"]["a"] == pytest.approx(bands.FACTOR * 4e-4) and t["band"]["b"] == bands.FLOOR
    assert f["band"] == {"a": 0.0, "b": 0.0}  # training-free and identical everywhere: exact
    assert t["derivation"]["environments"] == [env.name, envs[1]["name"]] and t["metrics"] == entries["d/t/none"]["metrics"]
    # an update measured in one environment keeps the spread the old reference measured elsewhere, named
    previous = {"entries": out}
    again, _ = bands.derive({"d/t/none": {"metrics": {"a": 0.51, "b": 0.3}}}, env, [], {"d/t/none": True}, previous)
    carried = again["d/t/none"]["derivation"]["carried"]
    assert carried["environments"] == [envs[1]["name"]]
    assert again["d/t/none"]["band"]["a"] == pytest.approx(bands.FACTOR * 4e-4)


def test_a_recorded_measurement_widens_the_bands_and_an_unmeasured_environment_warns(plugins, tmp_path, capsys):
    rec, ref = tmp_path / "other.json", tmp_path / "reference.json"
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy", "--record", str(rec),
                 "--no-compare"]) == 0
    assert not ref.exists()
    _spoil(rec, lambda d: (d["environment"].update(isa="DEFAULT", torch="9.9.0"),
                           d["entries"]["toy/nodefreq/none"]["metrics"].update(
                               {"ndcg@20": d["entries"]["toy/nodefreq/none"]["metrics"]["ndcg@20"] - 0.001})))
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy", "--update", "--no-measure",
                 "--spread", str(rec)]) == 0
    data = json.loads(ref.read_text())
    entry = data["entries"]["toy/nodefreq/none"]
    assert entry["band"]["ndcg@20"] == pytest.approx(bands.FACTOR * 0.001) and entry["band"]["mrr@20"] == bands.FLOOR
    assert len(data["bands"]["environments"]) == 2
    capsys.readouterr()
    # a reference measured only in environments of another kind: still judged, with a warning
    _spoil(ref, lambda d: [e.update(torch="1.0.0") for e in d["bands"]["environments"]])
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy"]) == 0
    out = capsys.readouterr().out
    assert "outside those the bands were measured in" in out and "gate passed" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert _cli(["--reference", str(ref), "--encoders", "nodefreq", "--datasets", "toy", "--update", "--spread",
                 str(bad)]) == 2


@pytest.mark.slow
def test_update_measures_the_environments_this_machine_can_simulate(plugins, tmp_path):
    ref = tmp_path / "reference.json"
    assert _cli(["--reference", str(ref), "--encoders", "random", "--datasets", "toy", "--update"]) == 0
    data = json.loads(ref.read_text())
    names = data["entries"]["toy/random/none"]["derivation"]["environments"]
    assert len(names) == 1 + len(bands.local_variants(gate.GATE_THREADS)) >= 2  # every CPU runs `default`
    assert len({n for n in names}) == len(names)  # each a different kernel ISA
    assert set(data["entries"]["toy/random/none"]["band"].values()) == {0.0}  # exact in every one


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


def test_a_dataset_version_registered_beside_the_current_one_is_gated_only_when_named():
    """real-2.1 and real-2.2 record `real`: run by default they would share the reference's `real/...` keys with
    2.3, the current version; real-2.3 is the current version under a second name, gated once, as `real`."""
    from narbench.harness.gate import _current

    assert _current("real") and _current("nas") and not _current("real-2.1") and not _current("real-2.2")
    assert not _current("real-2.3")
