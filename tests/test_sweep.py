"""`narbench sweep`: grid expansion, configuration hashes, skip logic, resume, launchers.

Runs use the test plugin's `toy` dataset (four families of small chains) with the `smoke`
profile; each run is a real `narbench run` child process, so the plugin goes on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from narbench.core import registry
from narbench.cli import main
from narbench.harness.confighash import config_hash, result_hash
from narbench.harness.launchers import Task, execute
from narbench.harness.local_launcher import LocalLauncher
from narbench.eval.result import RunResult
from narbench.harness.runner import ConfigError, RunConfig, run
from narbench.harness.grid import GridError, load_grid, parse_grid
from narbench.harness.slurm_launcher import SlurmOptions, SubmititLauncher
from narbench.harness.sweep import run_sweep
from narbench.harness.sweepplan import expand, planned_fields, scan, weights_of

ROOT = Path(__file__).resolve().parents[1]
QUIET = Console(stderr=True, quiet=True)


@pytest.fixture
def toy_env(plugin, monkeypatch, tmp_path):
    """The plugin registered for this process and for the sweep's child processes."""
    path = os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return tmp_path


def toy_grid(models=("nodefreq+none", "random+none"), seeds=(0, 1), **block) -> dict:
    return {"seeds": list(seeds), "profile": "smoke",
            "block": [{"name": "b", "datasets": ["toy"], "models": list(models), **block}]}


def results_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json"))


# ----------------------------------------------------------------------------------- expansion


def test_grid_expands_to_the_product_and_dedups(toy_env):
    grid = parse_grid({"seeds": [0, 1], "profile": "smoke", "block": [
        {"name": "t1", "datasets": ["toy"], "protocols": ["family", "paper"],
         "models": ["ophist+none", {"model": "gcn+none", "save_embeddings": [0]}]},
        {"name": "t3", "datasets": ["toy"], "models": [{"model": "gcn+none", "save_weights": True}],
         "objectives": ["ce", "ce+cl"]},
    ]})
    plan = expand(grid, out=toy_env / "out", console=QUIET)
    names = [r.name for r in plan.runs]
    # ophist is training-free: one run per seed, not one per protocol; gcn: 2 protocols + objective ce
    assert len(names) == len(set(names)) == 2 + 4 + 2
    assert sum(r.cfg.encoder == "ophist" for r in plan.runs) == 2
    gcn = {(r.cfg.protocol, r.cfg.objective or "ce+cl", r.cfg.seed): r for r in plan.runs if r.cfg.encoder == "gcn"}
    assert set(gcn) == {(p, o, s) for s in (0, 1) for p, o in (("family", "ce+cl"), ("paper", "ce+cl"), ("family", "ce"))}
    # t1's family/ce+cl gcn runs are t3's ce+cl runs: one run, with both blocks' side files
    assert gcn["family", "ce+cl", 0].cfg.save_weights and gcn["family", "ce+cl", 0].cfg.save_embeddings
    assert gcn["family", "ce+cl", 1].cfg.save_weights and not gcn["family", "ce+cl", 1].cfg.save_embeddings
    assert not gcn["paper", "ce+cl", 1].cfg.save_weights
    assert not plan.todo == []  and all(not r.done for r in plan.runs)


def test_init_from_adds_its_source_run(toy_env):
    grid = parse_grid(toy_grid(models=["gcn+none"], seeds=[0], init_from={"dataset": "toy", "model": "gcn+none"}))
    plan = expand(grid, out=toy_env, console=QUIET)
    source, dependent = plan.runs
    assert source.cfg.save_weights and source.cfg.init_from is None and source.source is None
    assert dependent.source == source.hash and dependent.cfg.init_from and dependent.hash != source.hash


@pytest.mark.parametrize("data, message", [
    ({"block": []}, "no [[block]]"),
    ({"block": [{"name": "x", "datasets": ["toy"]}]}, "models is required"),
    ({"block": [{"name": "x", "datasets": ["toy"], "models": ["gcn"], "lr": 3}]}, "unknown key(s) lr"),
    ({"block": [{"name": "x", "datasets": ["toy"], "models": [{"model": "gcn", "lr": 1}]}]}, "unknown key(s) lr"),
    ({"seed": [0], "block": []}, "unknown top-level key(s) seed"),
    ({"block": [{"name": "x", "datasets": [], "models": ["gcn"]}]}, "datasets must be a non-empty list"),
])
def test_bad_grid_is_named(data, message):
    with pytest.raises(GridError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse_grid(data, "g.toml")


def test_unknown_names_fail_before_anything_runs(toy_env):
    with pytest.raises(registry.UnknownNameError, match="unknown encoder 'nope'"):
        expand(parse_grid(toy_grid(models=["nope+none"])), out=toy_env, console=QUIET)
    with pytest.raises(ConfigError, match="no split 'unseen'"):
        expand(parse_grid(toy_grid(splits=["unseen"])), out=toy_env, console=QUIET)
    with pytest.raises(GridError, match="unknown block"):
        expand(parse_grid(toy_grid()), out=toy_env, blocks=["zzz"], console=QUIET)


def test_grid_file_filters_keep_only_what_they_name(toy_env, tmp_path, capsys):
    """--models / --splits / --protocols narrow a grid file like --datasets; a name no block has is an error
    (they were once ignored with a grid file, so two sweeps meant to split a block both ran all of it)."""
    grid = parse_grid(toy_grid(models=["nodefreq+none", "invariant+none",
                                       {"model": "invariant+none", "encoder_params": {"swap": 0.1}}],
                               protocols=["family", "paper"]))
    full = expand(grid, out=toy_env, console=QUIET)
    only = expand(grid, out=toy_env, models=["invariant+none"], console=QUIET)
    # both parameter variants x 2 protocols x 2 seeds
    assert {r.cfg.encoder for r in only.runs} == {"invariant"} and len(only.runs) == 8
    paper = expand(grid, out=toy_env, models=["invariant+none"], protocols=["paper"], console=QUIET)
    assert {(r.cfg.protocol, r.cfg.seed) for r in paper.runs} == {("paper", 0), ("paper", 1)} and len(paper.runs) == 4
    assert {r.hash for r in paper.runs} < {r.hash for r in only.runs} < {r.hash for r in full.runs}
    for kwargs, message in ((dict(models=["invariant"]), "--models: invariant not in"), (dict(splits=["unseen"]), "--splits"),
                            (dict(protocols=["x"]), "--protocols: x"), (dict(datasets=["nas"]), "--datasets: nas")):
        with pytest.raises(GridError, match=message):
            expand(grid, out=toy_env, console=QUIET, **kwargs)
    g = tmp_path / "g.toml"
    g.write_text('seeds = [0]\nprofile = "smoke"\n[[block]]\nname = "b"\ndatasets = ["toy"]\n'
                 'models = ["nodefreq+none", "random+none"]\n')
    out = tmp_path / "o"
    assert main(["sweep", str(g), "--models", "random+none", "--out", str(out), "--dry-run"]) == 0
    assert main(["sweep", str(g), "--objectives", "ce", "--out", str(out), "--dry-run"]) == 2
    assert "--objectives makes a command-line grid" in capsys.readouterr().err


def test_grid_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "g.toml"
    bad.write_text("seeds = [0\n")
    with pytest.raises(GridError, match="g.toml: not valid TOML"):
        load_grid(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_grid(tmp_path / "missing.toml")


# -------------------------------------------------------------------------------- config hash


def test_planned_hash_is_the_hash_of_the_result_it_writes(toy_env):
    cfg = RunConfig(encoder="gcn", dataset="toy", profile="smoke", seed=1, objective="ce", out=str(toy_env / "r"),
                    progress=False, splitter_params={})
    ev = run(cfg)
    stored = json.loads(ev.path.read_text())["config_hash"]
    assert stored == result_hash(RunResult.read(ev.path)) == config_hash(planned_fields(cfg))
    # any field of the configuration changes it; the device and the output folder do not
    assert config_hash(planned_fields(RunConfig(encoder="gcn", dataset="toy", profile="smoke", seed=1))) != stored
    assert config_hash(planned_fields(RunConfig(encoder="gcn", dataset="toy", profile="smoke", seed=1, objective="ce",
                                                device="cpu", out="elsewhere"))) == stored


def test_a_planned_runs_command_line_reproduces_its_configuration(toy_env):
    """Every field the hash covers reaches `narbench run` (the encoder's params were once dropped: an
    ablation ran as the plain encoder and was counted done)."""
    from narbench.cli import build_parser
    from narbench.cli.run import run_config
    from narbench.harness.sweepplan import task_of

    grid = parse_grid({"seeds": [2], "profile": "smoke", "block": [
        {"name": "abl", "datasets": ["toy"], "protocols": ["paper"], "objectives": ["ce"], "models": [
            {"model": "ours+motif", "encoder_params": {"stage1": False, "motif_examples": "occurrences"},
             "save_embeddings": [2]},
            {"model": "gcn+none", "save_weights": True}]}]})
    plan = expand(grid, out=toy_env / "out", console=QUIET)
    assert {tuple(sorted(r.cfg.encoder_params)) for r in plan.runs} == {("motif_examples", "stage1"), ()}
    for planned in plan.runs:
        argv = task_of(planned, toy_env, threads=1).argv
        parsed = run_config(build_parser().parse_args(["run", *argv]))
        assert parsed.encoder_params == planned.cfg.encoder_params
        assert config_hash(planned_fields(parsed)) == planned.hash


def _registered(name: str) -> tuple[str, str]:
    """(the name result files record, the version) of the dataset registered as `name` (`real-2.2`: real 2.2)."""
    from narbench.core import registry

    cls = registry.load("dataset", name)
    return cls.name or name, str(cls.version)


def test_committed_results_are_recognised():
    """Every committed result on a registered dataset version is asked for by the shipped grid at one of
    the leaderboard's profiles (quick, the grid's; paper, run on lent GPUs and CPUs): exactly, or with
    an older recipe of its encoder (ours before its stage-1 fix recorded no encoder parameters), which
    the sweep then runs again; results on an earlier dataset version (real 1.0) are never counted as
    done for the current one."""
    from narbench.core import registry
    from narbench.harness.confighash import result_fields
    from narbench.harness.sweepplan import planned_fields

    current = {_registered(name) for name in registry.names("dataset")}
    plans = [expand(load_grid(ROOT / "leaderboard" / "grid.toml"), out=ROOT / "leaderboard" / "results", profile=p,
                    console=QUIET) for p in ("quick", "paper")]
    plan = plans[0]
    without_params = lambda f: config_hash({**f, "encoder_params": {}})  # noqa: E731
    grid = {without_params(planned_fields(r.cfg)) for pl in plans for r in pl.runs}
    committed = {}
    for h, paths in scan([ROOT / "leaderboard" / "results"]).items():
        r = RunResult.read(paths[0])
        if (r.dataset["name"], str(r.dataset["version"])) in current:
            committed[h] = without_params(result_fields(r))
    assert set(committed.values()) <= grid, "a committed result that the grid does not ask for"
    done = [r for r in plan.runs if r.done]
    assert {r.hash for r in done} <= set(committed) and len(done) >= 40

def test_weights_of_takes_the_latest_result_with_saved_weights(tmp_path):
    paths = [tmp_path / f"run-2026112{i}T000000Z.json" for i in range(3)]
    assert weights_of(paths) is None
    for p in paths[:2]:
        p.with_suffix(".pt").write_bytes(b"w")
    assert weights_of(reversed(paths)) == paths[1]


# ----------------------------------------------------------------------------------- sweeping


@pytest.mark.slow
def test_local_sweep_runs_then_skips_everything(toy_env):
    grid, out = parse_grid(toy_grid()), toy_env / "out"
    plan = expand(grid, out=out, console=QUIET)
    report = run_sweep(plan, LocalLauncher(jobs=2, threads=1), console=QUIET, poll=0.1)
    assert report.ok and len(report.finished) == 4 and not report.skipped
    assert len(results_in(out)) == 4
    again = expand(grid, out=out, console=QUIET)
    assert again.todo == []
    report = run_sweep(again, LocalLauncher(jobs=2), console=QUIET)
    assert len(report.skipped) == 4 and not report.finished and len(results_in(out)) == 4


@pytest.mark.slow
def test_a_failed_run_is_reported_with_its_log_and_the_others_go_on(toy_env):
    from dataclasses import replace

    plan = expand(parse_grid(toy_grid(seeds=[0])), out=toy_env / "out", console=QUIET)
    plan.runs[0].cfg = replace(plan.runs[0].cfg, device="cuda:7")  # fails at run time on this machine
    report = run_sweep(plan, LocalLauncher(jobs=1), console=QUIET, poll=0.1)
    assert not report.ok and len(report.failed) == 1 and len(report.finished) == 1
    failed = report.failed[0]
    assert failed.name == plan.runs[0].name and Path(failed.log).is_file()
    assert "cuda" in Path(failed.log).read_text().lower() and failed.error


@pytest.mark.slow
def test_a_blocked_dependent_is_reported(toy_env):
    grid = parse_grid(toy_grid(models=["nodefreq+none"], seeds=[0], init_from={"dataset": "toy", "model": "gcn+none"}))
    plan = expand(grid, out=toy_env / "out", console=QUIET)
    from dataclasses import replace

    plan.runs[0].cfg = replace(plan.runs[0].cfg, device="cuda:7")  # the source fails
    report = run_sweep(plan, LocalLauncher(jobs=1), console=QUIET, poll=0.1)
    assert len(report.failed) == 1 and len(report.blocked) == 1 and "failed" in report.blocked[0][1]


@pytest.mark.slow
def test_dependent_starts_from_its_source_weights(toy_env):
    grid = parse_grid(toy_grid(models=["gcn+none"], seeds=[0], init_from={"dataset": "toy", "model": "gcn+none"}))
    out = toy_env / "out"
    report = run_sweep(expand(grid, out=out, console=QUIET), LocalLauncher(jobs=2), console=QUIET, poll=0.1)
    assert report.ok and len(report.finished) == 2
    results = [RunResult.read(p) for p in results_in(out)]
    pretrained = [r for r in results if r.config["run"]["init_from"]]
    assert len(pretrained) == 1 and pretrained[0].config["run"]["init_from"].endswith(".json")
    assert list(out.glob("*.pt")), "the source saved its weights"


@pytest.mark.slow
def test_sweep_killed_half_way_resumes_with_only_what_is_missing(toy_env):
    """SIGTERM to `narbench sweep` mid-grid; the re-run does only the missing runs; one result per run."""
    grid = toy_env / "grid.toml"
    grid.write_text('seeds = [0, 1]\nprofile = "smoke"\n[[block]]\nname = "b"\ndatasets = ["toy"]\n'
                    'models = ["nodefreq+none", "random+none"]\n')
    out = toy_env / "out"
    cmd = [sys.executable, "-m", "narbench.cli", "sweep", str(grid), "--out", str(out), "--jobs", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while len(results_in(out)) < 1 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    first = results_in(out)
    assert 1 <= len(first) < 4 and "run the same command again to resume" in " ".join(err.split())
    assert not list((out / ".sweep" / "logs").glob("*.tmp"))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"{4 - len(first)} runs finished, {len(first)} skipped" in " ".join(done.stdout.split())
    hashes = [result_hash(RunResult.read(p)) for p in results_in(out)]
    assert len(hashes) == len(set(hashes)) == 4 and set(first) <= set(results_in(out))


@pytest.mark.slow
def test_submitit_local_executor_path(toy_env):
    """The slurm launcher's path (array job through submitit), on submitit's local executor."""
    grid, out = parse_grid(toy_grid(seeds=[0])), toy_env / "out"
    launcher = SubmititLauncher(out / ".sweep" / "submitit", SlurmOptions(cpus=1, per_job=2, time_min=10),
                                cluster="local")
    report = run_sweep(expand(grid, out=out, console=QUIET), launcher, console=QUIET, poll=0.2)
    assert report.ok and len(report.finished) == 2 and len(results_in(out)) == 2
    assert len(launcher.jobs) == 1, "two runs per job: one job"
    assert expand(grid, out=out, console=QUIET).todo == []


def test_sweep_cli_dry_run_and_command_line_grid(toy_env, capsys):
    out = toy_env / "out"
    assert main(["sweep", "--models", "nodefreq+none", "gcn+none", "--datasets", "toy", "--profile", "smoke",
                 "--seeds", "0", "1", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "4 runs: 0 done, 4 to run" in text and "toy-standard-gcn+none-family-ce+cl-scratch-s1" in text
    assert not out.exists() or not results_in(out)
    assert main(["sweep", "--profile", "smoke", "--out", str(out)]) == 2
    assert "give a grid file" in capsys.readouterr().err


# --------------------------------------------------------------------------------- runs, --json


def test_run_json_and_runs_listing(toy_env, capsys):
    out = toy_env / "runs"
    assert main(["run", "--encoder", "nodefreq", "--dataset", "toy", "--profile", "smoke", "--no-progress",
                 "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["encoder"] == "nodefreq" and Path(data["path"]).is_file() and data["config_hash"]
    (out / "junk.json").write_text("{}")
    assert main(["runs", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert len(rows) == 1 and rows[0]["config_hash"] == data["config_hash"] and rows[0]["protocol"] == "family"
    assert rows[0]["metrics"] == data["metrics"] and "junk.json" in captured.err
    assert main(["runs", str(out)]) == 0
    table = capsys.readouterr().out
    assert "nodefreq+none" in table and data["config_hash"] in table


def test_execute_reports_a_crash(tmp_path):
    task = Task("bad", ("--encoder", "nope", "--dataset", "toy"), str(tmp_path / "bad.log"))
    out = execute(task)
    assert not out.ok and out.returncode == 2 and "unknown encoder" in Path(out.log).read_text()


@pytest.mark.slow
def test_ray_launcher(toy_env):
    """The ray launcher on a Ray started on this machine (skipped where Ray is not installed)."""
    ray = pytest.importorskip("ray")
    from narbench.harness.ray_launcher import RayLauncher

    grid, out = parse_grid(toy_grid(seeds=[0])), toy_env / "out"
    try:
        report = run_sweep(expand(grid, out=out, console=QUIET), RayLauncher(threads=1), console=QUIET, poll=0.2)
    finally:
        ray.shutdown()
    assert report.ok and len(report.finished) == 2 and len(results_in(out)) == 2


# ------------------------------------------------------------------------- concurrent sweeps: claims


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _claim_file(path: Path, pids: list[int], host: str | None = None, age: float = 0.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pids": pids, "host": host or socket.gethostname(), "since": time.time() - age,
                                "token": "other"}))
    if age:
        os.utime(path, (time.time() - age, time.time() - age))


def test_a_claim_is_held_by_one_process_and_released(tmp_path):
    from narbench.harness.claims import Claim, claim_holder

    path = tmp_path / "claims" / "abc"
    claim = Claim.take(path)
    assert isinstance(claim, Claim) and json.loads(path.read_text())["pids"] == [os.getpid()]
    held = Claim.take(path)  # this process is alive: a second taker is told who holds it
    assert held == claim_holder(path) and held.startswith(f"pid {os.getpid()} on {socket.gethostname()} since ")
    result = tmp_path / "run.json"
    result.write_text("{}")
    claim.release(str(result))  # with a result: it is left for the sweeps after
    assert not path.exists() and claim_holder(path) is None
    again = Claim.take(path)
    assert isinstance(again, Claim) and again.done_result() == str(result.resolve())
    again.release()
    assert not path.exists()


@pytest.mark.parametrize("host, age, stale", [
    (None, 0.0, True),  # this host, its process gone
    ("another-host", 0.0, False),  # another host's, touched lately: its process may live
    ("another-host", 3600.0, True),  # another host's, not touched for an hour
])
def test_a_stale_claim_is_taken_over(tmp_path, host, age, stale):
    from narbench.harness.claims import Claim

    path = tmp_path / "claims" / "abc"
    _claim_file(path, [_dead_pid()], host, age)
    taken = Claim.take(path)
    assert isinstance(taken, Claim) is stale
    if stale:
        assert json.loads(path.read_text())["pids"] == [os.getpid()]
        taken.release()
    else:
        assert "another-host" in taken and json.loads(path.read_text())["token"] == "other"


def test_execute_leaves_a_claimed_run_and_its_log_alone(tmp_path):
    claim, log = tmp_path / "claims" / "abc", tmp_path / "run.log"
    log.write_text("the other sweep's log\n")
    _claim_file(claim, [os.getpid()])
    task = Task("r", ("--encoder", "nope", "--dataset", "toy"), str(log), claim=str(claim))
    out = execute(task)
    assert out.elsewhere == "running" and not out.ok and f"pid {os.getpid()}" in out.error
    assert log.read_text() == "the other sweep's log\n" and json.loads(claim.read_text())["token"] == "other"
    claim.unlink()  # the other sweep finished the run: its result is found, the run not repeated
    result = tmp_path / "r.json"
    result.write_text("{}")
    Path(f"{claim}.done").write_text(json.dumps({"result": str(result)}))
    out = execute(task)
    assert out.elsewhere == "done" and out.ok and out.result == str(result) and not claim.exists()
    assert log.read_text() == "the other sweep's log\n"


def test_a_sweep_skips_runs_claimed_elsewhere(toy_env, capsys):
    from narbench.harness.sweep import render_report
    from narbench.harness.sweepplan import WORK_DIR, claim_path

    out = toy_env / "out"
    plan = expand(parse_grid(toy_grid(models=["ophist+none"], seeds=[0, 1])), out=out, console=QUIET)
    for r in plan.runs:  # another sweep (a live process: this one) runs them
        _claim_file(claim_path(out / WORK_DIR, r), [os.getpid()])
    assert main(["sweep", "--models", "ophist+none", "--datasets", "toy", "--profile", "smoke", "--seeds", "0", "1",
                 "--out", str(out), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("running elsewhere (pid") == 2
    report = run_sweep(plan, LocalLauncher(jobs=2), console=QUIET, poll=0.05)
    assert report.ok and len(report.elsewhere) == 2 and not report.finished and not report.failed
    assert not results_in(out) and not (out / WORK_DIR / "logs").exists()
    render_report(report, Console(width=200))
    text = capsys.readouterr().out
    assert "0 runs finished, 0 skipped (done already), 0 failed, 0 blocked, 2 running elsewhere" in text
    assert text.count("running elsewhere toy-standard-ophist+none") == 2


@pytest.mark.slow
def test_two_sweeps_started_together_share_the_runs(toy_env):
    """Two `narbench sweep` on one --out at once: every run is done exactly once, and both exit 0."""
    out = toy_env / "out"
    cmd = [sys.executable, "-m", "narbench.cli", "sweep", "--models", "ophist+none", "wl+none", "--datasets", "toy",
           "--profile", "smoke", "--seeds", "0", "1", "--out", str(out), "--jobs", "1"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in done]
    hashes = [result_hash(RunResult.read(p)) for p in results_in(out)]
    assert len(hashes) == len(set(hashes)) == 4, results_in(out)
    ran = [int(re.search(r"sweep: (\d+) runs finished", " ".join(o.split())).group(1)) for o, _ in done]
    assert sum(ran) == 4, [o for o, _ in done]
    assert not [p for p in (out / ".sweep" / "claims").iterdir() if not p.name.endswith(".done") and p.name != ".lock"]


def test_a_parameter_an_encoder_gains_keeps_the_committed_runs_done():
    """The sweep plans a run's encoder parameters as the encoder's `PARAMS` under the grid's (`planned_fields`); a
    committed result records the parameters of its day. A parameter added since, at its default, must leave the hash
    alone (`confighash.ADDED_PARAMS`), or a sweep re-runs every committed run of that encoder: graf-lda's `spellings`
    did, unnoticed, from session 83 to 87. Files whose own recorded configuration no longer gives their stored hash
    (an old default that changed the numbers, `narbench.eval.olddefaults`) are meant to run again and are skipped."""
    from narbench.harness.confighash import result_fields

    results = Path(__file__).resolve().parents[1] / "leaderboard" / "results"
    checked, stale = 0, []
    for path in sorted(results.glob("*.json")):
        stored = json.loads(path.read_text()).get("config_hash")
        result = RunResult.read(path)
        if stored is None or result_hash(result) != stored:
            continue
        fields = result_fields(result)
        params = getattr(registry.load("encoder", result.encoder), "PARAMS", None)
        planned = {**fields, "encoder_params": {**params, **fields["encoder_params"]} if params else {}}
        checked += 1
        if config_hash(planned) != stored:
            stale.append(f"{path.name}: {sorted(set(params or {}) - set(fields['encoder_params']))}")
    assert checked > 100, checked
    assert not stale, "parameters missing from confighash.ADDED_PARAMS:\n" + "\n".join(stale[:10])
