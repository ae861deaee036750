"""Issue 40: bad input that gave a traceback, a lost run or a silent wrong result.

Each probe of the review, on a fresh clone: refused with exit 2 and one line on stderr naming the
problem, before any work and with nothing written; or, where the input is fine (an encoder without
a docstring, an empty NARBENCH_CACHE, a stdout that is not UTF-8), handled without an error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from narbench.cli import main
from tests.handmade import write_result
from tests.test_cli_first_hour import _one_line, _status

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = ROOT / "tests" / "plugin"


@pytest.fixture
def cwd(monkeypatch, tmp_path) -> Path:
    """An empty current folder (with its own cache, under tmp_path); the test checks nothing lands in it."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")
    return folder


def _grid(tmp_path: Path, seeds: str, block_seeds: str | None = None) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(f'seeds = {seeds}\nprofile = "smoke"\n\n[[block]]\nname = "b"\ndatasets = ["nas"]\n'
                    f'models = ["random+none"]\n' + (f"seeds = {block_seeds}\n" if block_seeds else ""))
    return path


# ------------------------------------------------------------------------------------ 1. sweep


@pytest.mark.parametrize("seeds, block_seeds, expected", [
    ('["0", "one"]', None, "grid.toml: seeds must be integers from 0 to 4294967295 (unquoted in TOML), got '0'"),
    ("[0, -1]", None, "grid.toml: seeds must be integers from 0 to 4294967295 (unquoted in TOML), got -1"),
    ("[1e14]", None, "grid.toml: seeds must be integers from 0 to 4294967295 (unquoted in TOML), got 100000000000000.0"),
    ("[4294967296]", None, "seeds must be integers from 0 to 4294967295 (unquoted in TOML), got 4294967296"),
    ("[0]", "[-1]", "grid.toml: block 'b': seeds must be integers from 0 to 4294967295"),
])
def test_sweep_grid_with_bad_seeds(seeds, block_seeds, expected, tmp_path, cwd, capsys):
    grid = _grid(tmp_path, seeds, block_seeds)
    assert _status(["sweep", str(grid), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err, expected)
    assert line.startswith("error: ") and captured.out == ""
    assert not (tmp_path / "out").exists() and list(cwd.iterdir()) == []


@pytest.mark.parametrize("option, expected", [
    (["--seeds", "-1"], "argument --seeds: expected an integer from 0 to 4294967295, got '-1'"),
    (["--seeds", "0", "1e14"], "argument --seeds: expected an integer from 0 to 4294967295, got '1e14'"),
    (["--seeds", "4294967296"], "argument --seeds: expected an integer from 0 to 4294967295, got '4294967296'"),
    (["--jobs", "0"], "argument --jobs: expected a positive integer, got '0'"),
    (["--jobs", "-2"], "argument --jobs: expected a positive integer, got '-2'"),
    (["--threads", "0"], "argument --threads: expected a positive integer, got '0'"),
])
def test_sweep_bad_seeds_and_jobs_options(option, expected, tmp_path, cwd, capsys):
    grid = _grid(tmp_path, "[0]")
    for argv in (["sweep", str(grid)], ["sweep", "--models", "random+none", "--datasets", "nas"]):
        assert _status([*argv, "--out", str(tmp_path / "out"), *option]) == 2
        captured = capsys.readouterr()
        assert _one_line(captured.err, expected).startswith("narbench sweep: error: ") and captured.out == ""
        assert not (tmp_path / "out").exists() and list(cwd.iterdir()) == []


def test_sweep_grid_file_that_is_a_folder(tmp_path, cwd, capsys):
    folder = tmp_path / "grids"
    folder.mkdir()
    assert _status(["sweep", str(folder), "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys.readouterr().err, f"error: grid file {folder} is a folder, not a TOML file")
    assert list(folder.iterdir()) == [] and not (tmp_path / "out").exists() and list(cwd.iterdir()) == []


def test_sweep_api_refuses_bad_seeds_too(tmp_path):
    from narbench.harness.grid import GridError, parse_grid
    from narbench.harness.sweepplan import expand

    grid = parse_grid({"block": [{"name": "b", "datasets": ["nas"], "models": ["random+none"]}]})
    with pytest.raises(GridError, match="--seeds: seeds must be integers from 0 to 4294967295"):
        expand(grid, out=tmp_path / "out", seeds=[-1])
    with pytest.raises(GridError, match="save_embeddings must be integers from 0"):
        parse_grid({"block": [{"name": "b", "datasets": ["nas"], "models": [
            {"model": "gcn+none", "save_embeddings": ["one"]}]}]})
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------- 2. runs


@pytest.mark.parametrize("argv", [["runs", "{missing}"], ["runs", "{missing}", "--json"], ["runs"]])
def test_runs_on_a_folder_that_does_not_exist(argv, tmp_path, cwd, capsys):
    missing = tmp_path / "no" / "such" / "dir"
    argv = [a.format(missing=missing) for a in argv]
    folder = missing if len(argv) > 1 else "runs"  # no DIR: the default, runs/, here absent
    assert _status(argv) == 2
    captured = capsys.readouterr()
    assert _one_line(captured.err, f"error: results folder {folder} does not exist") and captured.out == ""
    assert list(cwd.iterdir()) == []


# -------------------------------------------------------------------------------- 3. encoders


def test_a_plugin_encoder_without_a_docstring_is_listed(tmp_path, cwd, monkeypatch, capsys):
    plugin = tmp_path / "nodoc"
    (plugin / "narbench_nodoc-0.1.dist-info").mkdir(parents=True)
    (plugin / "narbench_nodoc-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: narbench-nodoc\n"
                                                                       "Version: 0.1\n")
    (plugin / "narbench_nodoc-0.1.dist-info" / "entry_points.txt").write_text(
        "[narbench.encoders]\nnodoc = narbench_nodoc:NoDocEncoder\n")
    (plugin / "narbench_nodoc.py").write_text(
        "from narbench.train.encoder import Encoder\n\n\nclass NoDocEncoder(Encoder):\n    name = 'nodoc'\n")
    monkeypatch.syspath_prepend(str(plugin))
    from narbench.core import registry

    assert registry.load("encoder", "nodoc").__doc__ is None
    assert _status(["encoders"]) == 0
    captured = capsys.readouterr()
    row = next(ln for ln in captured.out.splitlines() if " nodoc " in ln)
    assert "narbench-nodoc" in row and "(no description)" in row and "fails to load" not in captured.out
    assert captured.err == "" and list(cwd.iterdir()) == []


# -------------------------------------------------------------------------- 4. NARBENCH_CACHE=


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NARBENCH_CACHE", "MPLCONFIGDIR", "COLUMNS")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**env, "HOME": str(home), "NARBENCH_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1", **extra}


def test_empty_narbench_cache_is_the_default_cache(tmp_path, cwd):
    """`NARBENCH_CACHE=` (set, empty): the dataset goes to ~/.cache/narbench, not into the current folder."""
    env = _env(tmp_path, NARBENCH_CACHE="", PYTHONPATH=os.pathsep.join([str(PLUGIN_DIR), str(ROOT)]))
    done = subprocess.run([sys.executable, "-m", "narbench", "datasheet", "toy"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert list(cwd.iterdir()) == []
    assert list((tmp_path / "home" / ".cache" / "narbench").glob("toy-0*"))


def test_empty_narbench_cache_and_mplconfigdir_inside_a_command(tmp_path, monkeypatch):
    from narbench import process
    from narbench.core.cache import cache_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NARBENCH_CACHE", "")
    monkeypatch.setenv("MPLCONFIGDIR", "")
    default = tmp_path / ".cache" / "narbench"
    assert cache_dir() == default
    with process.scope():
        assert os.environ["MPLCONFIGDIR"] == str(default / "matplotlib")
    assert os.environ["MPLCONFIGDIR"] == ""  # restored as it was


# ------------------------------------------------------------------- 5. stdout that is not UTF-8


def test_search_on_an_ascii_stdout_degrades(tmp_path, cwd):
    env = _env(tmp_path, NARBENCH_CACHE=str(tmp_path / "cache"), PYTHONIOENCODING="ascii")
    done = subprocess.run([sys.executable, "-m", "narbench", "search", f"{ROOT / 'tests' / 'search_models.py'}:TinyCNN",
                           "-k", "3"], cwd=cwd, env=env, capture_output=True, timeout=120)
    err = done.stderr.decode("ascii")
    assert done.returncode == 0 and "Traceback" not in err and "UnicodeEncodeError" not in err, err
    out = done.stdout.decode("ascii")  # nothing but ASCII came out
    assert "top 3 in " in out and "? exact" in out  # the "·" replaced
    assert list(cwd.iterdir()) == []


def test_an_error_line_on_an_ascii_stderr(tmp_path, cwd):
    """An error naming a non-ASCII path: one line, the character escaped (stderr's own backslashreplace), exit 2."""
    env = _env(tmp_path, PYTHONIOENCODING="ascii")
    done = subprocess.run([sys.executable, "-m", "narbench", "runs", "résultats"], cwd=cwd, env=env,
                          capture_output=True, timeout=60)
    assert done.returncode == 2
    _one_line(done.stderr.decode("ascii"), r"error: results folder r\xe9sultats does not exist")


# ------------------------------------------------------------------------ 6. result files


def _hand_made(folder: Path, edit) -> Path:
    path = write_result(folder, "gcn", "none", 0, np.linspace(0.2, 0.9, 10))
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d.__setitem__("new_field", 1),
     "field 'new_field' is unknown to this narbench's result schema (schema version 2)"),
    (lambda d: d.update(new_field=1, schema=3),
     "field 'new_field' is unknown to this narbench's result schema (schema version 2); the file says schema 3"),
    (lambda d: d["metrics"].__setitem__("recall@7", 0.5),
     "metrics has unknown metric recall@7; the metrics narbench knows: mrr@20, mrr@50, "),
    (lambda d: d["metrics_extra"].__setitem__("recall@7", 0.5),
     "metrics_extra has unknown metric recall@7; the metrics narbench knows: "),
])
def test_leaderboard_names_an_unknown_field_or_metric_and_the_file(edit, expected, tmp_path, cwd, capsys):
    path = _hand_made(tmp_path / "results", edit)
    out = tmp_path / "lb"
    assert _status(["leaderboard", "--results", str(path.parent), "--out", str(out), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "unexpected keyword" not in err, err
    # the leaderboard's rejection names each rejected file on a line of its own, under one heading line
    lines = [ln for ln in err.splitlines() if expected in ln]
    assert len(lines) == 1 and str(path) in lines[0], err
    assert not out.exists() or list(out.iterdir()) == []
    assert list(cwd.iterdir()) == []


def test_runresult_read_and_runs_name_an_unknown_field(tmp_path, capsys):
    from narbench.eval.result import RunResult

    path = _hand_made(tmp_path, lambda d: d.__setitem__("new_field", 1))
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: field 'new_field' is unknown to this narbench's result schema"):
        RunResult.read(path)
    missing = _hand_made(tmp_path / "m", lambda d: d.pop("metrics"))
    with pytest.raises(ValueError, match="not a valid narbench result file \\(missing field metrics\\)"):
        RunResult.read(missing)
    assert main(["runs", str(tmp_path), "--json"]) == 0  # a listing: the file is skipped and named
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "field 'new_field' is unknown" in captured.err


def test_every_field_of_a_result_still_reads(tmp_path):
    """Known fields all round-trip, the new optional `subsets` included, and files without the optional ones."""
    from dataclasses import fields

    from narbench.eval.result import RunResult

    path = write_result(tmp_path, "gcn", "none", 0, np.linspace(0.2, 0.9, 10), subsets={"a": [0, 1, 2]})
    data = json.loads(path.read_text())
    assert set(data) == {f.name for f in fields(RunResult)} and data["subsets"]
    assert RunResult.read(path).subsets == data["subsets"]
    for optional in ("subsets", "config_hash", "split", "protocol", "environment", "git_commit", "created"):
        data.pop(optional)
    path.write_text(json.dumps(data))
    assert RunResult.read(path).subsets == {}


# ============================================================================================
# Issue 40, second round: nothing left in the temp dir after any exit (SIGKILL included), and a
# full disk (ENOSPC) refused in one line, exit 2, with nothing half written. ENOSPC is simulated
# by an `os.fsync` that fails for the files a test names (a full disk shows at write or at fsync).
# ============================================================================================

import errno  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _folders(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


# ------------------------------------------------------------------------- 7. temp folders


def test_temp_folders_of_dead_commands_are_removed_at_start(tmp_path, cwd, monkeypatch, capsys):
    from narbench import process

    root = tmp_path / "tmp"
    tag, dead = process.host_tag(), _dead_pid()
    for name in (f"narbench-{dead}-{tag}-a1b2c3d4", f"narbench-{os.getpid()}-{tag}-livelive",
                 f"narbench-{dead}-00000000-otherhst", f"narbench-{dead}-notmine", "narbench-x1y2z3"):
        (root / name).mkdir(parents=True)
        (root / name / "left.py").write_text("")
    (root / f"narbench-{dead}-{tag}-afile").write_text("a file, not a folder of ours")
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    results = tmp_path / "results"
    results.mkdir()
    assert main(["runs", str(results)]) == 0  # any command: it cleans up, then works in a folder of its own
    capsys.readouterr()
    # gone: the dead command's folder of this host; kept: a live one's, another host's, other names, a file
    assert _folders(root) == sorted([f"narbench-{os.getpid()}-{tag}-livelive", f"narbench-{dead}-00000000-otherhst",
                                     f"narbench-{dead}-notmine", "narbench-x1y2z3", f"narbench-{dead}-{tag}-afile"])
    assert list(cwd.iterdir()) == []


def test_the_folder_of_a_sigkilled_command_goes_with_the_next_one(tmp_path):
    from narbench import process

    root = tmp_path / "tmp"
    root.mkdir()
    code = ("import time\nfrom narbench import process\nwith process.scope() as tmp:\n"
            "    (tmp / 'work.py').write_text('')\n    print(tmp, flush=True)\n    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "TMPDIR": str(root)})
    folder = Path(proc.stdout.readline().strip())
    assert folder.parent == root and folder.name.startswith(f"narbench-{proc.pid}-{process.host_tag()}-")
    assert process.remove_stale(root) == [] and folder.is_dir()  # alive: kept
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert folder.is_dir()  # SIGKILL: no chance to clean up
    assert process.remove_stale(root) == [folder] and list(root.iterdir()) == []


# ----------------------------------------------------------------------------- 8. full disk


@pytest.fixture
def full_disk(monkeypatch):
    """`full_disk(predicate)`: from then on, fsync of a file whose path satisfies it fails with ENOSPC."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to name an fd's file")
    real_fsync = os.fsync

    def arm(predicate):
        def fsync(fd):
            path = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else ""
            if predicate(path):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    return arm


def _every_file(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} \
        if folder.exists() else {}


def _error_line(err: str, expected: str) -> str:
    """The one line of stderr besides the leaderboard's progress lines."""
    return _one_line("\n".join(ln for ln in err.splitlines() if not ln.startswith("leaderboard ")), expected)


def _results(folder: Path, encoders=("gcn", "gat")) -> Path:
    for encoder in encoders:
        for seed in (0, 1):
            write_result(folder, encoder, "none", seed, np.linspace(0.2, 0.9, 10) - 0.01 * seed)
    return folder


@pytest.mark.parametrize("failing", ["aggregate.csv", "aggregate.json", "README.md"])
def test_leaderboard_on_a_full_disk_writes_nothing(failing, tmp_path, cwd, full_disk, capsys):
    results, out = _results(tmp_path / "results"), tmp_path / "lb"
    argv = ["leaderboard", "--results", str(results), "--out", str(out), "--no-plots"]
    full_disk(lambda path: f"/.{failing}." in path)
    assert _status(argv) == 2
    err = capsys.readouterr().err
    line = _error_line(err, f"cannot write {out / failing}: no space left on device (ENOSPC); nothing of the "
                            "leaderboard was written")
    assert line.startswith("error: ") and "Traceback" not in err
    assert not out.exists() and list(cwd.iterdir()) == []


def test_a_leaderboard_on_a_full_disk_keeps_the_previous_one_whole(tmp_path, cwd, full_disk, capsys):
    """The probe of the review: aggregate.csv rewritten, README.md and aggregate.json not (now: none of them)."""
    results, out = _results(tmp_path / "results"), tmp_path / "lb"
    argv = ["leaderboard", "--results", str(results), "--out", str(out), "--no-plots"]
    assert _status(argv) == 0
    before = _every_file(out)
    assert {"aggregate.csv", "aggregate.json", "README.md"} <= set(before)
    _results(results, encoders=("gin",))  # new results: every file would change
    full_disk(lambda path: "/.README.md." in path)
    capsys.readouterr()
    assert _status(argv) == 2
    _error_line(capsys.readouterr().err, f"cannot write {out / 'README.md'}: no space left on device (ENOSPC)")
    assert _every_file(out) == before  # no file changed, no temp file left
    full_disk(lambda path: False)
    assert _status(argv) == 0 and _every_file(out) != before


@pytest.mark.parametrize("argv", [["datasheet", "toy"],
                                  ["run", "--encoder", "ophist", "--dataset", "toy", "--profile", "smoke",
                                   "--no-progress", "--out", "{out}"]])
def test_dataset_cache_on_a_full_disk(argv, plugin, tmp_path, cwd, full_disk, capsys):
    from narbench.core.cache import cache_dir

    out = tmp_path / "runs"
    full_disk(lambda path: path.startswith(str(cache_dir())))
    assert _status([a.format(out=out) for a in argv]) == 2
    err = capsys.readouterr().err
    _one_line(err, f"error: cannot write {cache_dir() / 'toy-0.narg'}: no space left on device (ENOSPC); "
                   "nothing was written")
    assert not [p for p in cache_dir().rglob("*") if p.is_file()]  # no partial dataset, no temp file
    assert not out.exists() and list(cwd.iterdir()) == []


def test_write_errors_say_the_file_and_the_errno():
    from narbench.core.cache import DiskFullError, WriteError, writing

    with pytest.raises(DiskFullError) as caught:
        with writing("/some/file"):
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
    assert str(caught.value) == "cannot write /some/file: disk quota exceeded (EDQUOT); nothing was written"
    with pytest.raises(PermissionError):  # not a lack of space: as it was
        with writing("/some/file"):
            raise PermissionError(errno.EACCES, "Permission denied")
    error = WriteError("/x", PermissionError(errno.EACCES, "Permission denied"), "nothing of it was written")
    assert str(error) == "cannot write /x: permission denied (EACCES); nothing of it was written"


def test_parts_cache_on_a_full_disk_warns_and_the_split_goes_on(tmp_path, toy_dataset, monkeypatch):
    """The parts cache (sqlite) is a cache: a full disk (SQLITE_FULL) is said once, naming the file, and the
    parts are computed all the same; nothing of the failed transaction is kept."""
    import sqlite3

    from narbench.splitters.uniform import NodeNumberSplitter
    from narbench.train.partcache import PartsCache, split_graphs

    def full(self, splitter, rows):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(PartsCache, "_put_many", full)
    path, graphs = tmp_path / "parts.sqlite", toy_dataset.graphs[:5]
    with pytest.warns(RuntimeWarning, match=f"parts cache {path}: cannot write \\(database or disk is full\\)"):
        parts = split_graphs(NodeNumberSplitter(), graphs, jobs=1, cache=PartsCache(path))
    assert len(parts) == len(graphs)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM parts").fetchone() == (0,)


# ============================================================================================
# Issue 57: the bad inputs of the review that still ended in a traceback. Each is one line on
# stderr naming the problem, exit 2, and nothing written where it should not be.
# ============================================================================================

INDEX = ["index", "build", "--dataset", "toy", "--encoder", "wl", "--no-progress"]


def _index_error(capsys, expected: str) -> str:
    line = _one_line(capsys.readouterr().err, expected)
    assert line.startswith(("narbench index build: error: ", "error: ")), line
    return line


# ------------------------------------------------------------------------- 8. index build --out


def test_index_build_out_a_folder_a_missing_folder_a_file_in_the_way(plugin, tmp_path, cwd, capsys):
    (tmp_path / "a.txt").write_text("keep me")
    cases = [(tmp_path, f"index file {tmp_path} is a folder; give the name of a file to write"),
             (tmp_path / "no" / "such" / "x.nari", f"folder {tmp_path / 'no' / 'such'} does not exist (create it first)"),
             (tmp_path / "a.txt" / "x.nari", f"folder {tmp_path / 'a.txt'} is a file, not a folder")]
    for out, expected in cases:
        assert _status([*INDEX, "--out", str(out)]) == 2
        _index_error(capsys, expected)
    assert not (tmp_path / "no").exists() and (tmp_path / "a.txt").read_text() == "keep me"
    assert list(cwd.iterdir()) == []


def test_index_build_into_a_read_only_folder(plugin, cwd, capsys, read_only_folder):
    out, reason = read_only_folder
    assert _status([*INDEX, "--out", str(out / "x.nari")]) == 2
    _index_error(capsys, f"index file {out / 'x.nari'}: folder {out}: cannot write in {out} ({reason})")
    assert list(out.iterdir()) == []


def test_index_build_write_that_fails_after_the_build(plugin, tmp_path, cwd, capsys, monkeypatch):
    """The folder was writable when checked, not when written (a permission changed meanwhile)."""
    import narbench.data.store as store

    real_write_temp = store.write_temp

    def refused(path, data):
        if path.suffix != ".nari":  # the toy dataset's cache file
            return real_write_temp(path, data)
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(store, "write_temp", refused)
    out = tmp_path / "x.nari"
    assert _status([*INDEX, "--out", str(out)]) == 2
    _index_error(capsys, f"cannot write {out}: permission denied (EACCES); nothing was written")
    assert not out.exists() and not list(tmp_path.glob(".x.nari*")) and list(cwd.iterdir()) == []


@pytest.mark.parametrize("option, expected", [
    (["--param", "dim=abc"], "encoder 'wl': parameter 'dim' takes an integer (default 2048), got 'abc'"),
    (["--param", "fit=2"], "encoder 'wl' has no parameter 'fit'"),
    (["--max-dim", "0"], "argument --max-dim: expected a positive integer, got '0'"),
    (["--max-dim", "-3"], "argument --max-dim: expected a positive integer, got '-3'"),
])
def test_index_build_bad_parameters(option, expected, plugin, tmp_path, cwd, capsys):
    assert _status([*INDEX, *option, "--out", str(tmp_path / "x.nari")]) == 2
    _index_error(capsys, expected)
    assert not (tmp_path / "x.nari").exists() and list(cwd.iterdir()) == []


def test_index_build_on_cuda_without_cuda(plugin, tmp_path, cwd, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _status([*INDEX, "--device", "cuda", "--out", str(tmp_path / "x.nari")]) == 2
    _index_error(capsys, "device 'cuda': CUDA is not available on this machine; use cpu or auto")  # as `run` says
    assert not (tmp_path / "x.nari").exists()


# ----------------------------------------------------------------------------- 9. 0-dim index


def test_a_zero_dimensional_index_is_refused_built_and_read(tmp_path, toy_dataset, capsys):
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index

    with pytest.raises(ValueError, match="max_dim must be a positive integer"):
        build_index(IndexConfig(encoder="wl", max_dim=0, progress=False), dataset=toy_dataset)
    index = build_index(IndexConfig(encoder="wl", max_dim=4, progress=False), dataset=toy_dataset)
    assert index.embeddings.shape == (len(toy_dataset.graphs), 4)
    index.arrays["embeddings"] = index.arrays["embeddings"][:, :0]  # as the old `--max-dim 0` wrote it
    path = tmp_path / "zero.nari"
    write_index(index, path)
    with pytest.raises(IndexFileError, match=r"its embeddings have shape \[48, 0\]: an index needs"):
        read_index(path)
    assert _status(["index", "info", "--index", str(path)]) == 2  # `search --index` reads it the same way
    _one_line(capsys.readouterr().err, r"its embeddings have shape [48, 0]")


# ------------------------------------------------------------------- 10. search / index lookups


def test_search_with_an_unknown_encoder_or_a_folder_as_index(tmp_path, cwd, capsys):
    from narbench.core.registry import names

    for argv in (["search", "x", "--encoder", "nosuch"], ["index", "info", "--encoder", "nosuch"]):
        assert _status(argv) == 2
        line = _one_line(capsys.readouterr().err, "unknown encoder 'nosuch'; known encoders: ")
        assert ", ".join(names("encoder")) in line and "index build" not in line
    for argv in (["search", "x", "--index", str(tmp_path)], ["index", "info", "--index", str(tmp_path)]):
        assert _status(argv) == 2
        _one_line(capsys.readouterr().err, f"index {tmp_path} is a folder, not an index file: give the .nari file")


def test_index_build_on_nas_records_no_torch_versions(tmp_path):
    """`--dataset nas` crashed reading real's canonical op table from nas's op list: an index of nas
    graphs records no canonical rules and no torch versions (they are not traced from torch)."""
    from narbench.data.dataset import GraphDataset, stratified_split
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index
    from tests.conftest import toy_graphs

    graphs, ops = toy_graphs(), [f"op{i}" for i in range(8)]
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    ds = GraphDataset("nas", "1.0", ops, graphs, "0" * 64, split, meta={"ops": ops})  # nas's header: a list
    index = build_index(IndexConfig(encoder="wl", dataset="nas", progress=False), dataset=ds)
    write_index(index, tmp_path / "nas.nari")
    header = read_index(tmp_path / "nas.nari").header
    assert header["canonical_version"] is None and header["torch_checked"] is None
    assert header["dataset"]["name"] == "nas" and len(header["names"]) == len(graphs)


# ------------------------------------------------------------------------------------ 11. sweep


def test_sweep_out_an_existing_file(tmp_path, cwd, capsys):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    base = ["sweep", "--models", "random+none", "--datasets", "nas", "--profile", "smoke"]
    for out, extra in ((target, []), (target, ["--dry-run"]), (target / "sub", []), (target / "sub", ["--dry-run"])):
        expected = f"sweep output folder {out}{'' if out == target else ': ' + str(target)} is a file, not a folder"
        assert _status([*base, "--out", str(out), *extra]) == 2
        _one_line(capsys.readouterr().err, expected)
    assert target.read_text() == "keep me" and list(cwd.iterdir()) == []


@pytest.mark.parametrize("toml, expected", [
    ('block = "string"', "block must be a list of tables ([[block]] in TOML, one per block), got 'string'"),
    ('[block]\nname = "b"', "block must be a list of tables ([[block]] in TOML, one per block), got {'name': 'b'}"),
    ("block = [1, 2]", "block must be a list of tables"),
    ('[[block]]\ndatasets = ["nas"]\nmodels = ["random+none"]\nsplits = [{a = 1}]',
     "block 1: splits must be a list of names (strings), got {'a': 1}"),
    ('[[block]]\ndatasets = [1]\nmodels = ["random+none"]', "block 1: datasets must be a list of names (strings), got 1"),
    ('[[block]]\ndatasets = ["nas"]\nmodels = [{ model = "gcn+none", params = 3 }]',
     "block 1: params is a table like { key = value }, got 3"),
])
def test_sweep_grid_of_the_wrong_shape(toml, expected, tmp_path, cwd, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(toml + "\n")
    assert _status(["sweep", str(grid), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    _one_line(capsys.readouterr().err, f"error: {grid}: {expected}")
    assert not (tmp_path / "out").exists() and list(cwd.iterdir()) == []


# ---------------------------------------------------------------------- 12. broken plugin encoders

BROKEN = '''
import torch
from narbench.encoder import Encoder


class Base(Encoder):
    """A third party's encoder that breaks in one call."""

    def fit(self, trainer, graphs, labels):
        return None

    def embed(self, trainer, graphs):
        return torch.ones(len(graphs), 4)


class BadInit(Base):
    def __init__(self, *args):
        raise RuntimeError("needs a licence server")


class BadFit(Base):
    def fit(self, trainer, graphs, labels):
        raise ValueError("labels\\nnot understood")


class BadEmbed(Base):
    def embed(self, trainer, graphs):
        return {}[graphs[0].name]


class HalfEmbed(Base):
    def embed(self, trainer, graphs):
        return torch.ones(len(graphs) // 2, 4)


class NoneEmbed(Base):
    def embed(self, trainer, graphs):
        return None
'''


@pytest.fixture
def broken_plugin(plugin, tmp_path, monkeypatch):
    """A distribution `narbench-broken` 0.3 with five encoders that fail as a third party's might."""
    folder = tmp_path / "broken"
    info = folder / "narbench_broken-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: narbench-broken\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[narbench.encoders]\n" + "".join(
        f"{name} = narbench_broken:{cls}\n" for name, cls in (("bad-init", "BadInit"), ("bad-fit", "BadFit"),
                                                              ("bad-embed", "BadEmbed"), ("half", "HalfEmbed"),
                                                              ("none-embed", "NoneEmbed"))))
    (folder / "narbench_broken.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("narbench_broken", None)  # each test imports its own copy
    yield folder / "narbench_broken.py"
    sys.modules.pop("narbench_broken", None)


def _plugin_line(name, call, error):
    return f"encoder {name!r} (plugin narbench_broken:{call[0]} of narbench-broken 0.3) failed in {call[1]}: {error}"


@pytest.mark.parametrize("name, expected", [
    ("bad-init", _plugin_line("bad-init", ("BadInit", "its constructor"), "RuntimeError: needs a licence server")),
    ("bad-fit", _plugin_line("bad-fit", ("BadFit", "fit()"), "ValueError: labels not understood")),
    ("bad-embed", _plugin_line("bad-embed", ("BadEmbed", "embed() of the corpus"), "KeyError: ")),
    ("half", "encoder 'half' returned corpus embeddings of shape [21, 4] for 43 corpus graphs; expected [43, D]: "
             "one row per graph"),
    ("none-embed", "encoder 'none-embed' returned a NoneType as its corpus embeddings; expected a tensor"),
])
def test_a_broken_plugin_encoder_is_one_line_naming_it(name, expected, broken_plugin, tmp_path, cwd, capsys):
    out = tmp_path / "out"
    assert _status(["run", "--encoder", name, "--dataset", "toy", "--profile", "smoke", "--no-progress",
                    "--out", str(out)]) == 2
    line = _one_line(capsys.readouterr().err, expected)
    assert line.startswith("error: ")
    if name.startswith("bad-"):  # where in the plugin it raised
        assert f"(raised at {broken_plugin}:" in line
    assert not [p for p in out.rglob("*") if p.is_file()] and list(cwd.iterdir()) == []


@pytest.mark.parametrize("name, expected", [
    ("bad-fit", _plugin_line("bad-fit", ("BadFit", "fit()"), "ValueError: labels not understood")),
    ("half", "encoder 'half' returned corpus embeddings of shape [24, 4] for 48 corpus graphs; expected [48, D]"),
])
def test_a_broken_plugin_encoder_in_index_build(name, expected, broken_plugin, tmp_path, cwd, capsys):
    assert _status(["index", "build", "--dataset", "toy", "--encoder", name, "--no-progress",
                    "--out", str(tmp_path / "x.nari")]) == 2
    _index_error(capsys, expected)
    assert not (tmp_path / "x.nari").exists()


def test_narbench_own_errors_are_not_blamed_on_a_plugin(broken_plugin):
    """A shipped encoder's exception is a narbench bug (a traceback), and narbench's own error types pass."""
    from narbench.core import registry
    from narbench.eval.retrieval import EmbeddingError

    with pytest.raises(ZeroDivisionError):
        with registry.plugin_call("encoder", "wl", "fit()"):
            raise ZeroDivisionError
    with pytest.raises(EmbeddingError):
        with registry.plugin_call("encoder", "bad-fit", "fit()"):
            raise EmbeddingError("already one line")
    with pytest.raises(registry.PluginError, match=r"failed in fit\(\): OSError: x{297}\.\.\. \(raised at "):
        with registry.plugin_call("encoder", "bad-fit", "fit()"):
            raise OSError("x" * 1000)


def test_tiebreak_keys_that_do_not_match_the_corpus_say_which_is_which():
    import torch

    from narbench.eval.retrieval import top_k_cosine

    with pytest.raises(ValueError, match=r"tiebreak has 1000 keys for a corpus of 500 rows; it needs one key per"):
        top_k_cosine(torch.ones(2, 3), torch.ones(500, 3), tiebreak=np.arange(1000))


def test_an_outside_index_without_outside_models_names_the_dataset_and_the_sets(toy_dataset):
    """graf-lda's `outside` scatter reads validation sets' fitting models; a dataset with none says so, before fitting."""
    from narbench.search_engine.index_build import IndexConfig, fit_encoder

    cfg = IndexConfig(encoder="graf-lda", dataset="toy", params={"outside": 8.0}, progress=False)
    with pytest.raises(ValueError, match="outside=8 reads the fitting models.*'toy' has none of wildval2"):
        fit_encoder(cfg, toy_dataset, outside_sets=("wildval2",))


def test_the_default_outside_is_off_with_a_warning_where_the_dataset_has_no_outside_models(toy_dataset):
    """The index's defaults (`DEFAULT_PARAMS`: graf-lda `outside=64`) build an index of any dataset: without
    validation sets in its vocabulary the scatter is off, said, and not recorded; asked for by name, it is an error."""
    from narbench.search_engine.index_build import DEFAULT_PARAMS, IndexConfig, fit_encoder

    assert DEFAULT_PARAMS["graf-lda"]["outside"] > 0  # else this test reads nothing
    cfg = IndexConfig(encoder="graf-lda", dataset="toy", profile="smoke", progress=False)
    with pytest.warns(UserWarning, match=r"'toy' has none of wildval, .*: the default outside=64 is off"):
        fitted = fit_encoder(cfg, toy_dataset)
    assert fitted.encoder.outside == 0 and "outside" not in fitted.params
    assert fitted.params == {k: v for k, v in DEFAULT_PARAMS["graf-lda"].items() if k != "outside"}
    asked = IndexConfig(encoder="graf-lda", dataset="toy", profile="smoke", params=dict(DEFAULT_PARAMS["graf-lda"]),
                        progress=False)
    with pytest.raises(ValueError, match="outside=64 reads the fitting models.*'toy' has none of wildval, "):
        fit_encoder(asked, toy_dataset)
